#!/usr/bin/env python3
"""Writes a capture of Telemetry Reports, one of each version, with scapy
packet classes laid out from the specifications' diagrams (p4lang/
p4-applications telemetry/specs at the tags telemetry_v0.5 and
telemetry_v1.0, and Telemetry Report 2.0 / INT 2.1), independently of
dtakit's encoder:

  1. 0.5: fixed header + switch local report header, an Ethernet/IPv4/UDP
     packet carrying INT 0.5 (shim, header, 3 hops, tail) on INT_PORT;
  2. 1.0: header with RepMdBits (ports, hop latency, queue, egress
     timestamp, drop), an IPv4/TCP packet carrying INT 1.0 over TCP
     (DSCP 0x17), 2 hops of node ID + 4-byte ingress timestamp;
  3. 2.0: group header + one INT individual report (queue occupancy), an
     IPv4 packet with INT-MD over UDP (NPT 2) before its TCP header,
     4 hops of node ID + hop latency.

usage: mkreports.py OUT.pcap   (TestScapyReports checks the values below)
"""
import sys

from scapy.all import (IP, TCP, UDP, BitField, ByteField, Ether, IntField,
                       Packet, Raw, ShortField, wrpcap)

REPORT_PORT = 32766
INT_PORT = 5000


class Report05(Packet):
    name = "Telemetry Report 0.5"
    fields_desc = [BitField("ver", 0, 4), BitField("nproto", 2, 4),
                   BitField("d", 0, 1), BitField("q", 0, 1), BitField("f", 1, 1),
                   BitField("rsvd", 0, 15), BitField("hw_id", 5, 6),
                   IntField("seq", 1001), IntField("ingress_ts", 111111)]


class LocalReport05(Packet):
    name = "Switch Local Report 0.5"
    fields_desc = [IntField("switch_id", 301), ShortField("ig_port", 7), ShortField("eg_port", 8),
                   ByteField("queue_id", 2), BitField("queue_occupancy", 4321, 24), IntField("eg_ts", 222222)]


class Report10(Packet):
    name = "Telemetry Report 1.0"
    fields_desc = [BitField("ver", 1, 4), BitField("length", 9, 4), BitField("nprot", 1, 3),
                   BitField("rep_md_bits", 0b111110, 6), BitField("rsvd", 0, 6),
                   BitField("d", 1, 1), BitField("q", 0, 1), BitField("f", 1, 1), BitField("hw_id", 6, 6),
                   IntField("switch_id", 401), IntField("seq", 2002), IntField("ingress_ts", 333333),
                   # RepMdBits bits 0-4, each 4 octets
                   ShortField("ig_port", 9), ShortField("eg_port", 10), IntField("hop_latency", 650),
                   ByteField("queue_id", 3), BitField("queue_occupancy", 5555, 24), IntField("eg_ts", 444444),
                   ByteField("drop_queue_id", 3), ByteField("drop_reason", 71), ShortField("pad", 0)]


class Group20(Packet):
    name = "Telemetry Report 2.0 group header"
    fields_desc = [BitField("ver", 2, 4), BitField("hw_id", 7, 6), BitField("seq", 3003, 22), IntField("node_id", 501)]


class Individual20(Packet):
    name = "Telemetry Report 2.0 individual report"
    fields_desc = [BitField("rep_type", 1, 4), BitField("in_type", 4, 4), ByteField("rep_len", 0),
                   ByteField("md_len", 1), BitField("d", 0, 1), BitField("q", 1, 1), BitField("f", 1, 1),
                   BitField("i", 0, 1), BitField("rsvd", 0, 4),
                   ShortField("rep_md_bits", 0x1000), ShortField("domain_id", 0), ShortField("ds_md_bits", 0),
                   ShortField("ds_md_status", 0), ByteField("queue_id", 4), BitField("queue_occupancy", 777, 24)]


def words(*ws):
    return b"".join(w.to_bytes(4, "big") for w in ws)


def int05():
    """INT 0.5 over UDP: shim (type 1, length in words with the tail),
    header (ver 0, InsCnt 2, MaxHopCnt 8, TotalHopCnt 3, switch ID + hop
    latency), hops 13, 12, 11 (11 the source, at the bottom), tail."""
    stack = words(13, 30, 12, 20, 11, 10)
    length = (4 + 8 + len(stack) + 4) // 4
    return bytes([1, 0, length, 0]) + bytes([0 << 4, 2, 8, 3]) + words(0xA000 << 16) + stack + bytes([17]) + (80).to_bytes(2, "big") + bytes([0])


def int10():
    """INT 1.0 over TCP: shim (type 1, length with the shim, DSCP 0x17),
    header (ver 1, HopML 2, remaining 6; switch ID + ingress timestamp),
    hops 22, 21."""
    stack = words(22, 9000, 21, 8000)
    length = (4 + 8 + len(stack)) // 4
    return bytes([1, 0, length, 0x17 << 2]) + bytes([1 << 4, 0, 2, 6]) + words(0x8800 << 16) + stack


def int20():
    """INT 2.1 MD over UDP before TCP: shim (type 1, NPT 2, length without
    the shim, IP protocol 6), header (ver 2, HopML 2, remaining 4; node ID
    + hop latency), hops 34, 33, 32, 31."""
    stack = words(34, 400, 33, 300, 32, 200, 31, 100)
    md = bytes([2 << 4, 0, 2, 4]) + words(0xA000 << 16, 0)
    return bytes([1 << 4 | 2 << 2, (len(md) + len(stack)) // 4]) + (6).to_bytes(2, "big") + md + stack


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def outer(payload):
    return Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b") / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=40000, dport=REPORT_PORT) / Raw(payload)


def main():
    inner05 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.5.0.1", dst="10.5.0.2", ttl=61) / UDP(sport=1234, dport=INT_PORT) / Raw(int05())
    r05 = bytes(Report05()) + bytes(LocalReport05()) + bytes(inner05)

    tcp = TCP(sport=4321, dport=443, flags="A")
    inner10 = IP(src="10.1.0.1", dst="10.1.0.2", tos=0x17 << 2, ttl=62) / tcp / Raw(int10())
    r10 = bytes(Report10()) + pad4(bytes(inner10))

    inner20 = pad4(bytes(IP(src="10.2.0.1", dst="10.2.0.2", ttl=60) / UDP(sport=999, dport=INT_PORT) / Raw(int20() + bytes(TCP(sport=999, dport=22, flags="A")))))
    ind = Individual20(rep_len=(8 + 4 + len(inner20)) // 4)  # main contents, MD, inner
    r20 = bytes(Group20()) + bytes(ind) + inner20

    wrpcap(sys.argv[1], [outer(r05), outer(r10), outer(r20)])


if __name__ == "__main__":
    main()
