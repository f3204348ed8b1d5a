#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Long-lived traffic for tests/e2e/test_traffic.py: an echo server, a UDP stream and a TCP stream
that number what they send, and a capture that records every IPv4 packet arriving in a namespace
with the interface it came in on. Python 3 stdlib and peer.py beside it; run each inside a network
namespace with `ip netns exec NS python3 tests/e2e/stream.py ...`. Times are CLOCK_MONOTONIC seconds
(time.monotonic()), the same clock in every process of the machine, so the test can line them up
with the moments it changed the policy.

  echo --tcp PORT --udp PORT [--lifetime S]
      Echoes every UDP datagram and every line of every TCP connection back to its sender.
  udp HOST PORT --bind IP:PORT --rate PPS --out FILE [--lifetime S]
      Sends "u <seq>" datagrams from one connected socket at PPS until SIGTERM (or --lifetime),
      and records each echo. On exit writes FILE: {"sent": [[seq, t], ...], "echoed": {seq: t},
      "errors": [[t, "ECONNREFUSED"], ...]}.
  tcp HOST PORT --bind IP:PORT --rate PPS --out FILE [--lifetime S]
      One TCP connection; sends "t <seq>" lines at PPS and reads the echoes, which must come back
      in order. Stops sending at the first error. On exit writes FILE: {"connected": t, "sent": n,
      "echoed": n, "error": null or [t, "ECONNRESET ..."], "out_of_order": [...]}.
  capture --out FILE [--lifetime S]
      Records every IPv4 TCP, UDP and ICMP packet that arrives on any interface of the namespace
      (not the ones it sends): one line "t iface proto src sport dst dport payload-tag" per packet,
      where the tag is the "u <seq>"/"t <seq>" of the streams (the first one in a TCP segment), or
      "-". Lines are flushed as they come.

  probe-udp HOST PORT --bind IP:PORT [--timeout S]
      One datagram from a connected UDP socket; prints "answer <data>", "ECONNREFUSED" (an ICMP
      port unreachable the kernel matched to the socket: its quoted header named this socket's
      addresses and ports) or "timeout".
  probe-tcp HOST PORT --bind IP:PORT [--timeout S]
      A TCP connect; prints "connected", "ECONNREFUSED" (a RST) or "timeout".
  udp-fan HOST --bind IP --sports A-B --dports C-D [--timeout S]
      One datagram from each source port to each destination port, all at once, then waits for
      the echoes; prints a JSON object {"dport:sport": true/false} (answered or not).
  udp-once HOST PORT --bind IP:PORT
      Sends one datagram and closes the socket at once (so that a late answer finds no socket).
  rst --src IP:PORT --dst IP:PORT --offset N [--timeout S]
      Waits for the next TCP segment with data that this namespace sends from --src to --dst, then
      sends an RST on that connection whose sequence number is N past the segment's end (the
      sender's next sequence number); prints "sent <rst seq> <next seq>" or "timeout".
  late-echo --port P --delay S [--lifetime S]
      For each datagram on port P: waits S seconds, then answers from a socket connected to the
      sender and prints "sent <peer>" and then "ECONNREFUSED <peer>" if an ICMP error for the
      answer came back within 2 s, or "no-error <peer>".

  ttl-probe HOST PORT --bind IP:PORT [--ttl N] [--size B] [--timeout S]
      One datagram with IP TTL (IPv6 hop limit) N (1) from a connected UDP socket, as traceroute
      sends, padded to B bytes; prints "icmp <type> <code> <offender>" ("icmp6 ... [mtu M]" for
      IPv6, where an IPv6 datagram larger than the path is sent whole) for the first ICMP error
      the kernel matched to the socket (IP_RECVERR: its quote named this socket's addresses and
      ports), or "timeout". HOST may be IPv6, with --bind [IPV6]:PORT.
  send-to --bind IP --to A:P[,B:P...]
      One datagram to each address (broadcast and multicast allowed, multicast TTL 255, sent from
      IP's interface); prints "sent <n>".
Every command prints "ready" on stdout once it is set up, and exits 0 on SIGTERM.
"""

import argparse
import errno
import json
import os
import signal
import socket
import struct
import threading
import time

import peer  # the checksum and IPv4 header builders (tests/e2e/peer.py, beside this file)

stop = threading.Event()
ECHO_GRACE = 1.0   # seconds the streams keep reading echoes after they stop sending


def on_term(signum, frame):
    stop.set()


def ready():
    print("ready", flush=True)


def addr(text):
    """'IP:PORT' or '[IPV6]:PORT' -> (ip, port)."""
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def errname(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else str(e)


# --- echo -----------------------------------------------------------------------------------------

def cmd_echo(args):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    udp.bind(("0.0.0.0", args.udp))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("0.0.0.0", args.tcp))
    tcp.listen(64)

    def udp_loop():
        while True:
            data, peer = udp.recvfrom(2048)
            udp.sendto(data, peer)

    def conn_loop(conn):
        with conn:
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                try:
                    conn.sendall(data)
                except OSError:
                    return

    def tcp_loop():
        while True:
            conn, _ = tcp.accept()
            threading.Thread(target=conn_loop, args=(conn,), daemon=True).start()

    threading.Thread(target=udp_loop, daemon=True).start()
    threading.Thread(target=tcp_loop, daemon=True).start()
    ready()
    stop.wait(args.lifetime)
    os._exit(0)


# --- streams --------------------------------------------------------------------------------------

def paced(rate):
    """Yields seq numbers at `rate` per second until stop is set."""
    period = 1.0 / rate
    seq = 0
    next_t = time.monotonic()
    while not stop.is_set():
        yield seq
        seq += 1
        next_t += period
        delay = next_t - time.monotonic()
        if delay > 0:
            stop.wait(delay)
        else:
            next_t = time.monotonic()  # late (a loaded machine): no burst to catch up


def cmd_udp(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr(args.bind))
    s.connect((args.host, args.port))
    sent, echoed, errors = [], {}, []
    lock = threading.Lock()
    done = threading.Event()   # set a grace period after the last send: late echoes still count

    def receive():
        s.settimeout(0.2)
        while not done.is_set():
            try:
                data = s.recv(2048)
            except socket.timeout:
                continue
            except OSError as e:   # an ICMP error on a connected socket
                with lock:
                    errors.append([time.monotonic(), errname(e)])
                continue
            t = time.monotonic()
            parts = data.split()
            if len(parts) == 2 and parts[0] == b"u":
                with lock:
                    echoed.setdefault(int(parts[1]), t)

    rx = threading.Thread(target=receive, daemon=True)
    rx.start()
    ready()
    for seq in paced(args.rate):
        t = time.monotonic()
        try:
            s.send(b"u %d\n" % seq)
        except OSError as e:
            with lock:
                errors.append([t, errname(e)])
        with lock:
            sent.append([seq, t])
    time.sleep(ECHO_GRACE)
    done.set()
    rx.join(timeout=2)
    with lock:
        out = {"sent": sent, "echoed": {str(k): v for k, v in echoed.items()}, "errors": errors}
    with open(args.out, "w") as f:
        json.dump(out, f)


def cmd_tcp(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.bind(addr(args.bind))
    s.settimeout(5)
    result = {"connected": None, "sent": 0, "echoed": 0, "error": None, "out_of_order": []}
    lock = threading.Lock()
    try:
        s.connect((args.host, args.port))
    except OSError as e:
        result["error"] = [time.monotonic(), f"connect: {errname(e)}"]
        ready()
        with open(args.out, "w") as f:
            json.dump(result, f)
        return
    result["connected"] = time.monotonic()
    failed = threading.Event()

    def fail(what):
        with lock:
            if result["error"] is None:
                result["error"] = [time.monotonic(), what]
        failed.set()

    done = threading.Event()

    def receive():
        s.settimeout(0.2)
        buf = b""
        want = 0
        while not done.is_set() and not failed.is_set():
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            except OSError as e:
                fail(f"recv: {errname(e)}")
                return
            if not data:
                fail("recv: connection closed by the peer")
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                parts = line.split()
                seq = int(parts[1]) if len(parts) == 2 and parts[0] == b"t" else -1
                with lock:
                    if seq != want:
                        result["out_of_order"].append([want, seq])
                    want = seq + 1
                    result["echoed"] += 1

    rx = threading.Thread(target=receive, daemon=True)
    rx.start()
    ready()
    for seq in paced(args.rate):
        if failed.is_set():
            break
        try:
            s.sendall(b"t %d\n" % seq)
        except OSError as e:
            fail(f"send: {errname(e)}")
            break
        with lock:
            result["sent"] += 1
    stop.wait()  # keep the connection until told to stop, even after an error
    time.sleep(ECHO_GRACE)
    done.set()
    rx.join(timeout=2)
    with lock:
        out = dict(result)
    with open(args.out, "w") as f:
        json.dump(out, f)


# --- capture --------------------------------------------------------------------------------------

PACKET_OUTGOING = 4
ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003


def tag_of(payload):
    """The stream's "u <seq>" or "t <seq>" at the start of a payload, as one token "u:<seq>"."""
    if payload[:2] in (b"u ", b"t "):
        end = payload.find(b"\n")
        parts = payload[:end if end > 0 else 32].split()
        if len(parts) == 2 and parts[1].isdigit():
            return f"{parts[0].decode()}:{int(parts[1])}"
    return "-"


def cmd_capture(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.settimeout(0.2)
    out = open(args.out, "w", buffering=1)
    ready()
    deadline = time.monotonic() + args.lifetime
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            pkt, where = s.recvfrom(65535)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        t = time.monotonic()
        iface, pkttype = where[0], where[2]
        if pkttype == PACKET_OUTGOING or len(pkt) < 20 or pkt[0] >> 4 != 4:
            continue
        ihl = (pkt[0] & 15) * 4
        proto = pkt[9]
        src, dst = socket.inet_ntoa(pkt[12:16]), socket.inet_ntoa(pkt[16:20])
        l4 = pkt[ihl:]
        if proto in (6, 17) and len(l4) >= 8:
            sport, dport = struct.unpack("!HH", l4[:4])
            if proto == 6:
                off = (l4[12] >> 4) * 4 if len(l4) >= 13 else 20
                flags = l4[13] if len(l4) >= 14 else 0
                name = "tcp"
                tag = tag_of(l4[off:])
                if tag == "-" and flags & 0x04:
                    tag = "RST"
                elif tag == "-" and flags & 0x02:
                    tag = "SYN"
            else:
                name, tag = "udp", tag_of(l4[8:])
        elif proto == 1 and len(l4) >= 2:
            name, sport, dport, tag = "icmp", l4[0], l4[1], "-"
        else:
            continue
        out.write(f"{t:.6f} {iface} {name} {src} {sport} {dst} {dport} {tag}\n")
    out.close()


# --- a spoofed RST ---------------------------------------------------------------------------------

def cmd_rst(args):
    src_ip, sport = addr(args.src)
    dst_ip, dport = addr(args.dst)
    src, dst = socket.inet_aton(src_ip), socket.inet_aton(dst_ip)
    # Frames a host sends reach only ETH_P_ALL sockets.
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    sniff.settimeout(0.2)
    deadline = time.monotonic() + args.timeout
    next_seq = None
    while next_seq is None:
        if time.monotonic() > deadline:
            print("timeout", flush=True)
            return
        try:
            pkt, where = sniff.recvfrom(65535)
        except (socket.timeout, InterruptedError):
            continue
        if where[1] != ETH_P_IP or where[2] != PACKET_OUTGOING or len(pkt) < 40 or pkt[9] != 6 or pkt[12:16] != src or pkt[16:20] != dst:
            continue
        ihl = (pkt[0] & 15) * 4
        total = struct.unpack("!H", pkt[2:4])[0]
        l4 = pkt[ihl:total]
        if len(l4) < 20 or struct.unpack("!HH", l4[:4]) != (sport, dport):
            continue
        data_len = len(l4) - (l4[12] >> 4) * 4
        if data_len > 0:
            next_seq = (struct.unpack("!I", l4[4:8])[0] + data_len) & 0xFFFFFFFF
    seq = (next_seq + args.offset) & 0xFFFFFFFF
    segment = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x04, 0, 0, 0)
    csum = peer.checksum(src + dst + struct.pack("!BBH", 0, 6, len(segment)) + segment)
    segment = segment[:16] + struct.pack("!H", csum) + segment[18:]
    header = peer.ipv4_header(src_ip, dst_ip, 6, len(segment))
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    raw.sendto(header + segment, (dst_ip, 0))
    print(f"sent {seq} {next_seq}", flush=True)


# --- probes ---------------------------------------------------------------------------------------

def cmd_probe_udp(args):
    s = socket.socket(family(args.host), socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr(args.bind))
    s.connect((args.host, args.port))
    s.settimeout(args.timeout)
    try:
        s.send(b"probe\n")
        print(f"answer {s.recv(2048).decode(errors='replace').strip()}", flush=True)
    except socket.timeout:
        print("timeout", flush=True)
    except OSError as e:
        print(errname(e), flush=True)


def cmd_probe_tcp(args):
    s = socket.socket(family(args.host), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr(args.bind))
    s.settimeout(args.timeout)
    try:
        s.connect((args.host, args.port))
        print("connected", flush=True)
    except socket.timeout:
        print("timeout", flush=True)
    except OSError as e:
        print(errname(e), flush=True)


def span(text):
    a, _, b = text.partition("-")
    return range(int(a), int(b or a) + 1)


IP_RECVERR = 11     # <linux/in.h>; Python's socket module does not export it
IPV6_RECVERR = 25   # <linux/in6.h>, likewise
IPV6_MTU_DISCOVER = 23
IPV6_PMTUDISC_PROBE = 3
SO_EE_ORIGIN_ICMP6 = 3


def cmd_ttl_probe(args):
    v6 = family(args.host) == socket.AF_INET6
    s = socket.socket(family(args.host), socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr(args.bind))
    s.connect((args.host, args.port))
    if v6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, args.ttl)
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVERR, 1)
        # Datagrams larger than the path MTU are sent whole, not fragmented by the kernel, so
        # that a router's Packet Too Big comes back (IPV6_PMTUDISC_PROBE).
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_PROBE)
    else:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, args.ttl)
        s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
    s.send(b"ttl probe\n".ljust(args.size, b"."))
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            _, anc, _, _ = s.recvmsg(2048, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            time.sleep(0.05)
            continue
        for level, kind, data in anc:
            if level == socket.IPPROTO_IP and kind == IP_RECVERR and len(data) >= 24:
                # struct sock_extended_err (16 bytes), then the offender's struct sockaddr_in
                _, _, icmp_type, icmp_code = struct.unpack("=IBBB", data[:7])
                print(f"icmp {icmp_type} {icmp_code} {socket.inet_ntoa(data[20:24])}", flush=True)
                return
            if level == socket.IPPROTO_IPV6 and kind == IPV6_RECVERR and len(data) >= 40:
                # struct sock_extended_err (ee_info holds a Packet Too Big's MTU), then the
                # offender's struct sockaddr_in6 (its address at offset 8)
                _, origin, icmp_type, icmp_code, _, info = struct.unpack("=IBBBBI", data[:12])
                if origin != SO_EE_ORIGIN_ICMP6:
                    continue   # the kernel's own report (a local MTU), not a message from the wire
                offender = socket.inet_ntop(socket.AF_INET6, data[24:40])
                mtu = f" mtu {info}" if icmp_type == 2 else ""
                print(f"icmp6 {icmp_type} {icmp_code} {offender}{mtu}", flush=True)
                return
    print("timeout", flush=True)


def cmd_send_to(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(args.bind))
    s.bind((args.bind, 0))
    targets = [addr(t) for t in args.to.split(",")]
    for host, port in targets:
        s.sendto(f"to {host}\n".encode(), (host, port))
    print(f"sent {len(targets)}", flush=True)


def cmd_udp_fan(args):
    socks = {}
    for dport in span(args.dports):
        for sport in span(args.sports):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((args.bind, sport))
            s.connect((args.host, dport))
            s.setblocking(False)
            socks[f"{dport}:{sport}"] = s
    for s in socks.values():
        try:
            s.send(b"fan\n")
        except OSError:
            pass
    answered = {k: False for k in socks}
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and not all(answered.values()):
        for k, s in socks.items():
            if not answered[k]:
                try:
                    s.recv(2048)
                    answered[k] = True
                except (BlockingIOError, OSError):
                    pass
        time.sleep(0.01)
    print(json.dumps(answered), flush=True)


def cmd_udp_once(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr(args.bind))
    s.sendto(b"once\n", (args.host, args.port))
    s.close()
    print("sent", flush=True)


def cmd_late_echo(args):
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", args.port))

    def answer(data, peer):
        time.sleep(args.delay)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", args.port))
        s.connect(peer)   # a connected socket receives the ICMP errors about what it sends
        s.settimeout(2)
        where = f"{peer[0]}:{peer[1]}"
        try:
            s.send(data)
            print(f"sent {where}", flush=True)
            s.recv(2048)
            print(f"answer {where}", flush=True)
        except socket.timeout:
            print(f"no-error {where}", flush=True)
        except OSError as e:
            print(f"{errname(e)} {where}", flush=True)
        finally:
            s.close()

    ready()
    srv.settimeout(0.2)
    while not stop.is_set():
        try:
            data, peer = srv.recvfrom(2048)
        except socket.timeout:
            continue
        threading.Thread(target=answer, args=(data, peer), daemon=True).start()


def main():
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("echo")
    c.add_argument("--tcp", type=int, required=True)
    c.add_argument("--udp", type=int, required=True)
    c.add_argument("--lifetime", type=float, default=600)
    c.set_defaults(fn=cmd_echo)
    for name, fn in (("udp", cmd_udp), ("tcp", cmd_tcp)):
        c = sub.add_parser(name)
        c.add_argument("host")
        c.add_argument("port", type=int)
        c.add_argument("--bind", required=True)
        c.add_argument("--rate", type=float, default=50)
        c.add_argument("--out", required=True)
        c.add_argument("--lifetime", type=float, default=600)
        c.set_defaults(fn=fn)
    for name, fn in (("probe-udp", cmd_probe_udp), ("probe-tcp", cmd_probe_tcp)):
        c = sub.add_parser(name)
        c.add_argument("host")
        c.add_argument("port", type=int)
        c.add_argument("--bind", required=True)
        c.add_argument("--timeout", type=float, default=3)
        c.add_argument("--lifetime", type=float, default=60)
        c.set_defaults(fn=fn)
    c = sub.add_parser("ttl-probe")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--bind", required=True)
    c.add_argument("--ttl", type=int, default=1)
    c.add_argument("--size", type=int, default=0, help="pad the datagram to this many bytes")
    c.add_argument("--timeout", type=float, default=3)
    c.add_argument("--lifetime", type=float, default=60)
    c.set_defaults(fn=cmd_ttl_probe)
    c = sub.add_parser("send-to")
    c.add_argument("--bind", required=True)
    c.add_argument("--to", required=True)
    c.add_argument("--lifetime", type=float, default=60)
    c.set_defaults(fn=cmd_send_to)
    c = sub.add_parser("udp-fan")
    c.add_argument("host")
    c.add_argument("--bind", required=True)
    c.add_argument("--sports", required=True)
    c.add_argument("--dports", required=True)
    c.add_argument("--timeout", type=float, default=3)
    c.add_argument("--lifetime", type=float, default=60)
    c.set_defaults(fn=cmd_udp_fan)
    c = sub.add_parser("udp-once")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--bind", required=True)
    c.add_argument("--lifetime", type=float, default=60)
    c.set_defaults(fn=cmd_udp_once)
    c = sub.add_parser("rst")
    c.add_argument("--src", required=True)
    c.add_argument("--dst", required=True)
    c.add_argument("--offset", type=lambda v: int(v, 0), required=True)
    c.add_argument("--timeout", type=float, default=5)
    c.add_argument("--lifetime", type=float, default=60)
    c.set_defaults(fn=cmd_rst)
    c = sub.add_parser("late-echo")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--delay", type=float, default=0.5)
    c.add_argument("--lifetime", type=float, default=600)
    c.set_defaults(fn=cmd_late_echo)
    c = sub.add_parser("capture")
    c.add_argument("--out", required=True)
    c.add_argument("--lifetime", type=float, default=600)
    c.set_defaults(fn=cmd_capture)
    args = p.parse_args()
    timer = threading.Timer(args.lifetime, stop.set)
    timer.daemon = True
    timer.start()
    args.fn(args)


if __name__ == "__main__":
    main()
