# SPDX-License-Identifier: Apache-2.0
"""End to end in IPv6 (issue 11): the real egwd between dual-stack kernel hosts.

scripts/netns.sh's topology with EGW_NETNS_IPV6=1: every namespace keeps its IPv4 addresses and
gains IPv6 ones (pods fd00:10:244:1::10, ::11, ::20, ::30; pods2 fd00:10:244:2::10; ext1
2001:db8:2::100; ext2 2001:db8:100::100), with egwd's ports at the ::1 of each prefix. The suite
stages config/demo.json, which is dual-stack (those port addresses, the IPv6 pod and service
ranges; default/web's last IPv6 ingress entry is 2001:db8:2::50 and its pods have IPv6
endpoints, db (Network, blue) has an IPv6 endpoint too), and checks that it still is. It adds
pods2's smaller MTU (1300), so that a routed datagram larger than it gets Packet Too Big from the
gateway, and an IPv6-only Service (default/v6only) for the CLI.

The kernels find egwd's ports by Neighbor Solicitation and egwd finds theirs the same way; what
arrives on the far side (the source address a server saw, the ICMPv6 error a socket was given) is
what the tests check: routed between pod subnets with the hop limit and Packet Too Big of a
router (test_1x), NAPT66 for both Service modes and the default masquerade, echo and ICMPv6
errors translated back (test_2x), and ingress to web's IPv6 ingress IP, routed untranslated to the
host in pods2 (`ingress.via6`, playing a cluster node) and back, with a pod's connect to it refused
at once (test_3x), and a UDP datagram larger than the links, which the kernels cut into IPv6
fragments and egwd puts together, translates and cuts again, both ways (test_5x; IPv6 fragments
reach egwd over net_af_packet, whose fanout group reassembles IPv4 only).

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_ipv6_e2e.py
"""

import json
import os
import re
import socket
import sys
import textwrap
import time
import unittest
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import harness  # noqa: E402
import peer  # noqa: E402  (stage_config)
from harness import run, run_bounded, tail  # noqa: E402

PEER = HERE / "peer.py"
STREAM = HERE / "stream.py"
DEMO_CONFIG = REPO / "config" / "demo.json"
PREFIX = f"egwv6{os.getpid()}"
TAG = harness.iface_tag("6")
FILE_PREFIX = f"egw-v6-{os.getpid()}"

PODS_GW = "fd00:10:244:1::1"          # egwd's port "pods"
PODS2_GW = "fd00:10:244:2::1"
EXT1_GW = "2001:db8:2::1"             # masquerade address on ext1
EXT2_GW = "2001:db8:100::1"           # masquerade address on ext2 (VRF blue)
PODS_LINK_LOCAL = "fe80::e9:ff:fe00:1"   # from the port's MAC 02:e9:00:00:00:01 (EUI-64)
WEB_POD = "fd00:10:244:1::10"         # default/web, LoadBalancerIP
WEB_POD2 = "fd00:10:244:1::11"
DB_POD = "fd00:10:244:1::20"          # default/db, Network blue
OTHER_POD = "fd00:10:244:1::30"       # endpoint of no EgressService
POD2 = "fd00:10:244:2::10"            # a pod in the other pod subnet
WEB_INGRESS6 = "2001:db8:2::50"
EXT1 = "2001:db8:2::100"
EXT1_V4 = "192.0.2.100"               # ext1's IPv4 address (the namespaces are dual-stack)
WEB_POD_V4 = "10.244.1.10"            # the same pod's IPv4 address
WEB_INGRESS_V4 = "192.0.2.50"
EXT2 = "2001:db8:100::100"
SERVICE_PORT = 8080
WEB_LB_PORT = 80                      # web's spec.ports (config/demo-manifests/web.yaml)
CLOSED_PORT = 8099
PODS2_MTU = 1300
HOLD = 1.0

FRAG_PORT = 9106
FRAG_SIZE = 4000    # UDP payload: three IPv6 fragments on a 1500-byte link (1448 + 1448 + 1120 bytes)

# The server in ext1 for the fragments test: answers each datagram with a JSON line (the source it
# saw, the size and SHA-256 of what arrived), a newline and the payload echoed back.
FRAG_SERVER = textwrap.dedent("""\
    import hashlib, json, socket, sys
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind(("::", int(sys.argv[1])))
    print("ready", flush=True)
    while True:
        data, addr = s.recvfrom(65535)
        head = json.dumps({"src": addr[0], "len": len(data), "sha": hashlib.sha256(data).hexdigest()})
        s.sendto(head.encode() + b"\\n" + data, addr)
        print("answered", addr[0], len(data), flush=True)
""")

# The client in the pods namespace: one datagram from `bind`, one answer, printed as JSON.
FRAG_CLIENT = textwrap.dedent("""\
    import hashlib, json, os, socket, sys
    bind, dst, port, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((bind, 0))
    s.settimeout(3)
    payload = os.urandom(size)
    out = {"sha": hashlib.sha256(payload).hexdigest()}
    try:
        s.sendto(payload, (dst, port))
        data = s.recv(65535)
        head, _, echo = data.partition(b"\\n")
        out.update(answer=json.loads(head), echo_ok=echo == payload, echo_len=len(echo))
    except OSError as e:
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out), flush=True)
""")

PORT_ADDRESSES6 = {"pods": "fd00:10:244:1::1/64", "pods2": "fd00:10:244:2::1/64",
                   "ext1": "2001:db8:2::1/64", "ext2": "2001:db8:100::1/64"}

# A LoadBalancerIP Service with an IPv6 ingress IP and no IPv4 one: only its IPv6 endpoints are
# translated (show services says "IPv6 only"). Its endpoint sends no traffic here.
V6ONLY_INGRESS6 = "2001:db8:2::60"
V6ONLY = """apiVersion: v1
kind: Service
metadata: {name: v6only, namespace: default}
spec: {type: LoadBalancer, clusterIP: "fd00:10:96::60", ipFamilies: [IPv6], ipFamilyPolicy: SingleStack}
status: {loadBalancer: {ingress: [{ip: "2001:db8:2::60"}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: v6only-1
  namespace: default
  labels: {kubernetes.io/service-name: v6only}
addressType: IPv6
endpoints:
- {addresses: ["fd00:10:244:1::40"], nodeName: worker-1, conditions: {ready: true}}
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {name: v6only, namespace: default}
spec:
  sourceIPBy: LoadBalancerIP
  nodeSelector: {matchLabels: {egw.example.com/gateway: "true"}}
"""

# default/shop6 (test_40): an IPv6-only LoadBalancerIP Service whose EgressService selects gateways
# by label, so that the test moves it here by changing the label it asks for.
SHOP6_INGRESS = "2001:db8:2::70"
SHOP6 = """apiVersion: v1
kind: Service
metadata: {{name: shop6, namespace: default}}
spec:
  type: LoadBalancer
  clusterIP: "fd00:10:96::70"
  ipFamilies: [IPv6]
  ipFamilyPolicy: SingleStack
  ports: [{{name: http, port: 80, protocol: TCP, targetPort: 8080}}]
status: {{loadBalancer: {{ingress: [{{ip: "{ingress}"}}]}}}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: shop6-1
  namespace: default
  labels: {{kubernetes.io/service-name: shop6}}
addressType: IPv6
endpoints:
- {{addresses: ["fd00:10:244:1::41"], nodeName: worker-1, conditions: {{ready: true}}}}
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {{name: shop6, namespace: default}}
spec:
  sourceIPBy: LoadBalancerIP
  nodeSelector: {{matchLabels: {{egw.example.com/gateway: "{label}"}}}}
"""
EXT1_MAC = "02:e9:00:00:00:03"        # egwd's port ext1
OLD_GW_MAC = "02:00:5e:00:00:99"      # the MAC a previous gateway had
CONVERGE_TIMEOUT = 10.0


def ns(role):
    return f"{PREFIX}-{role}"


def split_endpoint(text):
    """'[2001:db8::50]:40000' -> ('2001:db8::50', 40000)."""
    m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:(\d+)", text.strip())
    if not m:
        raise AssertionError(f"not an IPv6 endpoint: {text!r}")
    return m.group(1), int(m.group(2))


class Ipv6E2E(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "ipv6", PREFIX, TAG, ipv6=True)
        cls.metrics_port = harness.free_port()
        cls.config, manifests = peer.stage_config(DEMO_CONFIG, rig.workdir, FILE_PREFIX, iface_tag=TAG,
                                                  metrics_listen=f"127.0.0.1:{cls.metrics_port}")
        cfg = json.loads(cls.config.read_text())
        # The demo is dual-stack (config/demo.json, config/demo-manifests); this suite's addresses
        # are its addresses.
        have = {p["name"]: p["addresses"] for p in cfg["ports"]}
        for name, address in PORT_ADDRESSES6.items():
            if address not in have.get(name, []):
                raise RuntimeError(f"{DEMO_CONFIG}: port {name} lost its IPv6 address {address}: {have}")
        if "fd00:10:244::/48" not in cfg["cluster"]["pod_cidrs"]:
            raise RuntimeError(f"{DEMO_CONFIG}: no IPv6 pod range: {cfg['cluster']}")
        if WEB_INGRESS6 not in (manifests / "web.yaml").read_text():
            raise RuntimeError(f"{manifests / 'web.yaml'}: default/web lost its IPv6 ingress IP {WEB_INGRESS6}")
        for p in cfg["ports"]:
            if p["name"] == "pods2":
                p["mtu"] = PODS2_MTU
        # Ingress to web's IPv6 ingress IP goes to the host in pods2, which plays a cluster node
        # (test_3x).
        cfg["ingress"] = {"via6": POD2, "port": "pods2"}
        cls.config.write_text(json.dumps(cfg, indent=2) + "\n")
        (manifests / "v6only.yaml").write_text(V6ONLY)
        cls.manifests = manifests
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")

        rig.netns.up()
        r = run(["ip", "-n", ns("pods2"), "link", "set", "eth0", "mtu", str(PODS2_MTU)], 10)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        rig.start_ready_egwd(cls.config, cls.status_file, FILE_PREFIX)
        for role in ("ext1", "ext2", "pods2"):
            rig.spawn_in(ns(role), f"server-{role}", PEER, "serve", "--tcp", SERVICE_PORT, "--udp", SERVICE_PORT,
                         "--icmp", "--ipv6", "--lifetime", 1800)

    # --- helpers ---------------------------------------------------------------------------

    def diag(self):
        status = harness.read_status(self.status_file) or {}
        parts = [f"drops: {status.get('drops')}", f"neighbors: {status.get('neighbors')}"]
        for s in status.get("sessions", [])[-10:]:
            parts.append(f"session {json.dumps(s, sort_keys=True)}")
        parts.append("--- egwd log (tail) ---\n" + tail(self.log_path, 30))
        return "\n".join(parts)

    def in_ns(self, role, script, *args, timeout=20.0):
        r = run_bounded(["ip", "netns", "exec", ns(role), sys.executable, str(script), *map(str, args)], timeout)
        return r.stdout.strip(), r

    def seen(self, proto, src, dst, port=SERVICE_PORT):
        """What the server at `dst` saw of a TCP or UDP client bound to `src` in the pods namespace."""
        out, r = self.in_ns("pods", PEER, proto, dst, port, "--bind", src, "--timeout", 5, timeout=15)
        if r.returncode != 0:
            self.fail(f"{proto.upper()} {src} -> [{dst}]:{port} got no answer: {(r.stderr or out).strip()}\n"
                      f"{self.diag()}")
        return split_endpoint(out.splitlines()[-1])

    def assert_source(self, proto, src, dst, expected):
        ip, _ = self.seen(proto, src, dst)
        self.assertEqual(ip, expected, f"{proto.upper()} from {src} to {dst} arrived from {ip}\n{self.diag()}")

    def consistently_from(self, src, dst, expected):
        # Each of TCP and UDP, checked again over a period: every attempt arrives from `expected`.
        harness.hold(lambda: all(self.seen(proto, src, dst)[0] == expected for proto in ("tcp", "udp")),
                     HOLD, lambda: f"not consistently from {expected}\n{self.diag()}", interval=0.2)

    def ping(self, role, host, count=2, bind=None):
        args = ["ping", host, "--count", count, "--timeout", 5, "--interval", 0.2]
        if bind:
            args += ["--bind", bind]
        out, r = self.in_ns(role, PEER, *args, timeout=15)
        self.assertEqual(r.returncode, 0, f"ping {host} from {role}: {r.stderr.strip()}\n{self.diag()}")
        return out.splitlines()

    # --- the gateway's own addresses --------------------------------------------------------

    def test_00_pods_reach_their_gateway_by_neighbor_discovery_and_echo(self):
        # Global address and link-local: the pod's kernel resolved each by Neighbor Solicitation
        # and got the echo answered from that address.
        replies = self.ping("pods", PODS_GW, bind=WEB_POD)
        self.assertEqual(len(replies), 2, replies)
        self.assertTrue(all(line.startswith(f"reply from {PODS_GW} ") for line in replies), replies)
        replies = self.ping("pods", f"{PODS_LINK_LOCAL}%eth0")
        self.assertTrue(all(line.startswith(f"reply from {PODS_LINK_LOCAL}") for line in replies), replies)
        r = run(["ip", "-n", ns("pods"), "-j", "-6", "neigh", "show", PODS_GW, "dev", "eth0"], 10)
        entries = json.loads(r.stdout or "[]")
        self.assertEqual([e.get("lladdr") for e in entries], ["02:e9:00:00:00:01"], r.stdout)

    def test_01_external_hosts_reach_the_outside_ports(self):
        for role, gw in (("ext1", EXT1_GW), ("ext2", EXT2_GW)):
            replies = self.ping(role, gw)
            self.assertTrue(all(line.startswith(f"reply from {gw} ") for line in replies), replies)

    def test_02_the_ingress_ip_is_answered_for_on_its_network(self):
        # ext1 resolves web's IPv6 ingress IP to egwd's ext1 MAC (the Service is served here).
        run(["ip", "-n", ns("ext1"), "-6", "neigh", "flush", "dev", "eth0"], 10)
        self.in_ns("ext1", PEER, "udp", WEB_INGRESS6, 9, "--timeout", 1, timeout=10)

        def resolved():
            r = run(["ip", "-n", ns("ext1"), "-j", "-6", "neigh", "show", WEB_INGRESS6, "dev", "eth0"], 10)
            return [e.get("lladdr") for e in json.loads(r.stdout or "[]") if e.get("lladdr")]
        macs = harness.wait_for(resolved, 5, lambda: f"ext1 did not resolve {WEB_INGRESS6}\n{self.diag()}")
        self.assertEqual(macs, ["02:e9:00:00:00:03"])


    # --- routed without translation ----------------------------------------------------------

    def test_10_pod_to_pod_across_the_gateway_keeps_its_source(self):
        # pods2 is in the IPv6 pod range: routed, never translated, from any pod.
        for src in (WEB_POD, OTHER_POD):
            self.consistently_from(src, POD2, src)

    def test_11_a_hop_limit_one_probe_gets_time_exceeded_from_the_gateway(self):
        out, r = self.in_ns("pods", STREAM, "ttl-probe", POD2, 33434, "--bind", f"[{WEB_POD}]:41010", "--timeout", 3)
        self.assertEqual(out, f"icmp6 3 0 {PODS_GW}", f"{r.stderr}\n{self.diag()}")
        # Hop limit 2 reaches the host (whose closed port answers, from itself).
        out, r = self.in_ns("pods", STREAM, "ttl-probe", POD2, 33435, "--bind", f"[{WEB_POD}]:41011", "--ttl", 2,
                            "--timeout", 3)
        self.assertEqual(out, f"icmp6 1 4 {POD2}", f"{r.stderr}\n{self.diag()}")

    def test_12_larger_than_the_next_link_gets_packet_too_big_from_the_gateway(self):
        # Routers never fragment IPv6: egwd answers with the pods2 link's MTU, and the pod's
        # kernel takes it for the route.
        out, r = self.in_ns("pods", STREAM, "ttl-probe", POD2, SERVICE_PORT, "--bind", f"[{OTHER_POD}]:41020",
                            "--ttl", 64, "--size", PODS2_MTU + 100, "--timeout", 3)
        self.assertEqual(out, f"icmp6 2 0 {PODS_GW} mtu {PODS2_MTU}", f"{r.stderr}\n{self.diag()}")
        r = run(["ip", "-n", ns("pods"), "-6", "route", "get", POD2, "from", OTHER_POD], 10)
        self.assertIn(f"mtu {PODS2_MTU}", r.stdout, r.stdout)

    # --- translated ---------------------------------------------------------------------------

    def test_20_pods_of_a_load_balancer_ip_service_leave_with_its_ipv6_ingress_ip(self):
        for src in (WEB_POD, WEB_POD2):
            self.consistently_from(src, EXT1, WEB_INGRESS6)

    def test_21_a_network_service_leaves_through_its_vrf_masqueraded(self):
        self.consistently_from(DB_POD, EXT2, EXT2_GW)

    def test_22_a_pod_of_no_egress_service_is_masqueraded(self):
        self.consistently_from(OTHER_POD, EXT1, EXT1_GW)

    def test_23_ping_from_a_pod_arrives_from_the_ingress_ip_and_is_answered(self):
        token = f"v6-{os.getpid()}-{time.monotonic_ns()}"
        out, r = self.in_ns("pods", PEER, "ping", EXT1, "--bind", WEB_POD, "--count", 2, "--timeout", 5,
                            "--interval", 0.2, "--token", token, timeout=15)
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{self.diag()}")
        self.assertTrue(all(line.startswith(f"reply from {EXT1} ") for line in out.splitlines()), out)
        log = self.rig.log_path("server-ext1").read_text(errors="replace")
        self.assertIn(f"icmp {WEB_INGRESS6} ", "\n".join(l for l in log.splitlines() if token in l), log)

    def test_24_port_unreachable_from_outside_reaches_the_pod_translated_back(self):
        # The pod's kernel matches the ICMPv6 error to its socket only when the quoted header names
        # the socket's own addresses and ports and the checksums are right.
        out, r = self.in_ns("pods", STREAM, "probe-udp", EXT1, CLOSED_PORT, "--bind", f"[{WEB_POD}]:41030",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")
        # TCP to a closed port: the RST comes back translated.
        out, r = self.in_ns("pods", STREAM, "probe-tcp", EXT1, CLOSED_PORT, "--bind", f"[{WEB_POD}]:41031",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")


    def test_25_show_sessions_lists_the_ipv6_sessions_with_their_translation(self):
        # A fixed source port, so the session is found by it; the server saw the ingress IP.
        out, r = self.in_ns("pods", PEER, "udp", EXT1, SERVICE_PORT, "--bind", f"[{WEB_POD}]:41050", "--timeout", 5)
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{self.diag()}")
        self.assertEqual(split_endpoint(out.splitlines()[-1])[0], WEB_INGRESS6)
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "--json", "show", "sessions", "limit", "1000"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        sessions = doc["sessions"] if isinstance(doc, dict) else doc
        ours = [s for s in sessions if f"[{WEB_POD}]:41050" in json.dumps(s)]
        self.assertEqual(len(ours), 1, r.stdout)
        text = json.dumps(ours[0])
        self.assertIn(f"[{WEB_INGRESS6}]:", text)
        self.assertIn(f"[{EXT1}]:{SERVICE_PORT}", text)
        self.assertIn("default/web", text)

    def egwctl_json(self, *args):
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "--json", *args], 10)
        self.assertEqual(r.returncode, 0, f"egwctl {' '.join(args)}: {r.stderr}")
        return json.loads(r.stdout)

    def test_26_show_sessions_filters_and_snat_pools_take_ipv6(self):
        # Three UDP flows of known ports: web's pod over IPv6 (to web's IPv6 ingress IP), a pod of
        # no Service over IPv6 (masqueraded to ext1's IPv6 address), web's pod over IPv4.
        flows = [(f"[{WEB_POD}]:41060", EXT1, WEB_INGRESS6), (f"[{OTHER_POD}]:41061", EXT1, EXT1_GW),
                 (f"{WEB_POD_V4}:41062", EXT1_V4, WEB_INGRESS_V4)]
        for bind, dst, expected in flows:
            out, r = self.in_ns("pods", PEER, "udp", dst, SERVICE_PORT, "--bind", bind, "--timeout", 5, timeout=15)
            self.assertEqual(r.returncode, 0, f"{bind} -> {dst}: {r.stderr}\n{self.diag()}")
            self.assertIn(expected, out.splitlines()[-1])

        def listed(*filters):
            doc = self.egwctl_json("show", "sessions", "limit", "1000", *filters)
            self.assertFalse(doc["truncated"])
            return {s["inside"] for s in doc["sessions"]}
        ours = {f"[{WEB_POD}]:41060", f"[{OTHER_POD}]:41061", f"{WEB_POD_V4}:41062"}
        self.assertLessEqual(ours, listed(), "every flow has its session")
        # An IPv6 address matches that pod's IPv6 sessions only, whatever the form it is written in.
        for form in (WEB_POD, "fd00:10:244:1:0:0:0:10", "FD00:10:244:1::0010"):
            got = listed("saddr", form, "sport", "41060")
            self.assertEqual(got, {f"[{WEB_POD}]:41060"}, form)
        self.assertEqual(listed("saddr", WEB_POD, "sport", "41062"), set(), "an IPv6 address is no IPv4 session")
        self.assertEqual(listed("saddr", WEB_POD_V4, "sport", "41062"), {f"{WEB_POD_V4}:41062"})
        self.assertEqual(listed("saddr", WEB_POD_V4, "sport", "41060"), set(), "an IPv4 address is no IPv6 session")
        self.assertEqual(listed("daddr", EXT1, "dport", str(SERVICE_PORT)) & ours,
                         {f"[{WEB_POD}]:41060", f"[{OTHER_POD}]:41061"})
        self.assertEqual(listed("daddr", EXT1_V4, "dport", str(SERVICE_PORT)) & ours, {f"{WEB_POD_V4}:41062"})
        self.assertEqual(listed("saddr", OTHER_POD, "daddr", EXT1, "proto", "udp", "service", "default/web"), set())
        one = self.egwctl_json("show", "sessions", "saddr", OTHER_POD, "sport", "41061")["sessions"]
        self.assertEqual([(s["proto"], s["service"], split_endpoint(s["outside"])[0]) for s in one],
                         [("udp", "", EXT1_GW)], one)
        # A prefix is not an address: refused with the argument named, egwd unharmed.
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "show", "sessions", "saddr", "fd00::/64"], 10)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn('bad IP "fd00::/64"', r.stderr)

        # show snat pools: web's IPv6 ingress IP and ext1's IPv6 address beside the IPv4 pools,
        # their UDP ports in use counted from the sessions (at least ours: earlier tests add some).
        pools = self.egwctl_json("show", "snat", "pools")
        rows_of = {}
        for p in pools:
            rows_of.setdefault((p["address"], p["proto"]), []).append(p)
        for address, used_by in ((WEB_INGRESS6, "default/web"), (EXT1_GW, "masquerade on ext1"),
                                 (EXT2_GW, "masquerade on ext2")):
            self.assertEqual({proto for (a, proto) in rows_of if a == address}, {"tcp", "udp", "icmpv6"}, address)
            for p in rows_of[(address, "udp")]:
                self.assertIn(used_by, p["used_by"])
                self.assertEqual(p["family"], "IPv6")
                self.assertEqual(p["capacity"], p["port_max"] - p["port_min"] + 1)
        for p in rows_of[(WEB_INGRESS_V4, "udp")]:
            self.assertEqual(p["family"], "IPv4")
        # Ours (and what earlier tests left) hold UDP ports of web's and ext1's IPv6 addresses.
        for address in (WEB_INGRESS6, EXT1_GW):
            udp = rows_of[(address, "udp")]
            self.assertGreaterEqual(sum(p["ports_in_use"] for p in udp), 1, udp)
            self.assertGreaterEqual(sum(p["sessions"] for p in udp), sum(p["ports_in_use"] for p in udp), udp)
        addresses = [p["address"] for p in pools]
        first_v6 = next(i for i, a in enumerate(addresses) if ":" in a)
        self.assertTrue(all(":" in a for a in addresses[first_v6:]), "IPv4 pools first, then IPv6")

    def test_27_show_services_routes_and_neighbors_show_ipv6(self):
        ctl = [str(harness.egwctl_binary()), "-p", FILE_PREFIX]
        services = {s["key"]: s for s in self.egwctl_json("show", "services")}
        web, db, v6only = services["default/web"], services["default/db"], services["default/v6only"]
        self.assertEqual((web["ingress_ipv6"], web["endpoints_ipv6"], web["programmed"], web["programmed_ipv6"]),
                         (WEB_INGRESS6, 2, True, True), web)
        self.assertEqual((db["programmed"], db["programmed_ipv6"]), (True, True), db)
        self.assertEqual((v6only["ingress_ip"], v6only["ingress_ipv6"], v6only["programmed"],
                          v6only["programmed_ipv6"]), ("", V6ONLY_INGRESS6, False, True), v6only)
        text = run(ctl + ["show", "services"], 10).stdout
        row = next(l.split() for l in text.splitlines() if l.startswith("default/v6only "))
        self.assertEqual(row[2:4], ["IPv6", "only"], text)
        self.assertIn(V6ONLY_INGRESS6, row, text)
        web_row = next(l.split() for l in text.splitlines() if l.startswith("default/web "))
        self.assertEqual((web_row[2], web_row[5], web_row[7]), ("yes", WEB_INGRESS6, "2+2"), text)
        one = run(ctl + ["show", "service", "default/web"], 10).stdout
        self.assertIn(f"programmed      yes: SNAT to {WEB_INGRESS_V4} and {WEB_INGRESS6}, VRF default", one)
        one = run(ctl + ["show", "service", "default/v6only"], 10).stdout
        self.assertIn(f"programmed      IPv6 only: SNAT to {V6ONLY_INGRESS6}, VRF default; IPv4 not: no IPv4 ingress IP",
                      one)
        # The pool of the IPv6-only Service's ingress IP is listed, unused.
        pools = [p for p in self.egwctl_json("show", "snat", "pools") if p["address"] == V6ONLY_INGRESS6]
        self.assertEqual({(p["proto"], p["ports_in_use"]) for p in pools},
                         {("tcp", 0), ("udp", 0), ("icmpv6", 0)}, pools)
        self.assertTrue(all(p["used_by"] == ["default/v6only"] for p in pools), pools)

        # Routes: the connected IPv6 prefixes of the VRF's ports beside the IPv4 ones.
        routes = self.egwctl_json("show", "routes", "vrf", "blue")["routes"]
        self.assertIn({"prefix": "2001:db8:100::/64", "via": None, "port": "ext2", "type": "connected"}, routes)
        default = {r["prefix"] for r in self.egwctl_json("show", "routes", "vrf", "default")["routes"]}
        self.assertLessEqual({"fd00:10:244:1::/64", "fd00:10:244:2::/64", "2001:db8:2::/64", "192.0.2.0/24"},
                             default)
        # Neighbours: ext1's host, learned by Neighbor Discovery for the translated flows above.
        self.in_ns("pods", PEER, "udp", EXT1, SERVICE_PORT, "--bind", WEB_POD, "--timeout", 5, timeout=15)
        neighbors = self.egwctl_json("show", "neighbors")
        learned = [n for n in neighbors if n["ip"] == EXT1]
        self.assertEqual([n["port"] for n in learned], ["ext1"], neighbors)
        self.assertRegex(run(ctl + ["show", "neighbors"], 10).stdout, rf"(?m)^ext1 +{re.escape(EXT1)} +")

    # --- ingress to the served IPv6 ingress IP (dataplane/ingress.h) --------------------------

    def node_serving(self, address):
        """pods2's kernel plays a cluster node: the load-balancer IP on its loopback (as
        kube-proxy's IPVS mode puts it on a dummy device) and a server on web's port that answers
        with the client address it saw. Undone at cleanup."""
        r = run(["ip", "-n", ns("pods2"), "addr", "add", f"{address}/128", "dev", "lo"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(run, ["ip", "-n", ns("pods2"), "addr", "del", f"{address}/128", "dev", "lo"], 10)
        name = f"node-{time.monotonic_ns()}"
        proc = self.rig.spawn_in(ns("pods2"), name, PEER, "serve", "--tcp", WEB_LB_PORT, "--ipv6", "--lifetime", 300)
        self.addCleanup(lambda: (proc.terminate(), proc.wait(5)))

    def status_counter(self, *keys):
        doc = harness.read_status(self.status_file) or {}
        for k in keys:
            doc = doc.get(k, {}) if isinstance(doc, dict) else {}
        return doc if isinstance(doc, int) else 0

    def wait_counter(self, keys, at_least, what):
        """Polls the status file (rewritten about once a second) until counter `keys` reaches
        `at_least`."""
        return harness.wait_for(lambda: self.status_counter(*keys) >= at_least and self.status_counter(*keys),
                                10, lambda: f"{what}: {'.'.join(keys)} is {self.status_counter(*keys)}, "
                                f"expected at least {at_least}\n{self.diag()}")

    def test_30_a_client_reaches_the_service_through_its_ipv6_ingress_ip_and_gets_the_answer_back(self):
        self.node_serving(WEB_INGRESS6)
        forwarded_in = self.status_counter("ingress", "forwarded_in")
        replies_out = self.status_counter("ingress", "replies_out")
        # The node saw the client's own address (nothing translated on the way in), and the client
        # got the answer from the ingress IP it connected to (nothing translated on the way out:
        # the TCP handshake takes no other source). Checked over a period.
        def connected():
            out, r = self.in_ns("ext1", PEER, "tcp", WEB_INGRESS6, WEB_LB_PORT, "--bind", EXT1, "--timeout", 5,
                                timeout=15)
            self.assertEqual(r.returncode, 0, f"TCP [{EXT1}] -> [{WEB_INGRESS6}]:{WEB_LB_PORT}: "
                             f"{(r.stderr or out).strip()}\n{self.diag()}")
            return split_endpoint(out.splitlines()[-1])[0] == EXT1
        harness.hold(connected, HOLD, lambda: f"the node did not see {EXT1}\n{self.diag()}", interval=0.2)
        # At least the handshake of each connection (hold() makes two at least): SYN and ACK in,
        # SYN+ACK and the answer out. The closing segments are not counted on: once, under load,
        # one connection's last ACK was not among them when the count was read.
        self.wait_counter(("ingress", "forwarded_in"), forwarded_in + 4, "ingress in")
        self.wait_counter(("ingress", "replies_out"), replies_out + 4, "ingress out")
        # Stateless: no session holds the ingress IP and the Service port on either side.
        status = harness.read_status(self.status_file) or {}
        service_side = f"[{WEB_INGRESS6}]:{WEB_LB_PORT}"
        self.assertFalse([s for s in status.get("sessions", []) if service_side in s.values()],
                         "ingress made sessions")
        # Another port of the ingress IP is not the Service's: no answer.
        out, r = self.in_ns("ext1", PEER, "tcp", WEB_INGRESS6, WEB_LB_PORT + 1, "--bind", EXT1, "--timeout", 1.5,
                            timeout=10)
        self.assertNotEqual(r.returncode, 0, out)

    def test_31_a_pod_connecting_to_the_ipv6_ingress_ip_is_refused_at_once(self):
        # Hairpin: refused with ICMPv6 administratively prohibited (1/1), which the pod's kernel
        # turns into "Permission denied" at once instead of a connect that times out.
        self.node_serving(WEB_INGRESS6)
        before = self.status_counter("icmp", "sent", "admin_prohibited6")
        started = time.monotonic()
        out, r = self.in_ns("pods", PEER, "tcp", WEB_INGRESS6, WEB_LB_PORT, "--bind", WEB_POD, "--timeout", 5,
                            timeout=15)
        elapsed = time.monotonic() - started
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn("Permission denied", r.stderr + out)
        self.assertLess(elapsed, 4.0, f"the refusal took {elapsed:.1f}s: {r.stderr}")
        self.wait_counter(("icmp", "sent", "admin_prohibited6"), before + 1, "hairpin refusal")
        self.assert_source("tcp", WEB_POD, EXT1, WEB_INGRESS6)   # its egress is untouched

    # --- taking an IPv6 ingress IP over: unsolicited Neighbor Advertisements -----------------

    # --- fragments ----------------------------------------------------------------------------

    def snmp6(self, role):
        """The Ip6 counters of a namespace's kernel (/proc/net/snmp6), by name."""
        r = run(["ip", "netns", "exec", ns(role), "cat", "/proc/net/snmp6"], 10)
        return {k: int(v) for k, v in (line.split() for line in r.stdout.splitlines() if line.startswith("Ip6"))}

    def fragment_counters(self):
        status = harness.read_status(self.status_file) or {}
        return status.get("fragments", {}), status.get("drops", {})

    def test_50_large_udp_datagram_in_fragments_both_ways(self):
        if not (self.rig.workdir / "frag_server.py").exists():
            (self.rig.workdir / "frag_server.py").write_text(FRAG_SERVER)
            (self.rig.workdir / "frag_client.py").write_text(FRAG_CLIENT)
            self.rig.spawn_in(ns("ext1"), "frag-server", self.rig.workdir / "frag_server.py", FRAG_PORT)
        before, drops_before = self.fragment_counters()
        self.assertIn("received", before, "the status file has no fragment counters")
        ext1_before, pods_before = self.snmp6("ext1"), self.snmp6("pods")
        out, r = self.in_ns("pods", self.rig.workdir / "frag_client.py", WEB_POD, EXT1, FRAG_PORT, FRAG_SIZE,
                            timeout=15)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(out.splitlines()[-1])
        self.assertNotIn("error", out, f"{out}\n{self.diag()}")
        answer = out["answer"]
        # ext1's kernel put egwd's fragments together and saw web's IPv6 ingress IP.
        self.assertEqual(answer["src"], WEB_INGRESS6)
        self.assertEqual(answer["len"], FRAG_SIZE)
        self.assertEqual(answer["sha"], out["sha"], "the datagram arrived changed")
        # The echo, cut by ext1's kernel, reached the pod whole.
        self.assertTrue(out["echo_ok"], out)
        ext1_after, pods_after = self.snmp6("ext1"), self.snmp6("pods")
        self.assertGreaterEqual(pods_after["Ip6FragCreates"] - pods_before["Ip6FragCreates"], 3)
        self.assertGreaterEqual(ext1_after["Ip6FragCreates"] - ext1_before["Ip6FragCreates"], 3)
        self.assertGreaterEqual(ext1_after["Ip6ReasmOKs"] - ext1_before["Ip6ReasmOKs"], 1)
        self.assertGreaterEqual(pods_after["Ip6ReasmOKs"] - pods_before["Ip6ReasmOKs"], 1)
        self.assertEqual(ext1_after["Ip6ReasmFails"], ext1_before["Ip6ReasmFails"])

        # egwd itself received the fragments, put the two datagrams together and cut them again.
        def counted():
            after, _ = self.fragment_counters()
            return (after.get("received", 0) - before["received"] >= 6
                    and after.get("reassembled", 0) - before["reassembled"] >= 2
                    and after.get("fragmented", 0) - before["fragmented"] >= 2)
        harness.wait_for(counted, 5, lambda: f"egwd did not count the fragments: {self.fragment_counters()}")
        after, drops_after = self.fragment_counters()
        self.assertGreaterEqual(after["sent"] - before["sent"], 6)
        for reason in ("fragment", "fragment_timeout", "fragment_failed", "frag_needed"):
            self.assertEqual(drops_after.get(reason), drops_before.get(reason), reason)

    def neighbor_mac(self, role, ip):
        """The MAC a namespace's kernel holds for `ip` on eth0, None when it holds none."""
        r = run(["ip", "-n", ns(role), "-j", "-6", "neigh", "show", ip, "dev", "eth0"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = json.loads(r.stdout or "[]")
        return entries[0].get("lladdr") if entries else None

    def service_status(self, key):
        for s in (harness.read_status(self.status_file) or {}).get("services", []):
            if s.get("key") == key:
                return s
        return None

    def test_40_taking_an_ipv6_ingress_ip_over_replaces_the_previous_gateways_mac_on_the_external_host(self):
        # default/shop6's IPv6 ingress IP is served elsewhere at first (no node has the label its
        # selector asks for), and the external host holds the other gateway's MAC for it (a stale
        # entry, kept until something updates it). When the selector is changed to match this
        # gateway, egwd begins to answer for the address and must advertise it (unsolicited, with
        # Override), so that the host takes ext1's MAC without asking: no traffic is sent.
        path = self.manifests / "zz-e2e-shop6.yaml"

        def write(label):
            path.write_text(SHOP6.format(ingress=SHOP6_INGRESS, label=label))

        def cleanup():
            path.unlink(missing_ok=True)
            run(["ip", "-n", ns("ext1"), "-6", "neigh", "del", SHOP6_INGRESS, "dev", "eth0"], 10)
        self.addCleanup(cleanup)
        write("elsewhere")
        r = run(["ip", "-n", ns("ext1"), "-6", "neigh", "replace", SHOP6_INGRESS, "lladdr", OLD_GW_MAC, "dev", "eth0",
                 "nud", "stale"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)

        def shop6(serve_here):
            svc = self.service_status("default/shop6")
            return svc if svc is not None and svc.get("serve_here") == serve_here else None
        harness.wait_for(lambda: shop6(False), CONVERGE_TIMEOUT, lambda: f"default/shop6 not seen\n{self.diag()}")
        harness.hold(lambda: self.neighbor_mac("ext1", SHOP6_INGRESS) == OLD_GW_MAC, HOLD,
                     lambda: f"{SHOP6_INGRESS} changed in {ns('ext1')} while served elsewhere: "
                     f"{self.neighbor_mac('ext1', SHOP6_INGRESS)}\n{self.diag()}")
        # Nothing else being announced (the port addresses' announcements after start), so that
        # the counts below are this takeover's alone.
        before = harness.wait_for(
            lambda: (lambda arp: arp if "announcing" in arp and not arp["announcing"] else None)(
                (harness.read_status(self.status_file) or {}).get("arp", {})),
            10, lambda: f"announcements still under way\n{self.diag()}")

        write("true")
        changed = time.monotonic()
        harness.wait_for(lambda: self.neighbor_mac("ext1", SHOP6_INGRESS) == EXT1_MAC, CONVERGE_TIMEOUT,
                         lambda: f"{ns('ext1')} still holds {self.neighbor_mac('ext1', SHOP6_INGRESS)} for "
                         f"{SHOP6_INGRESS} {CONVERGE_TIMEOUT:g}s after default/shop6 moved here\n{self.diag()}")
        elapsed = time.monotonic() - changed
        harness.wait_for(lambda: shop6(True), CONVERGE_TIMEOUT, lambda: f"default/shop6 not served here\n{self.diag()}")
        # One address began to be advertised (the ingress IP on ext1, its network's only outside
        # port), and every advertisement of it goes out: 3, a second apart.
        def all_sent():
            arp = (harness.read_status(self.status_file) or {}).get("arp", {})
            return arp if arp.get("ndp_announcements_sent", 0) - before.get("ndp_announcements_sent", 0) >= 3 else None
        arp = harness.wait_for(all_sent, 10, lambda: f"3 advertisements not sent\n{self.diag()}")
        self.assertEqual(arp["ndp_addresses_announced"] - before["ndp_addresses_announced"], 1, (before, arp))
        self.assertEqual(arp["ndp_announcements_sent"] - before["ndp_announcements_sent"], 3, (before, arp))
        self.assertEqual(arp["ndp_announcements_failed"], 0, arp)
        self.assertEqual(arp["announcements_sent"], before["announcements_sent"], "no gratuitous ARP for IPv6")
        print(f"\n  {SHOP6_INGRESS}: external host took egwd's MAC {elapsed:.2f}s after the takeover", file=sys.stderr)

    def test_28_metrics_count_the_ipv6_sessions_apart(self):
        # A session of each family, open while /metrics is read (UDP sessions idle for 30 s).
        for src, dst in ((f"[{WEB_POD}]:41060", EXT1), (f"{WEB_POD_V4}:41060", EXT1_V4)):
            out, r = self.in_ns("pods", PEER, "udp", dst, SERVICE_PORT, "--bind", src, "--timeout", 5)
            self.assertEqual(r.returncode, 0, f"{r.stderr}\n{self.diag()}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()

        def total(family):
            values = re.findall(rf'^egw_sessions_active{{lcore="\d+",family="{family}"}} (\S+)$', text, re.M)
            self.assertTrue(values, f"no egw_sessions_active for {family}:\n{text}")
            return sum(float(v) for v in values)
        self.assertGreaterEqual(total("IPv6"), 1)
        self.assertGreaterEqual(total("IPv4"), 1)
        cfg = json.loads(self.config.read_text())
        want = cfg.get("sessions", {}).get("max", 1 << 20)
        for family in ("IPv4", "IPv6"):
            self.assertRegex(text, rf'(?m)^egw_sessions_capacity{{family="{family}"}} {want}$')
        # The status file counts the IPv6 sessions within each worker's sessions (read once it
        # has been rewritten after both flows).
        harness.wait_rewritten(self.status_file, 2, 5, "status file not rewritten")
        workers = (harness.read_status(self.status_file) or {}).get("workers", [])
        self.assertTrue(workers, self.diag())
        self.assertGreaterEqual(sum(w["sessions6_created"] for w in workers), 1)
        self.assertGreater(sum(w["sessions_created"] for w in workers), sum(w["sessions6_created"] for w in workers))

    def test_29_metrics_and_telemetry_say_per_service_which_family_is_translated(self):
        # The files source's twin of the Kubernetes suite's test_09: web translates both families,
        # v6only (no IPv4 ingress IP) only IPv6, and says IPv4 is not translated.
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()

        def sample(name, **labels):
            want = ",".join(f'{k}="{v}"' for k, v in labels.items())
            m = re.search(rf"(?m)^{name}{{{re.escape(want)}}} (\S+)$", text)
            self.assertIsNotNone(m, f"no {name}{{{want}}}")
            return float(m.group(1))
        for service, want in (("web", {"IPv4": (1, 2), "IPv6": (1, 2)}), ("v6only", {"IPv4": (0, 0), "IPv6": (1, 1)})):
            for family, (translated, endpoints) in want.items():
                labels = {"namespace": "default", "service": service, "family": family}
                self.assertEqual(sample("egw_service_family_translated", **labels), translated, (service, family))
                self.assertEqual(sample("egw_service_family_endpoints", **labels), endpoints, (service, family))
        self.assertEqual(sample("egw_service_programmed", namespace="default", service="v6only"), 0)

        # DPDK telemetry's /egw/service says the same.
        socket_path = harness.dpdk_runtime_dir(FILE_PREFIX) / "dpdk_telemetry.v2"
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(5)
            s.connect(str(socket_path))
            hello = json.loads(s.recv(16384))
            answers = {}
            for key in ("default/web", "default/v6only"):
                s.send(f"/egw/service,{key}".encode())
                answers[key] = json.loads(s.recv(hello["max_output_len"]))["/egw/service"]
        web, v6only = answers["default/web"], answers["default/v6only"]
        self.assertEqual((web["programmed"], web["programmed_ipv6"], web["ingress_ipv6"], web["endpoints_ipv6"]),
                         (1, 1, WEB_INGRESS6, 2), web)
        self.assertEqual((v6only["programmed"], v6only["programmed_ipv6"], v6only["ingress_ip"],
                          v6only["ingress_ipv6"], v6only["endpoints"], v6only["endpoints_ipv6"]),
                         (0, 1, "", V6ONLY_INGRESS6, 0, 1), v6only)


    def test_29z_snat_sessions_per_address_count_their_own_family_as_snat_pools_does(self):
        # web has a session of each family open (UDP, idle for 30 s) while the numbers are read.
        for src, dst in ((f"[{WEB_POD}]:41070", EXT1), (f"{WEB_POD_V4}:41070", EXT1_V4)):
            out, r = self.in_ns("pods", PEER, "udp", dst, SERVICE_PORT, "--bind", src, "--timeout", 5)
            self.assertEqual(r.returncode, 0, f"{r.stderr}\n{self.diag()}")

        def scrape():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            snat = {}
            for m in re.finditer(r'(?m)^(egw_snat_\w+)\{address="([^"]+)",kind="(\w+)",family="(\w+)"\} (\S+)$', text):
                snat[(m.group(1), m.group(2))] = (m.group(3), m.group(4), float(m.group(5)))
            web = re.search(r'(?m)^egw_service_sessions_active\{namespace="default",service="web"\} (\S+)$', text)
            self.assertIsNotNone(web, text)
            return snat, float(web.group(1))

        def telemetry(address):
            socket_path = harness.dpdk_runtime_dir(FILE_PREFIX) / "dpdk_telemetry.v2"
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                s.settimeout(5)
                s.connect(str(socket_path))
                hello = json.loads(s.recv(16384))
                s.send(f"/egw/snat/ports,{address}".encode())
                return json.loads(s.recv(hello["max_output_len"]))["/egw/snat/ports"]

        def pool_sessions(pools, address):
            return sum(p["sessions"] for p in pools if p["address"] == address)

        # Sessions of earlier tests may expire meanwhile: the numbers are compared from a read of
        # the CLI and telemetry between two scrapes that agree.
        for attempt in range(10):
            before, _ = scrape()
            pools = self.egwctl_json("show", "snat", "pools")
            one = telemetry(WEB_INGRESS6)
            after, web_active = scrape()
            if before == after:
                break
            time.sleep(0.3)
        else:
            self.fail(f"the NAT addresses' sessions never held still for two scrapes: {before} / {after}")
        v6 = after.get(("egw_snat_sessions", WEB_INGRESS6))
        v4 = after.get(("egw_snat_sessions", WEB_INGRESS_V4))
        self.assertEqual(v6, ("ingress_ip", "IPv6", pool_sessions(pools, WEB_INGRESS6)), after)
        self.assertEqual(v4, ("ingress_ip", "IPv4", pool_sessions(pools, WEB_INGRESS_V4)), after)
        self.assertGreaterEqual(v6[2], 1)
        self.assertGreaterEqual(v4[2], 1)
        # Each of web's sessions is on one of its two addresses, counted once: the IPv4 address's
        # count does not hold the IPv6 sessions (it was the whole of web's before).
        self.assertEqual(v4[2] + v6[2], web_active)
        for address, kind, family in ((WEB_INGRESS6, "ingress_ip", "IPv6"), (EXT1_GW, "port", "IPv6"),
                                      (EXT2_GW, "port", "IPv6"), (WEB_INGRESS_V4, "ingress_ip", "IPv4")):
            # The whole NAT port range: the workers' blocks of it added up.
            capacity = sum(p["capacity"] for p in pools if p["address"] == address and p["proto"] == "udp")
            self.assertEqual(after[("egw_snat_ports_capacity", address)], (kind, family, capacity))
        # ext1's two addresses are attributed alike: db (VRF blue, no default route of either
        # family) may leave through ext1 or ext2, so neither family's port address is exact.
        self.assertEqual(("egw_snat_sessions", EXT1_GW) in after, ("egw_snat_sessions", "192.0.2.1") in after)

        # Telemetry: the IPv6 address keyed with '_' for ':', the same count.
        self.assertEqual(list(one), ["2001_db8_2__50"], one)
        self.assertEqual(one["2001_db8_2__50"], {"address": WEB_INGRESS6, "family": "IPv6", "kind": "ingress_ip",
                                                 "capacity": int(after[("egw_snat_ports_capacity", WEB_INGRESS6)][2]),
                                                 "sessions": int(v6[2]), "exact": 1})


if __name__ == "__main__":
    unittest.main()
