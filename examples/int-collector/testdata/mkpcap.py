#!/usr/bin/env python3
"""Writes a capture of Telemetry Report v2.0 packets with scapy, built from
the specifications (p4lang/p4-applications telemetry/specs: INT v2.1 and
Telemetry Report v2.0) independently of dtakit's encoder: each report
carries a flow's packet with an INT-MD stack over UDP.

usage: mkpcap.py OUT.pcap
Flows, paths and reports are the FLOWS table below; TestScapy checks them.
"""
import struct
import sys

from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap

INT_PORT = 5000
REPORT_PORT = 32766

# (source, destination, source port, destination port, path from the
# source, packets, packets dropped at the sink)
FLOWS = [
    ("10.9.0.1", "10.9.1.1", 1111, 80, [11, 22, 33], 5, 0),
    ("10.9.0.2", "10.9.1.2", 2222, 443, [11, 23, 34, 45], 3, 1),
    ("10.9.0.3", "10.9.1.3", 3333, 8080, [12, 24, 35, 46, 57], 4, 0),
]


def int_md(path):
    """INT shim + INT-MD header + stack: node IDs only (bitmap bit 0)."""
    stack = b"".join(struct.pack("!I", n) for n in reversed(path))  # last hop on top
    md = struct.pack("!BBBBHHHH", 2 << 4, 0, 1, 8 - len(path), 0x8000, 0, 0, 0)
    words = (len(md) + len(stack)) // 4
    # shim: type MD (1), NPT 2 (an L4 header follows), length, IP protocol
    shim = struct.pack("!BBH", 1 << 4 | 2 << 2, words, 6)
    return shim + md + stack


def inner(src, dst, sport, dport, path):
    """The flow's TCP packet with INT over UDP inserted before TCP."""
    tcp = bytes(TCP(sport=sport, dport=dport, flags="A"))
    pkt = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=src, dst=dst, ttl=60) / UDP(sport=sport, dport=INT_PORT) / Raw(int_md(path) + tcp))
    return pkt + b"\0" * (-len(pkt) % 4)


def report(seq, node, in_pkt, dropped):
    """Telemetry Report group header and one individual report."""
    hdr = struct.pack("!II", 2 << 28 | 0 << 22 | seq, node)
    md_bits, md = 0, b""
    if dropped:
        md_bits, md = 1, struct.pack("!BBH", 3, 71, 0)  # bit 15: queue, reason
    contents = struct.pack("!HHHH", md_bits, 0, 0, 0) + md + in_pkt
    flags = 0x80 if dropped else 0
    rep_type, in_type = 1, 3  # INT, Ethernet
    ind = struct.pack("!BBBB", rep_type << 4 | in_type, len(contents) // 4, len(md) // 4, flags)
    return hdr + ind + contents


def main():
    pkts, seq = [], 0
    for src, dst, sport, dport, path, n, drops in FLOWS:
        for i in range(n):
            seq += 1
            payload = report(seq, path[-1], inner(src, dst, sport, dport, path), i < drops)
            pkts.append(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="192.0.2.1", dst="192.0.2.100") / UDP(sport=40000, dport=REPORT_PORT) / Raw(payload))
    # Something else on the wire, to be skipped.
    pkts.append(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="192.0.2.1", dst="192.0.2.100") / UDP(sport=53, dport=53) / Raw(b"dns"))
    wrpcap(sys.argv[1], pkts)


if __name__ == "__main__":
    main()
