#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""NBD_OPT_STARTTLS against a running tierd, with a raw socket and Python's ssl.

usage: nbd_tls.py MODE SOCKET_PATH EXPORT PKI_DIR [HANDSHAKE_TIMEOUT_S]

MODE is the server's tls setting: off, on or require.  PKI_DIR holds
ca-cert.pem, client-cert.pem and client-key.pem.  Each case checks the
documented answer (proto.md "TLS support"); after every case a fresh TLS
client must still get served.  Exits 0 when every case passed, 1 otherwise.
"""
import os
import socket
import ssl
import struct
import sys
import time

sys.argv, _argv = [sys.argv[0], sys.argv[2], sys.argv[3], sys.argv[3]], sys.argv
import nbd_abuse as nb  # noqa: E402  (shares the raw-socket helpers)

MODE, SOCK, EXPORT, PKI = _argv[1], _argv[2], _argv[3], _argv[4]
HS_TIMEOUT = float(_argv[5]) if len(_argv) > 5 else None
OPT_STARTTLS = 5
ERR_POLICY, ERR_TLS_REQD = (1 << 31) + 2, (1 << 31) + 5


def tls_ctx():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False          # a unix socket has no host name
    ctx.load_verify_locations(os.path.join(PKI, "ca-cert.pem"))
    ctx.load_cert_chain(os.path.join(PKI, "client-cert.pem"),
                        os.path.join(PKI, "client-key.pem"))
    return ctx


def starttls(s):
    nb.send_opt(s, OPT_STARTTLS)
    _, rep, data = nb.recv_opt_reply(s)
    assert rep == nb.REP_ACK and not data, "STARTTLS refused: %x" % rep
    t = tls_ctx().wrap_socket(s)
    t.settimeout(nb.TIMEOUT)
    return t


def tls_client():
    return starttls(nb.connect_raw())


def healthy():
    s = tls_client()
    size, _ = nb.go(s, EXPORT)
    nb.req(s, nb.CMD_READ, 0, 4096, cookie=7)
    err, cookie, data = nb.simple_reply(s, 4096)
    assert err == 0 and cookie == 7 and len(data) == 4096, "read after TLS failed"
    nb.req(s, nb.CMD_DISC, 0, 0)
    s.close()
    return size


def case_require_refuses_plaintext_options():
    s = nb.connect_raw()
    for opt, data in ((nb.OPT_LIST, b""), (nb.OPT_SR, b""),
                      (nb.OPT_INFO, struct.pack(">I", 0) + struct.pack(">H", 0)),
                      (nb.OPT_GO, struct.pack(">I", 0) + struct.pack(">H", 0))):
        nb.send_opt(s, opt, data)
        _, rep, _ = nb.recv_opt_reply(s)
        assert rep == ERR_TLS_REQD, "option %d without TLS: %x, want TLS_REQD" % (opt, rep)
    # still allowed to upgrade afterwards
    t = starttls(s)
    nb.go(t, EXPORT)
    t.close()


def case_require_export_name_plaintext_closes():
    s = nb.connect_raw()
    n = EXPORT.encode()
    nb.send_opt(s, nb.OPT_EXPORT_NAME, n)
    nb.expect_closed(s)


def case_abort_allowed_before_tls():
    s = nb.connect_raw()
    nb.send_opt(s, nb.OPT_ABORT)
    _, rep, _ = nb.recv_opt_reply(s)
    assert rep == nb.REP_ACK, "ABORT before TLS: %x" % rep
    nb.expect_closed(s)


def case_starttls_twice_invalid():
    t = tls_client()
    nb.send_opt(t, OPT_STARTTLS)
    _, rep, _ = nb.recv_opt_reply(t)
    assert rep == nb.ERR_INVALID, "second STARTTLS: %x, want INVALID" % rep
    nb.go(t, EXPORT)
    t.close()


def case_starttls_with_data_invalid():
    s = nb.connect_raw()
    nb.send_opt(s, OPT_STARTTLS, b"xx")
    _, rep, _ = nb.recv_opt_reply(s)
    assert rep == nb.ERR_INVALID, "STARTTLS with data: %x" % rep
    s.close()


def case_structured_before_tls_forgotten():
    s = nb.connect_raw()
    nb.send_opt(s, nb.OPT_SR)
    _, rep, _ = nb.recv_opt_reply(s)
    if MODE == "require":
        assert rep == ERR_TLS_REQD, "SR before TLS under require: %x" % rep
    else:
        assert rep == nb.REP_ACK
    t = starttls(s)
    nb.go(t, EXPORT)
    nb.req(t, nb.CMD_READ, 0, 512, cookie=3)
    err, cookie, _ = nb.simple_reply(t, 512)   # simple: SR was negotiated in plaintext
    assert err == 0 and cookie == 3
    t.close()


def case_large_write_read_over_tls():
    t = tls_client()
    nb.go(t, EXPORT, structured=True)
    payload = os.urandom(3 << 20)    # many TLS records each way
    nb.req(t, nb.CMD_WRITE, 1 << 20, len(payload), cookie=11, payload=payload)
    err, cookie, _ = nb.simple_reply(t)
    assert err == 0 and cookie == 11, "TLS write: %d" % err
    nb.req(t, nb.CMD_READ, 1 << 20, len(payload), cookie=12)
    hdr = nb.recvn(t, 20)
    magic, flags, typ, cookie, ln = struct.unpack(">IHHQI", hdr)
    assert magic == nb.STRUCT_MAGIC and typ == 1 and ln == 8 + len(payload)
    data = nb.recvn(t, ln)[8:]
    assert data == payload, "TLS read back differs"
    t.close()


def case_garbage_instead_of_client_hello():
    s = nb.connect_raw()
    nb.send_opt(s, OPT_STARTTLS)
    _, rep, _ = nb.recv_opt_reply(s)
    assert rep == nb.REP_ACK
    s.sendall(b"\x16\x03\x01\xff\xff" + os.urandom(4096))   # a record header lying about its size
    nb.expect_closed(s)
    s = nb.connect_raw()
    nb.send_opt(s, OPT_STARTTLS)
    nb.recv_opt_reply(s)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n" * 50)
    nb.expect_closed(s)


def case_garbage_after_handshake():
    t = tls_client()
    # a forged application-data record (bad MAC) under the live session
    sock = socket.socket(fileno=os.dup(t.fileno()))
    sock.sendall(b"\x17\x03\x03\x00\x40" + os.urandom(64))
    sock.settimeout(nb.TIMEOUT)
    nb.expect_closed(sock)
    sock.close()
    t.close()


def hs_case_tls_handshake_stalls():
    s = nb.connect_raw()
    nb.send_opt(s, OPT_STARTTLS)
    nb.recv_opt_reply(s)
    t0 = time.monotonic()
    nb.expect_closed(s)    # nothing sent: the handshake deadline closes it
    assert time.monotonic() - t0 < HS_TIMEOUT + 5, "TLS handshake deadline not applied"


def case_off_policy():
    s = nb.connect_raw()
    nb.send_opt(s, OPT_STARTTLS)
    _, rep, _ = nb.recv_opt_reply(s)
    assert rep == ERR_POLICY, "STARTTLS with tls = off: %x, want POLICY" % rep
    nb.go(s, EXPORT)      # plaintext goes on
    s.close()


def main():
    if MODE == "off":
        cases = [case_off_policy]
        check = lambda: nb.connect(EXPORT)[0].close()   # noqa: E731
    else:
        cases = [case_starttls_twice_invalid, case_starttls_with_data_invalid,
                 case_structured_before_tls_forgotten, case_large_write_read_over_tls,
                 case_garbage_instead_of_client_hello, case_garbage_after_handshake,
                 case_abort_allowed_before_tls]
        if MODE == "require":
            cases += [case_require_refuses_plaintext_options,
                      case_require_export_name_plaintext_closes]
        if HS_TIMEOUT:
            cases.append(hs_case_tls_handshake_stalls)
        check = healthy
    failed = 0
    for c in cases:
        try:
            c()
            check()
            print("ok   %s" % c.__name__)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print("FAIL %s: %s: %s" % (c.__name__, type(e).__name__, e))
    print("%d/%d cases passed" % (len(cases) - failed, len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
