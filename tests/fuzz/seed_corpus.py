#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed files of the fuzz corpora (tests/fuzz/corpus/<target>/seed-*) from what the
other tests already use: the raw strings of the unit tests (configurations, manifests,
kubeconfigs, watch events), the demo configuration and manifests, egwctl command lines, and
frames like the packet tests' (built here byte by byte, with the rig's addresses).

Run it from the repository root after changing those tests; files the fuzzers kept or that
reproduce a fixed bug are not touched (they are not named seed-*)."""
import glob
import hashlib
import json
import os
import re
import struct
import sys

try:
    import yaml
except ImportError:  # python3-yaml (scripts/deps.sh); only the watch seeds need it
    yaml = None

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
RAW = re.compile(r'R"([A-Za-z_]*)\((.*?)\)\1"', re.S)


def raw_strings(path):
    with open(os.path.join(ROOT, path)) as f:
        return [m.group(2) for m in RAW.finditer(f.read())]


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


written = {}


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > 16384:
        return
    name = "seed-" + hashlib.sha1(data).hexdigest()[:12]
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    written[target] = written.get(target, 0) + 1


def clear_seeds():
    for f in glob.glob(os.path.join(CORPUS, "*", "seed-*")):
        os.remove(f)


# ---- configuration loader ----
def config_seeds():
    for p in sorted(glob.glob(os.path.join(ROOT, "config", "*.json"))):
        put("config", read(os.path.relpath(p, ROOT)))
    for s in raw_strings("tests/unit/config/test_config.cpp") + raw_strings("tests/unit/config/test_reload.cpp"):
        if "{" in s:
            put("config", s)


# ---- manifests: byte 0 bit 0 = JSON file ----
def manifest_seeds():
    for p in sorted(glob.glob(os.path.join(ROOT, "config", "demo-manifests", "*")) +
                    glob.glob(os.path.join(ROOT, "docker", "k8s", "*.yaml"))):
        if p.endswith(".md"):
            continue
        put("manifest", bytes([1 if p.endswith(".json") else 0]) + read(os.path.relpath(p, ROOT)))
    for s in raw_strings("tests/unit/model/test_manifests.cpp") + raw_strings("tests/unit/model/test_objects.cpp"):
        put("manifest", b"\x01" + s.encode() if s.lstrip().startswith(("{", "[")) else b"\x00" + s.encode())


# ---- EgressFirewall objects: JSON text; the unit tests' rule lists, wrapped in an object ----
def egress_firewall_seeds():
    for s in raw_strings("tests/unit/model/test_egress_firewall.cpp"):
        put("egress_firewall", json.dumps({
            "apiVersion": "k8s.ovn.org/v1", "kind": "EgressFirewall",
            "metadata": {"name": "default", "namespace": "web"},
            "spec": {"egress": json.loads(s)}}))
    for egress in ([], [{"type": "Deny", "to": {"cidrSelector": "0.0.0.0/0"}}],
                   [{"type": "Allow", "to": {"dnsName": "*.Example.COM."}, "ports": [{"protocol": "SCTP"}]},
                    {"type": "Deny", "to": {"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}},
                    {"type": "Deny", "to": {"cidrSelector": "2001:db8::1/33"}, "ports": [{"protocol": "UDP", "port": 53}]}]):
        put("egress_firewall", json.dumps({
            "apiVersion": "k8s.ovn.org/v1", "kind": "EgressFirewall",
            "metadata": {"name": "default", "namespace": "web"}, "spec": {"egress": egress}}))


def dns_name_resolver_seeds():
    def obj(name, resolved):
        o = {"apiVersion": "network.openshift.io/v1alpha1", "kind": "DNSNameResolver",
             "metadata": {"name": "dns-1", "namespace": "openshift-ovn-kubernetes"}, "spec": {"name": name}}
        if resolved is not None:
            o["status"] = {"resolvedNames": resolved}
        return json.dumps(o)

    def addr(ip, ttl, when="2024-05-01T10:00:00Z"):
        return {"ip": ip, "ttlSeconds": ttl, "lastLookupTime": when}

    put("dns_name_resolver", obj("www.example.com.", None))
    put("dns_name_resolver", obj("*.Example.COM.", [
        {"dnsName": "www.example.com.", "resolvedAddresses": [addr("192.0.2.1", 30), addr("2001:db8::1", 5)],
         "resolutionFailures": 0},
        {"dnsName": "a.b.example.com.", "resolvedAddresses": [addr("198.51.100.1", 0, "2024-05-01T10:00:01.25+02:00")]},
        {"dnsName": "*.example.com."}]))
    put("dns_name_resolver", obj("*.example.com.", [{"dnsName": "x.example.com.",
                                                     "resolvedAddresses": [addr("192.0.2.300", -1, "yesterday")]}]))


# ---- EgressQoS objects: JSON text; the unit tests' rule lists, wrapped in an object ----
def egress_qos_seeds():
    for s in raw_strings("tests/unit/model/test_egress_qos.cpp"):
        put("egress_qos", json.dumps({
            "apiVersion": "k8s.ovn.org/v1", "kind": "EgressQoS",
            "metadata": {"name": "default", "namespace": "web"},
            "spec": {"egress": json.loads(s)}}))
    for name, egress in (("default", []), ("other", [{"dscp": 8}]),
                         ("default", [{"dscp": 46, "dstCIDR": "192.0.2.9/24", "podSelector": {"matchLabels": {"a": "b"}}},
                                      {"dscp": 63, "dstCIDR": "2001:db8::/33"},
                                      {"dscp": 0, "podSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}])):
        put("egress_qos", json.dumps({
            "apiVersion": "k8s.ovn.org/v1", "kind": "EgressQoS",
            "metadata": {"name": name, "namespace": "web"}, "spec": {"egress": egress}}))


# ---- kubeconfig: byte 0 picks the context ----
def kubeconfig_seeds():
    for s in raw_strings("tests/unit/k8s/test_credentials.cpp"):
        for ctx in (0, 2):
            put("kubeconfig", bytes([ctx]) + s.encode())


# ---- watch streams: kind, 4 chunk sizes, body ----
def objects_of_demo():
    out = []
    for p in sorted(glob.glob(os.path.join(ROOT, "config", "demo-manifests", "*"))):
        text = read(os.path.relpath(p, ROOT)).decode()
        if p.endswith(".json"):
            doc = json.loads(text)
            out.extend(doc.get("items", [doc]) if isinstance(doc, dict) else [])
        elif p.endswith(".yaml") and yaml:
            out.extend(d for d in yaml.safe_load_all(text) if isinstance(d, dict))
    return out


def watch_seeds():
    kinds = {"Service": 0, "EndpointSlice": 1, "Node": 2, "EgressService": 3, "Lease": 4}
    rv = 100
    for obj in objects_of_demo():
        kind = obj.get("kind")
        if kind not in kinds:
            continue
        obj = dict(obj)
        meta = dict(obj.get("metadata", {}))
        meta["resourceVersion"] = str(rv)
        rv += 1
        obj["metadata"] = meta
        lines = [json.dumps({"type": t, "object": obj}) for t in ("ADDED", "MODIFIED", "DELETED")]
        lines.append(json.dumps({"type": "BOOKMARK", "object": {"kind": kind, "metadata": {"resourceVersion": str(rv)}}}))
        body = ("\n".join(lines) + "\n").encode()
        put("watch", bytes([kinds[kind], 0, 0, 0, 0]) + body)
        put("watch", bytes([kinds[kind], 1, 7, 64, 3]) + body)
    put("watch", bytes([2, 5, 5, 5, 5]) + b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n')
    put("watch", bytes([0x80, 13, 0, 0, 0]) + b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"},"spec":{"s":"x\\"}{"}}}')
    put("watch", bytes([2, 3, 0, 0, 0]) + b'{"type":"RENAMED","object":{}}\n{"type":"ADDED"}\n[1]')
    # Liveness Leases with the EgressIP facts a gateway publishes (good, then bad values).
    for n, annotations in enumerate([
        {"egw.io/outside-subnets": "10.1.0.0/24,2001:db8:1::/64", "egw.io/egress-ip-capacity": "12"},
        {"egw.io/outside-subnets": ""},
        {"egw.io/outside-subnets": "10.1.0.0/24,,10.2.0.0/33", "egw.io/egress-ip-capacity": "-1"},
    ]):
        lease = {"metadata": {"name": "egw-node-gw-%d" % n, "namespace": "egw-system", "resourceVersion": str(200 + n),
                              "annotations": annotations},
                 "spec": {"holderIdentity": "gw-%d" % n, "leaseDurationSeconds": 2}}
        put("watch", bytes([4, 0, 0, 0, 0]) + (json.dumps({"type": "ADDED", "object": lease}) + "\n").encode())


# ---- CLI: byte 0 = mode ----
def cli_seeds():
    lines = []
    doc = read("docs/cli.md").decode()
    for m in re.finditer(r"^\s*(?:egw>\s*)?((?:show|set|clear|reload|help|quit)\b[^\n`|]*)", doc, re.M):
        lines.append(m.group(1).strip())
    lines = sorted(set(l for l in lines if l))[:60]
    for l in lines:
        put("cli", b"\x03" + l.encode())
    put("cli", b"\x00" + "".join("run %s\n" % l for l in lines[:20]).encode() +
        b"complete show p\ncomplete set \ncomplete \nrun --json show ports\nbogus x\n")
    resp = b"ok 5\nhello" + b"error 12\nno such port" + b"bye 0\n"
    put("cli", b"\x01" + resp)
    put("cli", b"\x01" + b"c ports\nc port\nh PORT: a port name or id\n")
    # The address filters of both families, and what they refuse (a prefix, a zone, brackets).
    put("cli", b"\x03show sessions saddr ::ffff:10.0.0.1 daddr 2001:DB8:0:0::1 proto icmpv6 sport 0")
    put("cli", b"\x00run show sessions daddr fd00::/64\nrun show sessions saddr fe80::1%eth0\n"
        b"run show sessions saddr [2001:db8::1]:80\ncomplete show sessions saddr fd00:\n")
    put("cli", b"\x02" + b"show po\tst\t\r" + b"\x1b[A\x1b[D\x1b[C\x7f\x01\x05\x0b\x15\x17\r" + b"\x04")


# ---- packets: see the header of fuzz_packet.cpp for the layout ----
def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def ip4(a, b, c, d):
    return bytes([a, b, c, d])


def ipv4(src, dst, proto, l4, ttl=64, ident=0x4242, frag=0):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ident, frag, ttl, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + l4


def l4sum(src, dst, proto, l4):
    return csum(src + dst + struct.pack("!BBH", 0, proto, len(l4)) + l4)


def tcp(src, dst, sport, dport, flags, payload=b"", seq=1000, ack=0):
    t = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload
    c = l4sum(src, dst, 6, t)
    return t[:16] + struct.pack("!H", c) + t[18:]


def udp(src, dst, sport, dport, payload=b""):
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = l4sum(src, dst, 17, u) or 0xffff
    return u[:6] + struct.pack("!H", c) + u[8:]


def icmp(t, code, rest, body):
    m = struct.pack("!BBHI", t, code, 0, rest) + body
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


def echo(request, ident, seq, payload=b""):
    return icmp(8 if request else 0, 0, ident << 16 | seq, payload)


POD10, POD11, POD20, POD30 = ip4(10, 244, 1, 10), ip4(10, 244, 1, 11), ip4(10, 244, 1, 20), ip4(10, 244, 1, 30)
SERVER, SERVERB, BLUE = ip4(192, 0, 2, 100), ip4(192, 0, 2, 101), ip4(198, 51, 100, 100)
INGRESS, EXT1, EXT2 = ip4(192, 0, 2, 50), ip4(192, 0, 2, 1), ip4(198, 51, 100, 1)
INTERNET, CLUSTERIP, NODE = ip4(203, 0, 113, 9), ip4(10, 96, 0, 10), ip4(172, 18, 0, 2)
PODS_MAC, EXT1_MAC = bytes([2, 0, 0, 0, 1, 1]), bytes([2, 0, 0, 0, 2, 1])
POD10_MAC, SERVER_MAC = bytes([0x0a, 0x58, 0x0a, 0xf4, 1, 0x0a]), bytes([0x52, 0x54, 0, 0, 0, 0x64])
BCAST = b"\xff" * 6


def eth(dst, src, etype, payload):
    return dst + src + struct.pack("!H", etype) + payload


def arp(op, sha, spa, tha, tpa):
    return struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + spa + tha + tpa


PRIME = 0x10


def ipv6(src, dst, nh, payload, hop=64):
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, hop) + src + dst + payload


def icmp6(src, dst, t, code, rest):
    m = bytes([t, code, 0, 0]) + rest
    c = csum(src + dst + struct.pack("!IxxxB", len(m), 58) + m)
    return m[:2] + struct.pack("!H", c) + m[4:]


def link_local(mac):
    return b"\xfe\x80" + b"\0" * 6 + bytes([mac[0] ^ 2]) + mac[1:3] + b"\xff\xfe" + mac[3:]


def packet_seeds():
    put_ = lambda ctl, who, body: put("packet", bytes([ctl, who]) + body)
    # Mode 1: IPv4 datagrams on pods (sel 0), ext1 (1), ext2 (2); with and without priming.
    inside = [
        tcp(POD10, SERVER, 40000, 80, 0x02),
        tcp(POD10, SERVER, 40000, 80, 0x10, b"GET / HTTP/1.1\r\n\r\n", 1001, 5001),
        tcp(POD10, SERVER, 40000, 80, 0x11, b"", 1001, 5001),
        tcp(POD10, SERVER, 40000, 80, 0x04),
    ]
    datagrams = [ipv4(POD10, SERVER, 6, t) for t in inside] + [
        ipv4(POD11, SERVERB, 17, udp(POD11, SERVERB, 6000, 7000, b"x")),
        ipv4(POD20, BLUE, 17, udp(POD20, BLUE, 5353, 53, b"\1\2\3")),
        ipv4(POD30, INTERNET, 1, echo(True, 0x77, 2, b"\x09\x09")),
        ipv4(POD30, INTERNET, 1, echo(True, 0x78, 1)),
        ipv4(POD10, CLUSTERIP, 6, tcp(POD10, CLUSTERIP, 41000, 443, 0x02)),
        ipv4(POD10, NODE, 17, udp(POD10, NODE, 41000, 53)),
        ipv4(POD10, SERVER, 6, tcp(POD10, SERVER, 40001, 80, 0x02), ttl=1),
        ipv4(POD10, SERVER, 17, udp(POD10, SERVER, 40001, 53), frag=0x2000),
        ipv4(POD10, SERVER, 47, b"\0" * 12),
        ipv4(POD10, ip4(10, 244, 1, 1), 1, echo(True, 9, 9)),
        ipv4(POD10, ip4(10, 244, 1, 1), 6, tcp(POD10, ip4(10, 244, 1, 1), 1, 22, 0x02)),
    ]
    for d in datagrams:
        for ctl in (0x01, 0x01 | PRIME):
            put_(ctl, 0, d)
    outside = [
        ipv4(SERVER, INGRESS, 6, tcp(SERVER, INGRESS, 80, 40000, 0x12, b"", 5000, 1001)),
        ipv4(SERVER, INGRESS, 6, tcp(SERVER, INGRESS, 80, 40000, 0x10, b"hello", 5001, 1020)),
        ipv4(SERVER, INGRESS, 6, tcp(SERVER, INGRESS, 80, 40000, 0x04, b"", 5001, 0)),
        ipv4(SERVERB, INGRESS, 17, udp(SERVERB, INGRESS, 7000, 6000, b"y")),
        ipv4(INTERNET, EXT1, 1, echo(False, 0x77, 1, b"\x09\x09")),
        ipv4(SERVER, EXT1, 1, echo(True, 3, 3, b"ping")),
        ipv4(SERVER, INGRESS, 1, echo(True, 3, 3)),
        ipv4(SERVER, INGRESS, 6, tcp(SERVER, INGRESS, 5555, 22, 0x02)),
        ipv4(SERVER, POD10, 6, tcp(SERVER, POD10, 80, 40000, 0x12)),
    ]
    for d in outside:
        for ctl in (0x05, 0x05 | PRIME, 0x05 | PRIME | 0x20):
            put_(ctl, 0, d)
    for ctl in (0x09, 0x09 | PRIME):
        put_(ctl, 0, ipv4(BLUE, EXT2, 17, udp(BLUE, EXT2, 53, 5353, b"\4\5\6")))
        put_(ctl, 0, ipv4(BLUE, EXT2, 1, echo(True, 1, 1)))
    # Offload flags: checksums vouched for, IP bad, IP none.
    for f in (0x40, 0x80, 0xc0):
        put_(0x01 | PRIME | f, 0, datagrams[1])
        put_(0x05 | PRIME | f, 0, outside[1])
    # Mode 0: whole frames, including ARP and malformed ones.
    put_(0x00, 0, eth(PODS_MAC, POD10_MAC, 0x0800, datagrams[0]))
    put_(0x00, 0, eth(BCAST, POD10_MAC, 0x0806, arp(1, POD10_MAC, POD10, b"\0" * 6, ip4(10, 244, 1, 1))))
    put_(0x04, 0, eth(BCAST, SERVER_MAC, 0x0806, arp(1, SERVER_MAC, SERVER, b"\0" * 6, INGRESS)))
    put_(0x04, 0, eth(BCAST, SERVER_MAC, 0x0806, arp(1, SERVER_MAC, SERVER, b"\0" * 6, EXT1)))
    put_(0x04, 0, eth(EXT1_MAC, SERVER_MAC, 0x0806, arp(2, SERVER_MAC, ip4(192, 0, 2, 200), EXT1_MAC, EXT1)))
    put_(0x00, 0, eth(PODS_MAC, POD10_MAC, 0x86dd, b"\x60" + b"\0" * 39))
    # IPv6: Neighbor Solicitations for ext1's link-local address (unicast and, as duplicate address
    # detection, from :: to its solicited-node group), an echo request, a UDP datagram behind a
    # Destination Options header.
    ll, server_ll = link_local(EXT1_MAC), link_local(SERVER_MAC)
    ns = lambda src, dst, opt: icmp6(src, dst, 135, 0, b"\0" * 4 + ll + opt)
    put_(0x04, 0, eth(EXT1_MAC, SERVER_MAC, 0x86dd, ipv6(server_ll, ll, 58, ns(server_ll, ll, b"\1\1" + SERVER_MAC), 255)))
    group = b"\xff\x02" + b"\0" * 9 + b"\1\xff" + ll[13:]
    unspecified = b"\0" * 16
    put_(0x04, 0, eth(b"\x33\x33\xff" + ll[13:], SERVER_MAC, 0x86dd, ipv6(unspecified, group, 58, ns(unspecified, group, b""), 255)))
    server6, pod6 = b"\x20\x01\x0d\xb8" + b"\0" * 11 + b"\x64", b"\xfd\0\0\x10\x02\x44\0\1" + b"\0" * 7 + b"\x0a"
    put_(0x04, 0, eth(EXT1_MAC, SERVER_MAC, 0x86dd, ipv6(server6, pod6, 58, icmp6(server6, pod6, 128, 0, b"\0\1\0\1ping"))))
    u = struct.pack("!HHHH", 5353, 53, 12, 0) + b"abcd"
    u = u[:6] + struct.pack("!H", csum(pod6 + server6 + struct.pack("!IxxxB", len(u), 17) + u) or 0xffff) + u[8:]
    put_(0x00, 0, eth(PODS_MAC, POD10_MAC, 0x86dd, ipv6(pod6, server6, 60, b"\x11\0\1\4\0\0\0\0" + u)))
    put_(0x00, 0, eth(PODS_MAC, POD10_MAC, 0x0800, datagrams[0][:30]))
    put_(0x00, 0, eth(PODS_MAC, POD10_MAC, 0x0800, datagrams[0] + b"\0" * 6))
    put_(0x04, 0, eth(EXT1_MAC, SERVER_MAC, 0x0800, outside[0]))
    # Modes 2 and 3: ICMP errors quoting what the primed sessions sent (the session's first
    # packet as it left, or as the remote sent it), full and cut to 8 bytes of L4.
    out_tcp = ipv4(INGRESS, SERVER, 6, tcp(INGRESS, SERVER, 40000, 80, 0x02), ttl=63)
    out_udp = ipv4(EXT2, BLUE, 17, udp(EXT2, BLUE, 5353, 53, b"\1\2\3"), ttl=63)
    out_echo = ipv4(EXT1, INTERNET, 1, echo(True, 0x77, 1, b"\x09\x09"), ttl=63)
    out_udp2 = ipv4(INGRESS, SERVERB, 17, udp(INGRESS, SERVERB, 6000, 7000, b"\7"), ttl=63)
    for sel in range(4):
        ctl = 0x02 | sel << 2 | PRIME
        put_(ctl, 0, out_tcp)
        put_(ctl, 0, out_tcp[:28])
        put_(ctl, 4, out_udp2)
        put_(ctl, 2, out_udp)
        put_(ctl, 1, out_echo)
        put_(ctl, 1, out_echo[:28])
        put_(ctl | 0x20, 4, out_udp2)
    put_(0x02 | PRIME, 3, ipv4(POD10, SERVER, 6, tcp(POD10, SERVER, 40000, 80, 0x02)))
    in_tcp = ipv4(SERVER, POD10, 6, tcp(SERVER, POD10, 80, 40000, 0x12, b"", 5000, 1001), ttl=63)
    in_udp = ipv4(BLUE, POD20, 17, udp(BLUE, POD20, 53, 5353, b"\4\5\6"), ttl=63)
    in_echo = ipv4(INTERNET, POD30, 1, echo(False, 0x77, 1, b"\x09\x09"), ttl=63)
    for sel in range(4):
        ctl = 0x03 | sel << 2 | PRIME
        put_(ctl, 0, in_tcp)
        put_(ctl, 0, in_tcp[:28])
        put_(ctl, 1 | 4, in_udp)
        put_(ctl, 2, in_echo)
        put_(ctl, 0, b"\x45" + b"\0" * 26)
    put_(0x03, 0, in_tcp)
    # Errors quoting the primed sessions in chains of mbufs (who bit 6, segments of 16 x (1 + bits
    # 3-5) bytes), in 2 + (bits 3-4) fragments (bit 5), and both; one quote padded to 1,200 bytes
    # so that the checksum spans many segments.
    long_quote = out_udp2 + bytes(range(256)) * 4 + b"\x5a" * 176
    for ctl, who, quote in (
        (0x02 | PRIME, 0x40 | 0x18, out_tcp),
        (0x02 | PRIME, 0x20 | 0x08 | 4, out_udp2),
        (0x02 | PRIME, 0x60 | 0x10 | 4, long_quote),
        (0x02 | PRIME, 0x40, long_quote[:600]),
        (0x03 | PRIME, 0x60 | 0x08, in_tcp),
        (0x03 | PRIME, 0x40 | 0x30 | 1 | 4, in_udp),
    ):
        put_(ctl, who, quote)
    # A whole frame in a chain of 48-byte segments.
    put_(0x00, 0x40 | 0x10, eth(PODS_MAC, POD10_MAC, 0x0800, datagrams[1]))

# ---- session sync datagrams (control/sync/wire.h; docs/architecture.md "Session sync") ----
def sync_datagram(flags, sender, boot, counter, seq, ack=0, rng=(0, 0), events=()):
    body = b"".join(events)
    length = 40 + len(body) + 32
    head = struct.pack(">BBHHHIIQIIII", 1, flags, len(events), length, 0, sender, boot, counter, seq, ack,
                       rng[0], rng[1])
    return head + body + b"\0" * 32  # the fuzz target signs it (its first byte's low bit)


def v4mapped(a, b, c, d):
    return b"\0" * 10 + b"\xff\xff" + bytes([a, b, c, d])


def sync_event(kind=1, family=4, proto=6, tcp_state=3, vrf=0, left=30000, epoch=1, ports=(1000, 20000, 443)):
    if family == 4:
        addrs = v4mapped(10, 128, 0, 5) + v4mapped(192, 168, 10, 10) + v4mapped(8, 8, 8, 8)
    else:
        addrs = (bytes([0xfd] + [0] * 14 + [5]) + bytes([0x20, 0x01, 0x0d, 0xb8] + [0] * 11 + [1]) +
                 bytes([0x20, 0x01, 0x0d, 0xb8] + [0] * 11 + [2]))
    return struct.pack(">BBBBHHIIHHHH", kind, family, proto, tcp_state, vrf, 0, left, epoch, ports[0], ports[1],
                       ports[2], 0) + addrs


def sync_seeds():
    ev = [sync_event(), sync_event(kind=2, tcp_state=7), sync_event(kind=3, proto=17, tcp_state=0),
          sync_event(kind=4, family=6, proto=58, tcp_state=0), sync_event(family=6, proto=6, tcp_state=1)]

    def stream(opts, datagrams):
        return bytes([opts]) + b"".join(struct.pack(">H", len(d)) + d for d in datagrams)

    in_order = [sync_datagram(0, 1, 9, 100 + i, 1 + i, events=ev[i:i + 2]) for i in range(4)]
    put("sync", stream(1, in_order))
    # A gap (sequence 2 missing), then the NACK's answer, a LOST range and a keep-alive.
    put("sync", stream(1 | 20 << 1, [in_order[0], in_order[2], in_order[1],
                                     sync_datagram(0x04, 1, 9, 200, 3, rng=(4, 6)),
                                     sync_datagram(0x01, 1, 9, 201, 9, ack=1)]))
    # The peer asks for what the receiver sent; then restarts (a new boot id).
    put("sync", stream(1 | 100 << 1, [in_order[0], sync_datagram(0x03, 1, 9, 300, 1, ack=1, rng=(1, 3)),
                                      sync_datagram(0, 1, 10, 400, 1, events=ev[:1])]))
    # Replays, and the same datagrams unsigned (refused for their tag).
    put("sync", stream(1, in_order[:2] + in_order[:2]))
    put("sync", stream(0, in_order))
    # A stranger, a wrong version, a large datagram.
    put("sync", stream(1, [sync_datagram(0, 3, 9, 1, 1, events=ev[:1]), b"\x02" + in_order[0][1:],
                           sync_datagram(0, 1, 9, 500, 1, events=ev * 40)]))


def main():
    clear_seeds()
    config_seeds()
    manifest_seeds()
    egress_firewall_seeds()
    dns_name_resolver_seeds()
    egress_qos_seeds()
    kubeconfig_seeds()
    watch_seeds()
    cli_seeds()
    packet_seeds()
    sync_seeds()
    for t in sorted(written):
        print("%s: %d seeds" % (t, written[t]))


if __name__ == "__main__":
    sys.exit(main())
