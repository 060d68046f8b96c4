#!/usr/bin/env python3
"""A name server for one name, for scripts/faults.sh: it answers SERVFAIL to every query for that name during
the first SECONDS after the first such query, then the name's A record (ADDRESS); an AAAA query gets no
address, any other name NXDOMAIN. Plain DNS over UDP (RFC 1035 §4), nothing leaves the machine.

  flaky-dns.py LISTEN_ADDRESS NAME ADDRESS SECONDS
"""
import socket
import struct
import sys
import time

listen, name, address, seconds = sys.argv[1], sys.argv[2].lower().rstrip("."), sys.argv[3], float(sys.argv[4])
SERVFAIL, NXDOMAIN, TYPE_A = 2, 3, 1
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind((listen, 53))
first = None
while True:
    query, peer = server.recvfrom(4096)
    if len(query) < 12:
        continue
    ident, flags, questions = struct.unpack("!HHH", query[:6])
    labels, at = [], 12
    while at < len(query) and query[at] != 0:
        labels.append(query[at + 1:at + 1 + query[at]].decode("ascii", "replace"))
        at += 1 + query[at]
    if questions != 1 or at + 5 > len(query):
        continue
    qtype = struct.unpack("!H", query[at + 1:at + 3])[0]
    question = query[12:at + 5]
    answers, rcode = b"", 0
    if ".".join(labels).lower() != name:
        rcode = NXDOMAIN
    else:
        first = first or time.monotonic()
        if time.monotonic() - first < seconds:
            rcode = SERVFAIL
        elif qtype == TYPE_A:
            answers = struct.pack("!HHHIH", 0xC00C, TYPE_A, 1, 0, 4) + socket.inet_aton(address)
    header = struct.pack("!HHHHHH", ident, 0x8080 | (flags & 0x0100) | rcode, 1, 1 if answers else 0, 0, 0)
    server.sendto(header + question + answers, peer)
