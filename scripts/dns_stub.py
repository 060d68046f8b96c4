"""The plain-DNS-over-UDP server (RFC 1035 §4) the fault scenarios' name servers share: it reads each query's one
question and sends what `answer(name, qtype)` says. Nothing leaves the machine."""
import socket
import struct

SERVFAIL, NXDOMAIN, TYPE_A = 2, 3, 1


def serve(listen, answer, authoritative=False):
    """Answers queries on LISTEN:53 for ever. `answer(name, qtype)` gets the lower-case name without its final dot
    and returns (rcode, IPv4 address as 4 bytes or None): an address only for an A query with rcode 0."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((listen, 53))
    flags_out = 0x8480 if authoritative else 0x8080
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
        rcode, address = answer(".".join(labels).lower(), qtype)
        answers = b""
        if rcode == 0 and address is not None and qtype == TYPE_A:
            answers = struct.pack("!HHHIH", 0xC00C, TYPE_A, 1, 0, 4) + address
        header = struct.pack("!HHHHHH", ident, flags_out | (flags & 0x0100) | rcode, 1, 1 if answers else 0, 0, 0)
        server.sendto(header + question + answers, peer)
