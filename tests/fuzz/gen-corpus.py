#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write the hand-made seed inputs of every fuzz target into corpus/<target>/.

Seeds are small, valid (or nearly valid) inputs that get a fuzzer past the
magic numbers and checksums quickly; run-libfuzzer.sh adds what the fuzzers
find.  Run from anywhere: python3 tests/fuzz/gen-corpus.py
Needs the zstd command for the stored-form hitset seeds (skipped without it).
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- tier.meta (include/tier/meta.h) ----
def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def meta(version, flags, object_size, extent_size, nbits, valid=(), dirty=()):
    words = (nbits + 63) // 64
    valid = list(valid) + [0] * (words - len(valid))
    dirty = list(dirty) + [0] * (words - len(dirty))
    body = b"".join(struct.pack("<Q", w) for w in valid + dirty)
    hdr = struct.pack("<IBBHQIIIIQ", 0x544D5254, 1, flags, 40, version,
                      object_size, extent_size, nbits, 0, 0)
    rec = hdr + body
    crc = crc32c(rec)
    return rec[:28] + struct.pack("<I", crc) + rec[32:]


def gen_meta():
    put("meta", "clean", meta(1, 0, 4 << 20, 0, 0))
    put("meta", "dirty", meta(7, 1, 4 << 20, 0, 0))
    put("meta", "incomplete", meta(2, 4, 64 << 10, 0, 0))
    put("meta", "extents-16", meta(3, 3, 64 << 10, 4096, 16, [0xFFFF], [0x00F0]))
    put("meta", "extents-clean", meta(3, 2, 64 << 10, 4096, 16, [0x0F0F], [0]))
    put("meta", "extents-1024", meta(9, 3, 4 << 20, 4096, 1024,
                                    [0xFFFFFFFFFFFFFFFF] * 16, [1] * 16))
    put("meta", "extents-odd", meta(5, 3, 100000, 4096, 25, [0x1FFFFFF], [0x1]))
    bad = bytearray(meta(1, 0, 4 << 20, 0, 0))
    bad[28] ^= 1
    put("meta", "bad-crc", bytes(bad))


# ---- archived hitsets (libtier/hitset.c, struct hs_wire) ----
def hitset_record(nbits, k, words_set, start=1000, end=61000, inserts=500,
                  capacity=1024, seed=0x1234, fpp=0.05):
    words = [0] * (nbits // 64)
    for i, w in words_set.items():
        words[i] = w
    bits_set = sum(bin(w).count("1") for w in words)
    fpp_bits = struct.unpack("<Q", struct.pack("<d", fpp))[0]
    hdr = struct.pack("<IHHQQQQQQQQ", 0x31534854, 1, k, start, end, inserts,
                      capacity, seed, nbits, bits_set, fpp_bits)
    return hdr + b"".join(struct.pack("<Q", w) for w in words)


def gen_hitset():
    recs = {
        "small": hitset_record(64, 1, {0: 0x8000000000000001}),
        "typical": hitset_record(6400, 4, {i: (0x0101010101010101 << (i % 8))
                                           for i in range(0, 100, 3)}),
        "empty": hitset_record(1024, 16, {}),
        "full": hitset_record(128, 2, {0: (1 << 64) - 1, 1: (1 << 64) - 1},
                              start=5, end=5, fpp=0.5),
    }
    for name, raw in recs.items():
        put("hitset", "raw-" + name, b"\x01" + raw)   # odd: harness compresses
    zstd = shutil.which("zstd")
    if not zstd:
        print("gen-corpus: no zstd command: stored-form hitset seeds skipped",
              file=sys.stderr)
        return
    for name, raw in recs.items():
        with tempfile.NamedTemporaryFile() as f:
            f.write(raw)
            f.flush()
            z = subprocess.run([zstd, "-q", "-c", "--check", "-3", f.name],
                               check=True, stdout=subprocess.PIPE).stdout
        put("hitset", "zstd-" + name, b"\x00" + z)


# ---- [tier] key=value lines (libtier/params.c) ----
def gen_params():
    put("params", "defaults", "cache_mode=writeback\nhit_set_type=bloom\n"
        "promote_granularity=extent\nevict_policy=s3fifo\nwrite_miss=promote\n")
    put("params", "sizes", "target_max_bytes=10G\nobject_size=4MiB\n"
        "extent_size=4K\npromote_max_bytes_sec=1.5M\ntarget_max_objects=1000\n")
    put("params", "times", "cache_min_flush_age=600\ncache_min_evict_age=1.5s\n"
        "hit_set_period=500ms\ncache_min_flush_age=2h\nhit_set_period=1d\n")
    put("params", "ratios", "cache_target_dirty_ratio=0.4\n"
        "cache_target_dirty_high_ratio=60%\ncache_target_full_ratio=.8\n"
        "hit_set_fpp=0.000001\n")
    put("params", "bad", "object_size=3000\nnope=1\nhit_set_count=65\n"
        "cache_mode=\n=x\nagent_max_ops\nhit_set_fpp=1e-7\n")


# ---- tierd.conf (daemon/config.c) ----
def gen_config():
    example = os.path.join(HERE, "..", "..", "deploy", "tierd.conf.example")
    if os.path.exists(example):
        with open(example, "rb") as f:
            put("config", "example", f.read())
    put("config", "local", """[global]
backend = local
listen = unix:/run/tierd/nbd.sock, 127.0.0.1:10809
admin_socket = /run/tierd/tierd.asok
log_level = debug
max_requests_per_conn = 32
max_bytes_per_conn = 16M

[local]
data_dir = /var/lib/tierd
base_profile = hdd
cache_profile = ssd
base_read_latency_us = 8000
cache_bandwidth = 500M/s
direct_io = yes

[tier]
cache_mode = writeback
target_max_bytes = 1G
hit_set_period = 60s
promote_granularity = extent

[image.vol0]
size = 10G

[image.vol-1]
size = 1M
read_only = true
""")
    put("config", "rados", """; rados
[global]
backend = rados
listen = [::1]:10809
prometheus = 127.0.0.1:9464

[rados]
conf = /etc/ceph/ceph.conf
client_name = admin
keyring =
base_pool = rbd
cache_pool = rbd-cache
op_timeout = 30s

[image.disk]
rbd_image = disk1
""")
    put("config", "errors", """[global]
listen = nowhere
lisen = 1.2.3.4:5
[tier]
object_size = 4M # comment
object_size = 8M
[image.bad name]
[image.x]
size = 513
""")


# ---- block traces (tools/trace.c) ----
def gen_trace():
    put("trace", "csv", "time_us,op,offset,length\n0,R,0,4096\n10,W,4096,8192\n"
        "10,trim,0,512\n# comment\n\n20,F,0,0\n30,write,1048576,4096\n")
    put("trace", "iolog2", "fio version 2 iolog\n/dev/nbd0 add\n/dev/nbd0 open\n"
        "/dev/nbd0 write 0 4096\n/dev/nbd0 wait 100 0\n/dev/nbd0 read 4096 4096\n"
        "/dev/nbd0 sync 0 0\n/dev/nbd0 trim 0 8192\n/dev/nbd0 close\n")
    put("trace", "iolog3", "fio version 3 iolog\n0 disk add\n1 disk open\n"
        "5 disk read 0 512\n9 disk datasync 0 0\n12 disk wait 5 0\n"
        "15 disk write 512 512\r\n20 disk close\n")
    put("trace", "bad", "0,R,0,4096\n5,X,0,1\n")
    put("trace", "many-files", "fio version 2 iolog\n" +
        "".join("f%d add\n" % i for i in range(65)))


# ---- NBD client byte streams (daemon/nbd*.c) ----
NBD_NEW_VERSION = 0x49484156454F5054
REQ_MAGIC = 0x25609513


def opt(o, data=b""):
    return struct.pack(">QII", NBD_NEW_VERSION, o, len(data)) + data


def go(name, infos=(), o=7):
    n = name.encode()
    return opt(o, struct.pack(">I", len(n)) + n + struct.pack(">H", len(infos)) +
               b"".join(struct.pack(">H", i) for i in infos))


def req(cmd, off=0, count=0, flags=0, cookie=1, payload=b""):
    return struct.pack(">IHHQQI", REQ_MAGIC, flags, cmd, cookie, off, count) + payload


READ, WRITE, DISC, FLUSH, TRIM, CACHE, WZ, BS = range(8)
FLAGS = struct.pack(">I", 3)   # FIXED_NEWSTYLE | NO_ZEROES


def meta_ctx(o, name, queries):
    n = name.encode()
    d = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        d += struct.pack(">I", len(q)) + q
    return opt(o, d)


def client_hello():
    """A real TLS ClientHello (Python's ssl over memory BIOs)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def gen_nbd():
    sessions = {
        "go-io": FLAGS + go("fuzz", [1, 3]) +
        req(WRITE, 0, 4096, cookie=1, payload=b"\xab" * 4096) +
        req(READ, 0, 4096, cookie=2) + req(FLUSH, cookie=3) +
        req(TRIM, 65536, 65536, cookie=4) + req(WZ, 131072, 8192, cookie=5) +
        req(CACHE, 0, 262144, cookie=6) +
        req(WRITE, 70000, 100, flags=1, cookie=7, payload=b"z" * 100) +
        req(DISC),
        "structured": FLAGS + opt(8) + go("") +
        req(READ, 4096, 8192) + req(READ, 1048576 - 512, 512, cookie=2) + req(DISC),
        "export-name": struct.pack(">I", 1) + opt(1, b"fuzz") +
        req(READ, 1048576, 1) + req(READ, 0, 0) +
        req(WRITE, 1048000, 1000, payload=b"q" * 1000) +
        req(BS, 0, 4096) + req(READ, 0, 4096, flags=0x80),
        "list-info-ro": FLAGS + opt(3) + opt(3, b"x") + go("ro", [0, 1, 2, 3], o=6) +
        go("nope") + go("ro") + req(WRITE, 0, 512, payload=b"w" * 512) +
        req(READ, 0, 512) + req(TRIM, 0, 512) + req(FLUSH) + req(DISC),
        "backpressure": FLAGS + go("fuzz") +
        b"".join(req(READ, i * 65536, 65536, cookie=i) for i in range(12)) +
        b"".join(req(WRITE, i * 4096, 4096, cookie=100 + i, payload=bytes([i]) * 4096)
                 for i in range(6)),
        "options-odd": FLAGS + opt(9, b"\0" * 9000) + opt(10) + opt(11) +
        opt(5) + opt(8, b"x") + go("fuzz", o=6)[:-2] + opt(2),
        "truncated": FLAGS + go("fuzz") + req(WRITE, 0, 65536) + b"partial",
        "bad-flags": struct.pack(">I", 0x80),
        "oversize": FLAGS + go("fuzz") + req(READ, 0, 64 << 20) +
        req(WRITE, 0, 64 << 20) + b"junk",
        # metadata contexts (nbd-status.c): before and after STRUCTURED_REPLY,
        # malformed, then BLOCK_STATUS good and bad, around writes
        "block-status": FLAGS + meta_ctx(10, "fuzz", [b"base:allocation"]) + opt(8) +
        meta_ctx(9, "fuzz", []) + meta_ctx(9, "", [b"base:"]) + opt(10, b"\0\0\0\0\xff") +
        meta_ctx(10, "nope", [b"base:allocation"]) +
        meta_ctx(10, "fuzz", [b"x:y", b"base:allocation"]) + go("fuzz") +
        req(BS, 0, 1 << 20, cookie=1) + req(WRITE, 8192, 4096, cookie=2, payload=b"b" * 4096) +
        req(BS, 0, 65536, flags=8, cookie=3) + req(BS, 0, 0, cookie=4) +
        req(BS, (1 << 20) - 512, 1024, cookie=5) + req(BS, 4096, 4096, flags=0x40, cookie=6) +
        req(TRIM, 0, 65536, cookie=7) + req(BS, 0, 0xFFFFFFFF, cookie=8) + req(DISC),
        # the server runs tls = on (PSK): STARTTLS, then TLS records
        "starttls-hello": FLAGS + opt(5) + client_hello(),
        "starttls-garbage": FLAGS + opt(5) + b"\x16\x03\x01\x40\x00" + b"\x01" * 64,
        "starttls-twice": FLAGS + opt(5, b"x") + opt(5) + b"\x15\x03\x03\x00\x02\x02\x28",
    }
    # byte 0 is the harness mode (see fuzz_nbd.c): 0 = one write, no faults
    for name, stream in sessions.items():
        put("nbd", name, b"\x00" + stream)
    variants = [
        ("go-io", 0x41, "chunks16"),         # 16-byte chunks
        ("export-name", 0x01, "chunks1"),     # byte by byte
        ("backpressure", 0xC1, "chunks4k"),   # 4 KiB chunks: payload read direct
        ("go-io", 0x02, "shutdown"),
        ("backpressure", 0x02, "shutdown"),
        ("truncated", 0x03, "shutdown-chunks1"),
        ("go-io", 0x04, "faults10"),
        ("structured", 0x08, "faults50"),
        ("backpressure", 0x0E, "faults-shutdown"),
    ]
    for name, mode, tag in variants:
        put("nbd", "%s-%s" % (name, tag), bytes([mode]) + sessions[name])


if __name__ == "__main__":
    gen_meta()
    gen_hitset()
    gen_params()
    gen_config()
    gen_trace()
    gen_nbd()
