#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A stand-in for journald's native socket: receive datagrams on PATH and
append each entry's fields (KEY=value, the binary form decoded) to OUT as one
JSON object per line, until killed.

usage: journal_sink.py PATH OUT
"""
import json
import os
import socket
import struct
import sys

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
with open(out, "a") as f:
    while True:
        data = s.recv(1 << 20)
        fields, i = {}, 0
        while i < len(data):
            nl = data.index(b"\n", i)
            line = data[i:nl]
            if b"=" in line:
                k, v = line.split(b"=", 1)
                i = nl + 1
            else:    # binary: KEY\n, 64-bit little-endian length, value, \n
                k = line
                n = struct.unpack("<Q", data[nl + 1:nl + 9])[0]
                v = data[nl + 9:nl + 9 + n]
                i = nl + 9 + n + 1
            fields[k.decode()] = v.decode(errors="replace")
        f.write(json.dumps(fields) + "\n")
        f.flush()
