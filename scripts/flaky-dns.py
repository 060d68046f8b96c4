#!/usr/bin/env python3
"""A name server for one name, for scripts/faults.sh: it answers SERVFAIL to every query for that name during
the first SECONDS after the first such query, then the name's A record (ADDRESS); an AAAA query gets no
address, any other name NXDOMAIN.

  flaky-dns.py LISTEN_ADDRESS NAME ADDRESS SECONDS
"""
import socket
import sys
import time

from dns_stub import NXDOMAIN, SERVFAIL, serve

listen, name, address, seconds = sys.argv[1], sys.argv[2].lower().rstrip("."), sys.argv[3], float(sys.argv[4])
first = None


def answer(queried, qtype):
    global first
    if queried != name:
        return NXDOMAIN, None
    first = first or time.monotonic()
    if time.monotonic() - first < seconds:
        return SERVFAIL, None
    return 0, socket.inet_aton(address)


serve(listen, answer)
