#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hosts of the end-to-end topology: an echo server that tells clients which address it saw,
the matching clients, an ICMP echo client, and a raw frame injector. Python 3 stdlib only;
run each inside a network namespace with `ip netns exec NS python3 tests/e2e/peer.py ...`.

  serve --tcp PORT --udp PORT [--icmp] [--ipv6] [--bind IP] [--lifetime S]
      Answers every TCP connection and UDP datagram with the client address it sees
      ("192.0.2.50:40000\\n", "[2001:db8::50]:40000\\n"). Logs one line per client to stdout:
      "tcp 192.0.2.50:40000", "udp 192.0.2.50:40000", and with --icmp "icmp 192.0.2.50 id=7
      seq=1 token=abc" for every ICMP echo request that arrives (the kernel answers it). --ipv6
      serves the same on IPv6 as well (ICMPv6 echo included). Prints "ready ..." once listening
      and exits by itself after --lifetime seconds.
  tcp HOST PORT [--bind IP[:PORT]] [--timeout S]
  udp HOST PORT [--bind IP[:PORT]] [--timeout S] [--interval S]
      HOST may be IPv6; --bind then takes IPV6 or [IPV6]:PORT.
      Print the server's answer (the address it saw); exit 1 on timeout or error. The UDP client
      sends its datagram again every --interval seconds until an answer comes.
  ping HOST [--bind IP] [--count N] [--timeout S] [--token T]
      ICMP (or, to an IPv6 HOST, ICMPv6) echo with a payload "egw:<token>" that the server's --icmp log shows; prints one line
      per reply and exits 0 once --count replies came back, 1 on timeout.
  inject --iface IF --dst-mac MAC --kind KIND [--count N] [--src IP] [--dst IP]
      Sends raw Ethernet frames with an AF_PACKET socket. KIND: truncated (IPv4 header cut
      short), ihl (IHL < 5), totlen (total length larger than the frame), fragment (first
      fragment, MF set), fragment-tail (offset > 0), proto253 (an unknown IP protocol), udp (a
      well-formed UDP datagram, for comparison).
  stage --config FILE --dir DIR [--file-prefix P] [--iface-tag T] [--metrics-listen ADDR:PORT]
      Copies the config's manifests directory to DIR/manifests and writes DIR/egwd.json: the
      same config with state.path pointing at the copy and a DPDK file prefix of its own, so
      that a test or the demo can change manifests without touching the repository. --iface-tag
      renames the interfaces egw-<role> to <tag>-<role> (scripts/netns.sh with EGW_NETNS_TAG),
      --metrics-listen moves the metrics endpoint. Prints the new config's path.
  delete-egress-service DIR NAMESPACE/NAME
      Rewrites the manifest in DIR that holds that EgressService without its document (the
      Service and EndpointSlice stay), as `kubectl delete egressservice` would.
"""

import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ICMP_ECHO_REPLY = 0
ICMP_ECHO_REQUEST = 8
ICMP6_ECHO_REQUEST = 128
ICMP6_ECHO_REPLY = 129
TOKEN_PREFIX = b"egw:"


def log(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fail(message, code=1):
    sys.stderr.write(f"peer: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def family_of(ip):
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def endpoint(addr):
    """A socket address as the server answers it: "192.0.2.50:40000" or "[2001:db8::50]:40000"."""
    return f"[{addr[0]}]:{addr[1]}" if ":" in addr[0] else f"{addr[0]}:{addr[1]}"


def parse_bind(text):
    """'IP', 'IP:PORT', 'IPV6' or '[IPV6]:PORT' -> (ip, port); port 0 lets the kernel choose."""
    if not text:
        return None
    if text.startswith("["):
        ip, _, rest = text[1:].partition("]")
        sep, port = rest[:1], rest[1:]
    elif text.count(":") > 1:
        ip, sep, port = text, "", ""
    else:
        ip, sep, port = text.partition(":")
    try:
        socket.inet_pton(family_of(ip), ip)
        return ip, int(port) if sep else 0
    except (OSError, ValueError):
        fail(f"--bind expects IP, IP:PORT or [IPV6]:PORT, got {text!r}", 2)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


# --- server ---------------------------------------------------------------------------------

def serve_tcp_client(conn, addr):
    try:
        conn.settimeout(2.0)
        conn.sendall(f"{endpoint(addr)}\n".encode())
        # Let the client close first: the TIME_WAIT stays on the client side.
        while conn.recv(4096):
            pass
    except OSError:
        pass
    finally:
        conn.close()


def serve_tcp(sock):
    while True:
        try:
            conn, addr = sock.accept()
        except OSError:
            return
        log(f"tcp {endpoint(addr)}")
        threading.Thread(target=serve_tcp_client, args=(conn, addr), daemon=True).start()


def serve_udp(sock):
    while True:
        try:
            _, addr = sock.recvfrom(65535)
            sock.sendto(f"{endpoint(addr)}\n".encode(), addr)
        except OSError:
            return
        log(f"udp {endpoint(addr)}")


def serve_icmp(sock):
    while True:
        try:
            packet = sock.recv(65535)
        except OSError:
            return
        if len(packet) < 20:
            continue
        ihl = (packet[0] & 0x0F) * 4
        icmp = packet[ihl:]
        if len(icmp) < 8 or icmp[0] != ICMP_ECHO_REQUEST:
            continue
        ident, seq = struct.unpack("!HH", icmp[4:8])
        payload = icmp[8:]
        token = ""
        if payload.startswith(TOKEN_PREFIX):
            token = payload[len(TOKEN_PREFIX):].decode("ascii", "replace")
        log(f"icmp {socket.inet_ntoa(packet[12:16])} id={ident} seq={seq} token={token}")


def serve_icmp6(sock):
    # An ICMPv6 raw socket reads the message without the IPv6 header; the source is the peer address.
    while True:
        try:
            icmp, addr = sock.recvfrom(65535)
        except OSError:
            return
        if len(icmp) < 8 or icmp[0] != ICMP6_ECHO_REQUEST:
            continue
        ident, seq = struct.unpack("!HH", icmp[4:8])
        payload = icmp[8:]
        token = ""
        if payload.startswith(TOKEN_PREFIX):
            token = payload[len(TOKEN_PREFIX):].decode("ascii", "replace")
        log(f"icmp {addr[0]} id={ident} seq={seq} token={token}")


def cmd_serve(args):
    if args.tcp is None and args.udp is None and not args.icmp:
        fail("serve needs --tcp, --udp or --icmp", 2)
    workers = []
    if args.tcp is not None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.bind, args.tcp))
        s.listen(128)
        workers.append((serve_tcp, s))
    if args.udp is not None:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.bind, args.udp))
        workers.append((serve_udp, s))
    if args.icmp:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        workers.append((serve_icmp, s))
    if args.ipv6:
        # The same services on IPv6 as well, on sockets of their own (IPV6_V6ONLY), so that
        # IPv4 clients are still seen as IPv4 addresses.
        for port, kind, fn in ((args.tcp, socket.SOCK_STREAM, serve_tcp), (args.udp, socket.SOCK_DGRAM, serve_udp)):
            if port is None:
                continue
            s = socket.socket(socket.AF_INET6, kind)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind(("::", port))
            if kind == socket.SOCK_STREAM:
                s.listen(128)
            workers.append((fn, s))
        if args.icmp:
            workers.append((serve_icmp6, socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)))
    for fn, s in workers:
        threading.Thread(target=fn, args=(s,), daemon=True).start()

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    log(f"ready tcp={args.tcp} udp={args.udp} icmp={'on' if args.icmp else 'off'} ipv6={'on' if args.ipv6 else 'off'} "
        f"lifetime={args.lifetime:g}s")
    stop.wait(args.lifetime)
    sys.stdout.flush()
    os._exit(0)  # the worker threads block in accept/recv; nothing of theirs needs finishing


# --- clients --------------------------------------------------------------------------------

def client_socket(kind, bind, host):
    s = socket.socket(family_of(host), kind)
    if bind:
        # A fixed source port is reused from test to test; SO_REUSEADDR lets it be bound again
        # while an earlier connection from it sits in TIME_WAIT.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(bind)
    return s


def cmd_tcp(args):
    deadline = time.monotonic() + args.timeout
    s = client_socket(socket.SOCK_STREAM, parse_bind(args.bind), args.host)
    try:
        s.settimeout(args.timeout)
        s.connect((args.host, args.port))
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            s.settimeout(left)
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        fail(f"tcp {args.host}:{args.port}: timed out after {args.timeout:g}s")
    except OSError as e:
        fail(f"tcp {args.host}:{args.port}: {e.strerror or e}")
    finally:
        s.close()
    if not data:
        fail(f"tcp {args.host}:{args.port}: connection closed without an answer")
    print(data.decode(errors="replace").strip(), flush=True)


def cmd_udp(args):
    deadline = time.monotonic() + args.timeout
    s = client_socket(socket.SOCK_DGRAM, parse_bind(args.bind), args.host)
    try:
        s.connect((args.host, args.port))
        while True:
            now = time.monotonic()
            if now >= deadline:
                fail(f"udp {args.host}:{args.port}: no answer within {args.timeout:g}s")
            s.send(b"hello egw\n")
            ready, _, _ = select.select([s], [], [], min(args.interval, deadline - now))
            if ready:
                data = s.recv(65535)
                print(data.decode(errors="replace").strip(), flush=True)
                return
    except OSError as e:
        fail(f"udp {args.host}:{args.port}: {e.strerror or e}")
    finally:
        s.close()


def cmd_ping(args):
    token = (args.token or f"{os.getpid()}-{random.randrange(1 << 30)}").encode()
    payload = TOKEN_PREFIX + token
    ident = random.randrange(1, 0xFFFF)
    v6 = family_of(args.host) == socket.AF_INET6
    if v6:
        # The kernel fills in the ICMPv6 checksum (it covers the pseudo-header) and hands back
        # messages without the IPv6 header.
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        request, reply = ICMP6_ECHO_REQUEST, ICMP6_ECHO_REPLY
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        request, reply = ICMP_ECHO_REQUEST, ICMP_ECHO_REPLY
    if args.bind:
        s.bind((parse_bind(args.bind)[0], 0))
    deadline = time.monotonic() + args.timeout
    sent_at = {}
    replies = set()
    seq = 0
    next_send = 0.0
    try:
        while len(replies) < args.count:
            now = time.monotonic()
            if now >= deadline:
                fail(f"ping {args.host}: {len(replies)} of {args.count} replies within {args.timeout:g}s")
            if now >= next_send:
                seq += 1
                header = struct.pack("!BBHHH", request, 0, 0, ident, seq)
                csum = 0 if v6 else checksum(header + payload)
                s.sendto(struct.pack("!BBHHH", request, 0, csum, ident, seq) + payload,
                         (args.host, 0))
                sent_at[seq] = now
                next_send = now + args.interval
            ready, _, _ = select.select([s], [], [], max(0.0, min(next_send, deadline) - now))
            if not ready:
                continue
            packet, peer_addr = s.recvfrom(65535)
            src = peer_addr[0]
            icmp = packet if v6 else packet[(packet[0] & 0x0F) * 4:]
            if len(icmp) < 8 or icmp[0] != reply or icmp[8:] != payload:
                continue
            r_ident, r_seq = struct.unpack("!HH", icmp[4:8])
            if r_ident != ident or r_seq not in sent_at or r_seq in replies:
                continue
            replies.add(r_seq)
            rtt = (time.monotonic() - sent_at[r_seq]) * 1000
            print(f"reply from {src} seq={r_seq} time={rtt:.2f} ms token={token.decode()}", flush=True)
    except OSError as e:
        fail(f"ping {args.host}: {e.strerror or e}")
    finally:
        s.close()


# --- raw frames -----------------------------------------------------------------------------

def ipv4_header(src, dst, proto, payload_len, *, ihl=5, total_length=None, flags_frag=0, ttl=64):
    total = 20 + payload_len if total_length is None else total_length
    header = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, random.randrange(0xFFFF),
                         flags_frag, ttl, proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:]


def udp_datagram(sport, dport, data, length=None):
    return struct.pack("!HHHH", sport, dport, length or 8 + len(data), 0) + data


def build_ip_packet(kind, src, dst):
    data = b"egw e2e malformed"
    udp = udp_datagram(40999, 8080, data)
    if kind == "udp":
        return ipv4_header(src, dst, socket.IPPROTO_UDP, len(udp)) + udp
    if kind == "truncated":
        return ipv4_header(src, dst, socket.IPPROTO_UDP, len(udp))[:10]
    if kind == "ihl":
        return ipv4_header(src, dst, socket.IPPROTO_UDP, len(udp), ihl=4) + udp
    if kind == "totlen":
        return ipv4_header(src, dst, socket.IPPROTO_UDP, len(udp), total_length=1400) + udp
    if kind == "fragment":
        # First fragment of a datagram twice as long as what is sent: MF set, offset 0.
        first = udp_datagram(40999, 8080, data, length=8 + 2 * len(data))
        return ipv4_header(src, dst, socket.IPPROTO_UDP, len(first), flags_frag=0x2000) + first
    if kind == "fragment-tail":
        # A later fragment: offset 3 (24 bytes), MF clear.
        return ipv4_header(src, dst, socket.IPPROTO_UDP, len(data), flags_frag=3) + data
    if kind == "proto253":
        return ipv4_header(src, dst, 253, len(data)) + data
    raise ValueError(kind)


INJECT_KINDS = ("truncated", "ihl", "totlen", "fragment", "fragment-tail", "proto253", "udp")


def parse_mac(text):
    parts = text.split(":")
    if len(parts) != 6:
        fail(f"bad MAC address {text!r}", 2)
    return bytes(int(p, 16) for p in parts)


def cmd_inject(args):
    try:
        with open(f"/sys/class/net/{args.iface}/address") as f:
            src_mac = parse_mac(f.read().strip())
    except OSError as e:
        fail(f"interface {args.iface}: {e.strerror}")
    eth = parse_mac(args.dst_mac) + src_mac + struct.pack("!H", ETH_P_IP)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.bind((args.iface, 0))
        for _ in range(args.count):
            s.send(eth + build_ip_packet(args.kind, args.src, args.dst))
            if args.gap:
                time.sleep(args.gap)
    except OSError as e:
        fail(f"inject on {args.iface}: {e.strerror or e}")
    finally:
        s.close()
    print(f"sent {args.count} {args.kind} frame(s) on {args.iface}", flush=True)


# --- staged configuration -------------------------------------------------------------------

def load_config(path):
    """egwd's config is JSON with whole-line // comments."""
    with open(path) as f:
        return json.loads("".join(l for l in f if not l.lstrip().startswith("//")))


def stage_config(config, workdir, file_prefix, iface_tag=None, metrics_listen=None):
    """Writes workdir/egwd.json and workdir/manifests (see `stage`); returns both paths.

    `iface_tag` renames the net_af_packet interfaces egw-<role> to <tag>-<role>, the names
    scripts/netns.sh gives them with EGW_NETNS_TAG=<tag>; `metrics_listen` replaces
    metrics.listen (so that two runs do not both want the demo's port)."""
    config, workdir = Path(config).resolve(), Path(workdir).resolve()
    cfg = load_config(config)
    state = cfg.setdefault("state", {})
    source = Path(state.get("path", ""))
    if not source.is_absolute():
        source = config.parent / source
    if not source.is_dir():
        raise FileNotFoundError(f"{config}: $.state.path: manifests directory {source} does not exist")
    manifests = workdir / "manifests"
    shutil.copytree(source, manifests)
    state["path"] = str(manifests)
    eal = cfg.setdefault("eal", {})
    eal["file_prefix"] = file_prefix
    if iface_tag:
        eal["vdevs"] = [re.sub(r"(^|,)iface=egw-", rf"\g<1>iface={iface_tag}-", v) for v in eal.get("vdevs", [])]
    if metrics_listen:
        cfg.setdefault("metrics", {})["listen"] = metrics_listen
    staged = workdir / "egwd.json"
    staged.write_text(json.dumps(cfg, indent=2) + "\n")
    return staged, manifests


def cmd_stage(args):
    try:
        staged, _ = stage_config(args.config, args.dir, args.file_prefix, args.iface_tag, args.metrics_listen)
    except (OSError, ValueError) as e:
        fail(str(e))
    print(staged, flush=True)


# --- manifests ------------------------------------------------------------------------------

def split_yaml_documents(text):
    return re.split(r"(?m)^---[ \t]*\n", text)


def is_egress_service(doc, namespace, name):
    """Whether one YAML document (of the simple block style of the demo manifests) is the
    EgressService namespace/name; a document without a namespace is in "default"."""
    def field(key, value, indented):
        indent = r"\s+" if indented else ""
        return re.search(rf"(?m)^{indent}{key}:\s*[\"']?{re.escape(value)}[\"']?\s*$", doc) is not None
    in_namespace = (field("namespace", namespace, True) if re.search(r"(?m)^\s+namespace:", doc)
                    else namespace == "default")
    return field("kind", "EgressService", False) and field("name", name, True) and in_namespace


def delete_egress_service(manifests, key):
    """Removes the EgressService `key` ("namespace/name") from the directory's YAML manifests.
    Returns (file, its previous text) so that a caller can put it back."""
    namespace, _, name = key.rpartition("/")
    namespace = namespace or "default"
    for path in sorted(Path(manifests).iterdir()):
        if path.suffix not in (".yaml", ".yml"):
            continue
        text = path.read_text()
        docs = split_yaml_documents(text)
        kept = [d for d in docs if not is_egress_service(d, namespace, name)]
        if len(kept) != len(docs):
            path.write_text("---\n".join(kept))
            return path, text
    raise LookupError(f"no YAML manifest in {manifests} holds EgressService {namespace}/{name}")


def cmd_delete_egress_service(args):
    try:
        path, _ = delete_egress_service(args.dir, args.key)
    except (OSError, LookupError) as e:
        fail(str(e))
    print(f"deleted EgressService {args.key} from {path}", flush=True)


# --- command line ---------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(prog="peer.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("serve", help="echo the client's address over TCP and UDP")
    s.add_argument("--tcp", type=int, metavar="PORT")
    s.add_argument("--udp", type=int, metavar="PORT")
    s.add_argument("--icmp", action="store_true", help="log incoming ICMP echo requests")
    s.add_argument("--ipv6", action="store_true", help="serve on IPv6 too")
    s.add_argument("--bind", default="0.0.0.0", metavar="IP")
    s.add_argument("--lifetime", type=float, default=120.0, metavar="S")
    s.set_defaults(fn=cmd_serve)

    for name, fn in (("tcp", cmd_tcp), ("udp", cmd_udp)):
        c = sub.add_parser(name, help=f"{name.upper()} client: print the address the server saw")
        c.add_argument("host")
        c.add_argument("port", type=int)
        c.add_argument("--bind", metavar="IP[:PORT]")
        c.add_argument("--timeout", type=float, default=5.0, metavar="S")
        if name == "udp":
            c.add_argument("--interval", type=float, default=0.5, metavar="S",
                           help="resend the datagram this often until answered")
        c.set_defaults(fn=fn)

    c = sub.add_parser("ping", help="ICMP echo client")
    c.add_argument("host")
    c.add_argument("--bind", metavar="IP")
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--timeout", type=float, default=5.0, metavar="S")
    c.add_argument("--interval", type=float, default=0.5, metavar="S")
    c.add_argument("--token", help="payload tag that the server's --icmp log shows")
    c.set_defaults(fn=cmd_ping)

    c = sub.add_parser("inject", help="send raw (malformed) Ethernet frames")
    c.add_argument("--iface", required=True)
    c.add_argument("--dst-mac", required=True)
    c.add_argument("--kind", required=True, choices=INJECT_KINDS)
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--src", default="10.244.1.10")
    c.add_argument("--dst", default="192.0.2.100")
    c.add_argument("--gap", type=float, default=0.001, metavar="S", help="pause between frames")
    c.set_defaults(fn=cmd_inject)

    c = sub.add_parser("stage", help="copy a config and its manifests into a work directory")
    c.add_argument("--config", required=True)
    c.add_argument("--dir", required=True)
    c.add_argument("--file-prefix", default=f"egw-{os.getpid()}")
    c.add_argument("--iface-tag", help="interface names <tag>-<role> instead of egw-<role> (EGW_NETNS_TAG)")
    c.add_argument("--metrics-listen", help="replaces metrics.listen")
    c.set_defaults(fn=cmd_stage)

    c = sub.add_parser("delete-egress-service", help="remove an EgressService from a manifests directory")
    c.add_argument("dir")
    c.add_argument("key", metavar="NAMESPACE/NAME")
    c.set_defaults(fn=cmd_delete_egress_service)

    args = p.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
