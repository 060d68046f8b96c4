#!/usr/bin/env python3
"""A name server for scripts/faults.sh refused-origins: h<N>.refused.test has one A record, the private address
10.<N/65536>.<N/256%256>.<N%256> (each name a host of its own that the worker's policy refuses), c<N>.refused.test
the loopback address 127.<1+N/65536>.<N/256%256>.<N%256> (nothing listens there: the host refuses the connection);
no AAAA records; any other name is NXDOMAIN.

  refused-dns.py LISTEN_ADDRESS
"""
import re
import sys

from dns_stub import NXDOMAIN, serve

NAME = re.compile(r"([hc])(\d{1,7})\.refused\.test")


def answer(name, qtype):
    host = NAME.fullmatch(name)
    if host is None:
        return NXDOMAIN, None
    n = int(host.group(2))
    top = [10, (n >> 16) & 255] if host.group(1) == "h" else [127, 1 + ((n >> 16) & 127)]
    return 0, bytes(top + [(n >> 8) & 255, n & 255])


serve(sys.argv[1], answer, authoritative=True)
