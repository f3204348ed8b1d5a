# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests: the real egwd between real kernel hosts in network namespaces.

scripts/netns.sh builds the topology (pods, pods2, ext1, ext2 namespaces joined by veth pairs to
egwd's four net_af_packet ports in the root namespace); egwd runs on a staged copy of
config/demo.json and its manifests; tests/e2e/peer.py serves in the external namespaces and
sends from the pod namespace, and the servers answer with the source address they saw.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_e2e.py
EGWD names the binary (default build/control/egwd); EGW_E2E_KEEP=1 keeps the work directory
(egwd's log, status file and server logs) for a look after the run.
"""

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True             # leave no __pycache__ in the tree
import harness  # noqa: E402  (processes, waiting, work directories)
import peer  # noqa: E402  (tests/e2e/peer.py: stage_config, delete_egress_service)
from harness import describe_exit, run, run_bounded, stop_process, tail  # noqa: E402

PEER = HERE / "peer.py"
STREAM = HERE / "stream.py"
DEMO_CONFIG = REPO / "config" / "demo.json"

PREFIX = f"egwe2e{os.getpid()}"            # namespaces <prefix>-pods, -pods2, -ext1, -ext2
TAG = harness.iface_tag("e")               # root-side interfaces <tag>-pods, ... (scripts/netns.sh)
FILE_PREFIX = f"egw-e2e-{os.getpid()}"     # DPDK runtime directory of the egwd under test
PODS_MAC = "02:e9:00:00:00:01"             # egwd's port "pods"
EXT1_MAC = "02:e9:00:00:00:03"             # egwd's port "ext1"
OLD_GW_MAC = "02:00:5e:00:00:99"           # the MAC a previous gateway had (gratuitous ARP tests)

WEB_PODS = ("10.244.1.10", "10.244.1.11")  # default/web, sourceIPBy LoadBalancerIP
WEB_INGRESS = "192.0.2.50"
DB_POD = "10.244.1.20"                     # default/db, sourceIPBy Network, network blue
OTHER_POD = "10.244.1.30"                  # endpoint of no EgressService
POD2 = "10.244.2.10"                       # a pod in the other pod subnet
EXT1 = "192.0.2.100"
EXT1_GW = "192.0.2.1"                      # masquerade address on ext1
EXT2 = "198.51.100.100"
EXT2_GW = "198.51.100.1"                   # masquerade address on ext2 (VRF blue)
SERVICE_PORT = 8080
WEB_LB_PORT = 80                           # web's spec.ports (config/demo-manifests/web.yaml)
STORE_INGRESS = "198.51.100.50"            # default/store (test_14): network blue
SPRAY_POD = "10.244.1.31"                  # a pod that opens more flows than its share (test_18)
POD_SESSION_LIMIT = 100                    # sessions.max_per_pod of the suite (one worker)

# default/shop (test_12): a Service whose EgressService selects nodes by `label`.
SHOP_MANIFEST = """apiVersion: v1
kind: Service
metadata: {{name: shop, namespace: default}}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.60
  ports: [{{name: http, port: 80, protocol: TCP, targetPort: 8080}}]
status:
  loadBalancer:
    ingress: [{{ip: {ingress}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: shop-1
  namespace: default
  labels: {{kubernetes.io/service-name: shop}}
addressType: IPv4
endpoints: [{{addresses: [10.244.1.40], nodeName: worker-1, conditions: {{ready: true}}}}]
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {{name: shop, namespace: default}}
spec:
  sourceIPBy: LoadBalancerIP
  nodeSelector:
    matchLabels: {{egw.example.com/gateway: "{label}"}}
"""

# default/store (test_14): a LoadBalancerIP Service in network blue, served here.
STORE_MANIFEST = """apiVersion: v1
kind: Service
metadata: {{name: store, namespace: default}}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.70
  ports: [{{name: http, port: 80, protocol: TCP, targetPort: 8080}}]
status:
  loadBalancer:
    ingress: [{{ip: {ingress}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: store-1
  namespace: default
  labels: {{kubernetes.io/service-name: store}}
addressType: IPv4
endpoints: [{{addresses: [10.244.1.41], nodeName: worker-1, conditions: {{ready: true}}}}]
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {{name: store, namespace: default}}
spec:
  sourceIPBy: LoadBalancerIP
  network: blue
  nodeSelector:
    matchLabels: {{egw.example.com/gateway: "true"}}
"""

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
CONVERGE_TIMEOUT = 3.0                     # manifest changes converge within ~1 s
HOLD = 1.0                                 # a state that came must then hold this long ("consistently")


def ns(role):
    return f"{PREFIX}-{role}"


def run_peer(role, *args, timeout=20.0):
    """Runs peer.py inside a namespace of the topology; never hangs past `timeout`."""
    return run_bounded(["ip", "netns", "exec", ns(role), sys.executable, str(PEER), *map(str, args)], timeout)


class EgressGatewayE2E(unittest.TestCase):
    topo = None

    # --- suite set-up ------------------------------------------------------------------------

    @classmethod
    def setUpClass(cls):
        cls.topo = topo = harness.NamespaceRig.for_suite(cls, "e2e", PREFIX, TAG)

        cls.config, cls.manifests = peer.stage_config(
            DEMO_CONFIG, topo.workdir, FILE_PREFIX, iface_tag=TAG,
            metrics_listen=f"127.0.0.1:{harness.free_port()}")
        # Ingress to served ingress IPs (test_13 to test_15) goes to the host in pods2, which plays
        # a node whose service proxy takes the load-balancer IPs.
        cfg = json.loads(cls.config.read_text())
        cfg["ingress"] = {"via": POD2, "port": "pods2"}
        cfg["sessions"]["max_per_pod"] = POD_SESSION_LIMIT   # test_18
        cls.config.write_text(json.dumps(cfg, indent=2) + "\n")
        cls.status_file = topo.workdir / "status.json"
        cls.egwd_log_path = topo.log_path("egwd")

        topo.netns.up()
        # The external host holds another MAC for ext1's address, as after a previous gateway:
        # egwd's gratuitous ARPs at start must replace it (test_00a).
        cls.set_neighbor("ext1", EXT1_GW, OLD_GW_MAC)
        topo.start_egwd(cls.config, cls.status_file, FILE_PREFIX)
        cls.wait_ready()

        for role in ("ext1", "ext2", "pods2"):
            topo.spawn_in(ns(role), f"server-{role}", PEER, "serve", "--tcp", SERVICE_PORT, "--udp", SERVICE_PORT,
                          "--icmp", "--lifetime", 1800)

    @classmethod
    def wait_ready(cls):
        cls.topo.wait_egwd_ready(cls.status_file, timeout=READY_TIMEOUT)

    # --- helpers ---------------------------------------------------------------------------

    wait_for = staticmethod(harness.wait_for)

    @classmethod
    def set_neighbor(cls, role, ip, mac):
        """A stale neighbour entry in a namespace's kernel: what it would hold for `ip` after
        talking to another host that had it (it is kept until something updates it)."""
        r = run(["ip", "-n", ns(role), "neigh", "replace", ip, "lladdr", mac, "dev", "eth0", "nud", "stale"], 10)
        if r.returncode != 0:
            raise RuntimeError(f"ip neigh replace {ip} in {ns(role)}: {r.stderr.strip()}")

    def neighbor_mac(self, role, ip):
        """The MAC a namespace's kernel holds for `ip` on eth0, None when it holds none."""
        r = run(["ip", "-n", ns(role), "-j", "neigh", "show", ip, "dev", "eth0"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = json.loads(r.stdout or "[]")
        return entries[0].get("lladdr") if entries else None

    @classmethod
    def server_log(cls, role):
        try:
            return (cls.topo.workdir / f"server-{role}.log").read_text(errors="replace")
        except OSError:
            return ""

    @classmethod
    def read_status(cls):
        return harness.read_status(cls.status_file)

    def fresh_status(self, rewrites=2, timeout=5.0):
        """The status after the file has been rewritten `rewrites` times from now: it then
        counts everything that happened before this call."""
        harness.wait_rewritten(self.status_file, rewrites, timeout, lambda: f"status file not rewritten "
                               f"{rewrites} times in {timeout:g}s\n{self.diag()}")
        status = self.read_status()
        self.assertIsNotNone(status, "status file unreadable")
        return status

    def diag(self):
        """What to read when a test fails: egwd's state and the end of its log."""
        parts = []
        if self.topo.egwd is not None and self.topo.egwd.poll() is not None:
            parts.append(f"egwd EXITED with {describe_exit(self.topo.egwd.returncode)}")
        status = self.read_status() or {}
        parts.append(f"drops: {status.get('drops')}")
        for p in status.get("ports", []):
            parts.append(f"port {p.get('name')}: rx {p.get('rx_packets')} tx {p.get('tx_packets')}")
        for s in status.get("services", []):
            parts.append(f"service {json.dumps(s, sort_keys=True)}")
        for s in status.get("sessions", [])[-10:]:
            parts.append(f"session {json.dumps(s, sort_keys=True)}")
        parts.append(f"neighbors: {status.get('neighbors')}")
        parts.append("--- egwd log (tail) ---\n" + tail(self.egwd_log_path, 30))
        return "\n".join(parts)

    def client(self, proto, src, dst, port=SERVICE_PORT, sport=None, timeout=5.0):
        """Runs a TCP or UDP client from the pods namespace; returns (ok, what the server saw
        or the error)."""
        bind = f"{src}:{sport}" if sport else src
        r = run_peer("pods", proto, dst, port, "--bind", bind, "--timeout", timeout,
                     timeout=timeout + 10)
        if r.returncode != 0:
            return False, (r.stderr or r.stdout).strip()
        return True, r.stdout.strip()

    def seen(self, proto, src, dst, port=SERVICE_PORT, sport=None):
        ok, out = self.client(proto, src, dst, port, sport)
        if not ok:
            self.fail(f"{proto.upper()} {src}{':' + str(sport) if sport else ''} -> {dst}:{port} "
                      f"got no answer: {out}\n{self.diag()}")
        return out

    def assert_seen_from(self, proto, src, dst, expected_ip, sport=None):
        """The server saw the connection from `expected_ip`; returns the "ip:port" it saw."""
        out = self.seen(proto, src, dst, sport=sport)
        ip, _, port = out.partition(":")
        self.assertEqual(ip, expected_ip, f"{proto.upper()} from {src} to {dst} arrived from {out}, "
                         f"expected {expected_ip}\n{self.diag()}")
        self.assertTrue(port.isdigit(), f"server answered {out!r}")
        return out

    def assert_ping_seen_from(self, src, dst, server_role, expected_ip, count=2):
        token = f"{src}-{time.monotonic_ns()}"
        r = run_peer("pods", "ping", dst, "--bind", src, "--count", count, "--timeout", 6,
                     "--token", token, timeout=20)
        self.assertEqual(r.returncode, 0, f"ping {src} -> {dst}: {r.stderr.strip()}\n{self.diag()}")
        self.assertEqual(len(r.stdout.strip().splitlines()), count, r.stdout)
        self.wait_for(lambda: re.search(rf"^icmp {re.escape(expected_ip)} .*token={re.escape(token)}$",
                                        self.server_log(server_role), re.M),
                      3, lambda: f"{ns(server_role)} did not see the echo requests of {src} come from "
                      f"{expected_ip}:\n{self.server_log(server_role)[-2000:]}\n{self.diag()}")

    def find_session(self, status, proto, inside):
        for s in status.get("sessions", []):
            if s.get("proto") == proto and s.get("inside") == inside:
                return s
        return None

    def service(self, status, key):
        for s in status.get("services", []):
            if s.get("key") == key:
                return s
        return None

    def port(self, status, name):
        for p in status.get("ports", []):
            if p.get("name") == name:
                return p
        self.fail(f"port {name} missing from the status file: {status.get('ports')}")

    def assert_egwd_alive(self):
        self.assertIsNone(self.topo.egwd.poll(), f"egwd exited with "
                          f"{describe_exit(self.topo.egwd.returncode)}\n{tail(self.egwd_log_path)}")

    def wait_web_translated(self, timeout, hold=HOLD):
        """Polls new TCP connections from a web pod until they arrive from the ingress IP, then
        checks that every new connection does for `hold` seconds."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            ok, last = self.client("tcp", WEB_PODS[0], EXT1,
                                   timeout=max(0.5, min(1.5, deadline - time.monotonic())))
            if ok and last.startswith(WEB_INGRESS + ":"):
                break
            time.sleep(0.1)
        else:
            self.fail(f"web traffic not translated to {WEB_INGRESS} again within {timeout:g}s "
                      f"(last: {last})\n{self.diag()}")
        self.hold_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS, hold)

    def hold_seen_from(self, proto, src, dst, expected_ip, duration=HOLD):
        """Every new connection for `duration` seconds arrives from `expected_ip`."""
        last = [None]

        def seen():
            ok, last[0] = self.client(proto, src, dst)
            return ok and last[0].startswith(expected_ip + ":")
        harness.hold(seen, duration, lambda: f"{proto.upper()} {src} -> {dst} stopped arriving from "
                     f"{expected_ip} within {duration:g}s (got {last[0]})\n{self.diag()}")

    # --- tests -----------------------------------------------------------------------------

    def test_00_status_shows_both_services_programmed(self):
        def programmed():
            status = self.read_status() or {}
            web, db = self.service(status, "default/web"), self.service(status, "default/db")
            return (web, db) if web and db and web.get("programmed") and db.get("programmed") else None
        self.wait_for(programmed, 5, lambda: f"services not programmed\n{self.diag()}")
        web, db = harness.hold(programmed, HOLD, lambda: f"services programmed, then not\n{self.diag()}")
        self.assertEqual(web["mode"], "LoadBalancerIP")
        self.assertEqual(web["ingress_ip"], WEB_INGRESS)
        self.assertEqual(web["status_host"], "gw-1")
        self.assertTrue(web["serve_here"])
        self.assertEqual(web["endpoints"], 2)
        self.assertEqual(db["mode"], "Network")
        self.assertEqual(db["status_host"], "ALL")
        self.assertIn(db["network"], ("blue", "100"))
        self.assertEqual(db["vrf"], "blue")
        self.assertEqual(db["endpoints"], 1)
        status = self.read_status()
        self.assertEqual({p["name"] for p in status["ports"]}, {"pods", "pods2", "ext1", "ext2"})

    def test_00a_gratuitous_arp_at_start_replaces_another_mac_for_a_port_address(self):
        # setUpClass left OLD_GW_MAC in ext1's table for ext1's address before egwd started; no
        # test has sent anything yet, so only egwd's announcements can have changed it.
        self.wait_for(lambda: self.neighbor_mac("ext1", EXT1_GW) == EXT1_MAC, 5,
                      lambda: f"{ns('ext1')} still holds {self.neighbor_mac('ext1', EXT1_GW)} for "
                      f"{EXT1_GW}, not egwd's {EXT1_MAC}\n{self.diag()}")
        arp = self.fresh_status(rewrites=1)["arp"]
        self.assertGreaterEqual(arp["announcements_sent"], 1, arp)
        self.assertEqual(arp["announcements_failed"], 0, arp)

    def test_01_web_tcp_leaves_with_ingress_ip(self):
        before = self.fresh_status(rewrites=1)
        self.assert_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS)
        after = self.fresh_status()
        web_before = self.service(before, "default/web") or {}
        web_after = self.service(after, "default/web")
        self.assertGreater(web_after["packets_out"], web_before.get("packets_out", 0))
        self.assertGreater(web_after["packets_in"], web_before.get("packets_in", 0))

    def test_01_web_udp_leaves_with_ingress_ip(self):
        self.assert_seen_from("udp", WEB_PODS[0], EXT1, WEB_INGRESS)
        self.hold_seen_from("udp", WEB_PODS[1], EXT1, WEB_INGRESS)

    def test_01_web_ping_works_and_leaves_with_ingress_ip(self):
        self.assert_ping_seen_from(WEB_PODS[0], EXT1, "ext1", WEB_INGRESS)

    def test_02_db_leaves_through_vrf_blue_with_network_address(self):
        before = self.fresh_status(rewrites=1)
        tcp = self.assert_seen_from("tcp", DB_POD, EXT2, EXT2_GW, sport=41020)
        udp = self.assert_seen_from("udp", DB_POD, EXT2, EXT2_GW, sport=41021)
        self.assert_ping_seen_from(DB_POD, EXT2, "ext2", EXT2_GW)
        self.hold_seen_from("tcp", DB_POD, EXT2, EXT2_GW)
        after = self.fresh_status()

        sent = self.port(after, "ext2")["tx_packets"] - self.port(before, "ext2")["tx_packets"]
        self.assertGreaterEqual(sent, 2 + 1 + 2, f"port ext2 did not send the flows\n{self.diag()}")
        for proto, inside, outside in (("tcp", f"{DB_POD}:41020", tcp), ("udp", f"{DB_POD}:41021", udp)):
            session = self.find_session(after, proto, inside)
            self.assertIsNotNone(session, f"no {proto} session for {inside}\n{self.diag()}")
            self.assertEqual(session["port"], "ext2", session)
            self.assertIn(session["vrf"], ("blue", "100"), session)
            self.assertEqual(session["outside"], outside, session)
            self.assertEqual(session["remote"], f"{EXT2}:{SERVICE_PORT}", session)
            self.assertEqual(session["service"], "default/db", session)

    def test_03_both_services_at_once(self):
        flows = [("tcp", WEB_PODS[0], EXT1, WEB_INGRESS), ("udp", WEB_PODS[0], EXT1, WEB_INGRESS),
                 ("tcp", WEB_PODS[1], EXT1, WEB_INGRESS), ("tcp", DB_POD, EXT2, EXT2_GW),
                 ("udp", DB_POD, EXT2, EXT2_GW)] * 4
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(flows) // 2) as pool:
            results = list(pool.map(lambda f: (f, self.client(*f[:3], timeout=8)), flows))
        failures = [f"{p} {src}->{dst}: expected {want}, got {out!r} (ok={ok})"
                    for (p, src, dst, want), (ok, out) in results
                    if not ok or not out.startswith(want + ":")]
        self.assertEqual(failures, [], f"\n{self.diag()}")

    def test_04_pod_to_pod_cidr_is_not_translated(self):
        self.assertEqual(self.seen("tcp", WEB_PODS[0], POD2, sport=41040), f"{WEB_PODS[0]}:41040")
        self.assertEqual(self.seen("udp", WEB_PODS[0], POD2, sport=41041), f"{WEB_PODS[0]}:41041")
        self.assert_ping_seen_from(WEB_PODS[0], POD2, "pods2", WEB_PODS[0])

    def test_05_two_pods_same_source_port_get_distinct_outside_ports(self):
        for proto in ("tcp", "udp"):
            with self.subTest(proto=proto):
                a = self.assert_seen_from(proto, WEB_PODS[0], EXT1, WEB_INGRESS, sport=40000)
                b = self.assert_seen_from(proto, WEB_PODS[1], EXT1, WEB_INGRESS, sport=40000)
                self.assertNotEqual(a, b, f"both {proto} flows seen as {a}")
                status = self.fresh_status()
                for pod, outside in ((WEB_PODS[0], a), (WEB_PODS[1], b)):
                    session = self.find_session(status, proto, f"{pod}:40000")
                    self.assertIsNotNone(session, f"no {proto} session for {pod}:40000\n{self.diag()}")
                    self.assertEqual(session["outside"], outside, session)
                    self.assertEqual(session["port"], "ext1", session)

    def test_06_deleting_egress_service_falls_back_to_default_action(self):
        self.assert_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS)
        path, original = peer.delete_egress_service(self.manifests, "default/web")
        changed = time.monotonic()

        def restore():
            path.write_text(original)
            self.wait_web_translated(timeout=6)
        self.addCleanup(restore)

        # New connections leave with the default action (masquerade to ext1's address).
        last = None
        while True:
            left = CONVERGE_TIMEOUT - (time.monotonic() - changed)
            if left <= 0:
                self.fail(f"web traffic still not masqueraded to {EXT1_GW} {CONVERGE_TIMEOUT:g}s after "
                          f"the EgressService was deleted (last: {last})\n{self.diag()}")
            ok, last = self.client("tcp", WEB_PODS[0], EXT1, timeout=max(0.5, min(1.5, left)))
            if ok and last.startswith(EXT1_GW + ":"):
                break
            time.sleep(0.05)
        elapsed = time.monotonic() - changed
        self.hold_seen_from("tcp", WEB_PODS[0], EXT1, EXT1_GW)

        # Its state is gone: no programmed entry, no session still using the ingress IP.
        def state_gone():
            status = self.read_status() or {}
            web = self.service(status, "default/web")
            stale = [s for s in status.get("sessions", [])
                     if s.get("outside", "").startswith(WEB_INGRESS + ":")]
            return (web is None or not web.get("programmed")) and not stale
        self.fresh_status(rewrites=1)
        harness.eventually_consistently(state_gone, CONVERGE_TIMEOUT, HOLD,
                                        lambda: f"default/web state left after deletion\n{self.diag()}")
        self.assertLess(elapsed, CONVERGE_TIMEOUT)

    def test_07_malformed_manifest_leaves_others_in_force(self):
        bad = self.manifests / "zz-e2e-malformed.yaml"
        self.addCleanup(lambda: bad.unlink(missing_ok=True))
        bad.write_text("apiVersion: k8s.ovn.org/v1\nkind: EgressService\nmetadata: {name: [unclosed\n"
                       "spec:\n  sourceIPBy: : :\n")
        self.wait_for(lambda: bad.name in self.egwd_log_path.read_text(errors="replace"), CONVERGE_TIMEOUT,
                      lambda: f"egwd did not log the malformed file {bad.name}\n{self.diag()}")
        time.sleep(0.5)  # a few more scans with the bad file present
        self.assert_egwd_alive()
        self.assert_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS)
        self.assert_seen_from("udp", WEB_PODS[1], EXT1, WEB_INGRESS)
        self.assert_seen_from("tcp", DB_POD, EXT2, EXT2_GW)
        web = self.service(self.read_status(), "default/web")
        self.assertTrue(web and web.get("programmed"), web)

    def test_08_broken_config_is_refused_with_file_and_path(self):
        cfg = json.loads(self.config.read_text())
        ext1 = next(i for i, p in enumerate(cfg["ports"]) if p["name"] == "ext1")
        cases = {
            "unknown_field": (lambda c: c["ports"][ext1].__setitem__("colour", "red"),
                              [f"ports[{ext1}]", "colour"]),
            "bad_address": (lambda c: c["ports"][ext1].__setitem__("addresses", ["192.0.2.300/24"]),
                            [f"ports[{ext1}].addresses[0]"]),
        }
        for name, (mutate, expected) in cases.items():
            with self.subTest(case=name):
                broken = json.loads(json.dumps(cfg))
                mutate(broken)
                broken["eal"]["file_prefix"] = f"{FILE_PREFIX}-broken"
                path = self.topo.workdir / f"broken-{name}.json"
                path.write_text(json.dumps(broken, indent=2))
                try:
                    r = run([str(harness.egwd_binary()), "-c", str(path)], 15, cwd=REPO, stdin=subprocess.DEVNULL)
                finally:
                    harness.remove_dpdk_runtime_dir(f"{FILE_PREFIX}-broken")
                self.assertNotEqual(r.returncode, 0, f"egwd accepted a broken config:\n{r.stderr}")
                self.assertIn(str(path), r.stderr)
                for text in expected:
                    self.assertIn(text, r.stderr, f"stderr does not name {text}:\n{r.stderr}")
        self.assert_egwd_alive()

    def ext1_reassembly_requests(self):
        """Ip ReasmReqds of the ext1 namespace's kernel: how many fragments reached it."""
        r = run(["ip", "netns", "exec", ns("ext1"), "cat", "/proc/net/snmp"], 10)
        ip = [line.split()[1:] for line in r.stdout.splitlines() if line.startswith("Ip:")]
        self.assertEqual(len(ip), 2, r.stdout + r.stderr)
        return int(dict(zip(*ip))["ReasmReqds"])

    def test_09_malformed_packets_are_dropped_and_counted(self):
        # Malformed IPv4 headers and an unknown protocol are dropped with their reasons.
        #
        # Fragments are sent too, but net_af_packet puts its sockets in a PACKET_FANOUT group
        # with PACKET_FANOUT_FLAG_DEFRAG (DPDK 22.11 has no devarg to turn that off): the kernel
        # of the root namespace keeps lone fragments for reassembly and egwd never receives them.
        # So the test checks that no fragment comes out on ext1, and holds egwd to the "fragment"
        # counter only when its port did receive them (another PMD, or a later DPDK). The counter
        # itself is covered by the packet tests.
        counted = {"truncated": 5, "ihl": 5, "totlen": 5, "proto253": 5}
        fragments = {"fragment": 5, "fragment-tail": 5}
        expected = {"malformed": 15, "unsupported_protocol": 5}
        before = self.fresh_status(rewrites=1)
        reasm_before = self.ext1_reassembly_requests()
        for kind, count in {**counted, **fragments}.items():
            r = run_peer("pods", "inject", "--iface", "eth0", "--dst-mac", PODS_MAC, "--kind", kind,
                         "--count", count, "--src", WEB_PODS[0], "--dst", EXT1)
            self.assertEqual(r.returncode, 0, r.stderr)

        after = self.fresh_status()
        received = self.port(after, "pods")["rx_packets"] - self.port(before, "pods")["rx_packets"]
        if received >= sum(counted.values()) + sum(fragments.values()):
            expected["fragment"] = sum(fragments.values())
        drops_before = before.get("drops", {})

        def risen():
            drops = (self.read_status() or {}).get("drops", {})
            return all(drops.get(k, 0) - drops_before.get(k, 0) >= n for k, n in expected.items()) and drops
        drops = self.wait_for(risen, 5, lambda: f"drop counters did not rise by {expected} "
                              f"(before {drops_before}; port pods received {received} frames)\n{self.diag()}")
        for reason, n in expected.items():
            self.assertGreaterEqual(drops[reason] - drops_before.get(reason, 0), n, reason)
        self.assertEqual(self.ext1_reassembly_requests(), reasm_before, "fragments were forwarded to ext1")
        self.assert_egwd_alive()
        self.assert_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS)

    def test_10_pod_of_no_egress_service_is_masqueraded(self):
        self.assert_seen_from("tcp", OTHER_POD, EXT1, EXT1_GW)
        self.hold_seen_from("udp", OTHER_POD, EXT1, EXT1_GW)

    def reload_and_wait(self, marker):
        """SIGHUP, then the next egwd log line containing `marker` (its count grows by one)."""
        before = self.egwd_log_path.read_text(errors="replace").count(marker)
        self.topo.egwd.send_signal(signal.SIGHUP)
        self.wait_for(lambda: self.egwd_log_path.read_text(errors="replace").count(marker) > before, 5,
                      lambda: f"no {marker!r} in egwd's log after SIGHUP\n{tail(self.egwd_log_path)}")

    def test_11_sighup_reloads_the_default_action_live_and_refuses_what_needs_a_restart(self):
        original = self.config.read_text()
        self.addCleanup(self.config.write_text, original)
        cfg = json.loads(original)
        self.assertNotEqual(cfg.get("default_action"), "drop")

        cfg["default_action"] = "drop"
        self.config.write_text(json.dumps(cfg, indent=2))
        self.reload_and_wait("configuration reloaded from")
        drops_before = self.fresh_status()["drops"]["default_action_drop"]
        ok, out = self.client("udp", OTHER_POD, EXT1, timeout=1.5)
        self.assertFalse(ok, f"a pod of no EgressService got through with default_action drop: {out}")
        drops = self.fresh_status()["drops"]["default_action_drop"]
        self.assertGreaterEqual(drops - drops_before, 1, self.diag())
        self.assert_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS)    # Services are not touched

        # A file that changes a setting read at start is refused whole: the default action stays.
        cfg["default_action"] = "masquerade"
        cfg["ports"][0]["mtu"] = 9000
        self.config.write_text(json.dumps(cfg, indent=2))
        self.reload_and_wait("reload refused")
        self.assertIn("ports[0].mtu", tail(self.egwd_log_path, 5))
        ok, out = self.client("udp", OTHER_POD, EXT1, timeout=1.5)
        self.assertFalse(ok, f"a refused reload changed the default action: {out}")

        self.config.write_text(original)
        self.reload_and_wait("configuration reloaded from")
        self.assert_seen_from("udp", OTHER_POD, EXT1, EXT1_GW)
        self.assert_egwd_alive()

    def test_12_takeover_gratuitous_arp_replaces_the_previous_gateways_mac_on_the_external_host(self):
        # default/shop's ingress IP is served elsewhere at first (no node has the label its
        # selector asks for), and the external host holds the other gateway's MAC for it. When
        # the selector is changed to match this gateway, egwd starts serving the address and must
        # announce it, so that the host takes ext1's MAC without asking (no traffic is sent).
        shop_ip = "192.0.2.70"   # (db's is .60, informational in Network mode)
        path = self.manifests / "zz-e2e-shop.yaml"

        def write(gateway_label):
            path.write_text(SHOP_MANIFEST.format(ingress=shop_ip, label=gateway_label))

        def cleanup():
            path.unlink(missing_ok=True)
            run(["ip", "-n", ns("ext1"), "neigh", "del", shop_ip, "dev", "eth0"], 10)
        self.addCleanup(cleanup)
        write("elsewhere")
        self.set_neighbor("ext1", shop_ip, OLD_GW_MAC)

        def shop(serve_here):
            svc = self.service(self.read_status() or {}, "default/shop")
            return svc if svc is not None and svc.get("serve_here") == serve_here else None
        self.wait_for(lambda: shop(False), CONVERGE_TIMEOUT, lambda: f"default/shop not seen\n{self.diag()}")
        harness.hold(lambda: self.neighbor_mac("ext1", shop_ip) == OLD_GW_MAC, HOLD,
                     lambda: f"{shop_ip} changed in {ns('ext1')} while served elsewhere: "
                     f"{self.neighbor_mac('ext1', shop_ip)}\n{self.diag()}")
        before = self.fresh_status(rewrites=1)["arp"]

        write("true")
        changed = time.monotonic()
        self.wait_for(lambda: self.neighbor_mac("ext1", shop_ip) == EXT1_MAC, CONVERGE_TIMEOUT,
                      lambda: f"{ns('ext1')} still holds {self.neighbor_mac('ext1', shop_ip)} for {shop_ip} "
                      f"{CONVERGE_TIMEOUT:g}s after default/shop moved here\n{self.diag()}")
        elapsed = time.monotonic() - changed
        self.wait_for(lambda: shop(True), CONVERGE_TIMEOUT, lambda: f"default/shop not served here\n{self.diag()}")
        # One address began to be announced (the ingress IP on ext1, its network's only outside
        # port), and every announcement of it goes out: 3, a second apart.
        def all_sent():
            arp = (self.read_status() or {}).get("arp", {})
            return arp if arp.get("announcements_sent", 0) - before["announcements_sent"] >= 3 else None
        arp = self.wait_for(all_sent, 5, lambda: f"3 announcements not sent\n{self.diag()}")
        self.assertEqual(arp["addresses_announced"] - before["addresses_announced"], 1, (before, arp))
        self.assertEqual(arp["announcements_sent"] - before["announcements_sent"], 3, (before, arp))
        self.assertEqual(arp["announcements_failed"], 0, arp)
        print(f"\n  {shop_ip}: external host took egwd's MAC {elapsed:.2f}s after the takeover", file=sys.stderr)

    def ext1_neighbor(self, status):
        """egwd's neighbour entry for the ext1 server, or None."""
        for n in status.get("neighbors", []):
            if n.get("port") == "ext1" and n.get("ip") == EXT1:
                return n
        return None

    def test_13_a_next_hop_whose_mac_changes_is_invalidated_and_arped_for_again(self):
        # Short neighbour timers for this test (arp.* are live on reload): reachable for 1 s after
        # a reply, then 2 unicast probes 200 ms apart before the MAC is invalidated.
        original = self.config.read_text()
        cfg = json.loads(original)
        cfg.setdefault("arp", {}).update({"reachable_s": 1, "probes": 2, "retry_ms": 200})
        self.config.write_text(json.dumps(cfg, indent=2))
        self.reload_and_wait("configuration reloaded from")

        def restore():
            self.config.write_text(original)
            self.reload_and_wait("configuration reloaded from")
        self.addCleanup(restore)

        self.assert_seen_from("udp", OTHER_POD, EXT1, EXT1_GW)
        link = json.loads(run(["ip", "-n", ns("ext1"), "-j", "link", "show", "eth0"], 10).stdout)
        old_mac = link[0]["address"]
        self.assertEqual(self.ext1_neighbor(self.fresh_status())["mac"], old_mac, self.diag())
        # Probes that are answered keep the MAC: a few reachable periods with traffic, nothing
        # invalidated, and the confirming replies log nothing.
        before = self.fresh_status()["arp"]
        log_from = len(self.egwd_log_path.read_text(errors="replace"))
        self.hold_seen_from("udp", OTHER_POD, EXT1, EXT1_GW, 2.5)
        arp = self.fresh_status()["arp"]
        self.assertGreaterEqual(arp["probes_sent"] - before["probes_sent"], 1, arp)
        self.assertEqual(arp["invalidated"], before["invalidated"], arp)
        learned_line = f"neighbour {EXT1} on ext1 "
        log = self.egwd_log_path.read_text(errors="replace")[log_from:]
        self.assertEqual(log.count(learned_line), 0, tail(self.egwd_log_path, 20))

        # The server's interface takes another MAC, as when a host is replaced: frames to the old
        # one are lost, the probes go unanswered, the MAC is invalidated, and the next packets are
        # held and ARPed for by broadcast, which the host answers with its new MAC.
        new_mac = "02:e9:00:00:0e:64"
        r = run(["ip", "-n", ns("ext1"), "link", "set", "dev", "eth0", "address", new_mac], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        start = time.monotonic()
        self.wait_for(lambda: self.client("udp", OTHER_POD, EXT1, timeout=1.0)[0], 15,
                      lambda: f"no answer through the new MAC within 15 s\n{self.diag()}")
        elapsed = time.monotonic() - start
        status = self.fresh_status()
        self.assertEqual(self.ext1_neighbor(status)["mac"], new_mac, self.diag())
        self.assertGreaterEqual(status["arp"]["invalidated"] - before["invalidated"], 1, status["arp"])
        self.assertLess(elapsed, 10, "the dead MAC was used for too long")
        self.hold_seen_from("udp", OTHER_POD, EXT1, EXT1_GW, 2.5)
        # Logged once per streak: the invalidation, then the new MAC, not every confirming reply.
        log = self.egwd_log_path.read_text(errors="replace")[log_from:]
        self.assertEqual(log.count(learned_line + "is " + new_mac), 1, tail(self.egwd_log_path, 20))
        self.assertEqual(log.count(learned_line), 2, tail(self.egwd_log_path, 20))
        self.assertEqual(len(re.findall(rf"neighbour {re.escape(EXT1)} on ext1 \({re.escape(old_mac)}\) did not "
                                        rf"answer 2 probe", log)), 1, tail(self.egwd_log_path, 20))

    def test_13a_a_next_hop_announcing_a_new_mac_is_followed_at_once(self):
        # A router failing over (keepalived, VRRP) moves its address to another MAC and says so
        # with a gratuitous ARP request. With the default timers the old entry would stay
        # reachable for 30 s and then be probed before anything changed; the announcement alone
        # must move egw's entry, with no probe left unanswered and no invalidation.
        self.assert_seen_from("udp", OTHER_POD, EXT1, EXT1_GW)
        link = json.loads(run(["ip", "-n", ns("ext1"), "-j", "link", "show", "eth0"], 10).stdout)
        old_mac = link[0]["address"]
        self.assertEqual(self.ext1_neighbor(self.fresh_status())["mac"], old_mac, self.diag())
        before = self.fresh_status()["arp"]
        log_from = len(self.egwd_log_path.read_text(errors="replace"))

        new_mac = "02:e9:00:00:0f:64"
        r = run(["ip", "-n", ns("ext1"), "link", "set", "dev", "eth0", "address", new_mac], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The announcement as keepalived sends it: a broadcast ARP request from the address for
        # itself, sent from the ext1 namespace's own socket.
        garp = ("import socket,sys\n"
                "mac=bytes.fromhex(sys.argv[1].replace(':','')); ip=socket.inet_aton(sys.argv[2])\n"
                "f=b'\\xff'*6+mac+b'\\x08\\x06\\x00\\x01\\x08\\x00\\x06\\x04\\x00\\x01'+mac+ip+b'\\x00'*6+ip\n"
                "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW); s.bind(('eth0',0)); s.send(f)\n")

        def announce(mac):
            return run(["ip", "netns", "exec", ns("ext1"), sys.executable, "-c", garp, mac, EXT1], 10)

        def back():
            # The later tests talk to the server at its own MAC again, announced the same way.
            run(["ip", "-n", ns("ext1"), "link", "set", "dev", "eth0", "address", old_mac], 10)
            announce(old_mac)
            self.wait_for(lambda: (self.ext1_neighbor(self.read_status() or {}) or {}).get("mac") == old_mac, 10,
                          lambda: f"the entry did not come back to {old_mac}\n{self.diag()}")
        self.addCleanup(back)
        start = time.monotonic()
        r = announce(new_mac)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_for(lambda: (self.ext1_neighbor(self.read_status() or {}) or {}).get("mac") == new_mac, 10,
                      lambda: f"the entry did not take the announced MAC\n{self.diag()}")
        self.wait_for(lambda: self.client("udp", OTHER_POD, EXT1, timeout=1.0)[0], 10,
                      lambda: f"no answer through the new MAC\n{self.diag()}")
        elapsed = time.monotonic() - start
        # Far below the 30 s the old MAC would otherwise have stayed in use.
        self.assertLess(elapsed, 10, "the dead MAC was used for too long")
        status = self.fresh_status()
        self.assertEqual(status["arp"]["invalidated"], before["invalidated"], status["arp"])
        log = self.egwd_log_path.read_text(errors="replace")[log_from:]
        self.assertIn(f"neighbour {EXT1} on ext1 moved from {old_mac} to {new_mac}", log, tail(self.egwd_log_path, 20))
        self.hold_seen_from("udp", OTHER_POD, EXT1, EXT1_GW, 1.0)

    # --- ingress to served ingress IPs (dataplane/ingress.h) ------------------------------------

    def node_serving(self, *addresses):
        """pods2's kernel plays a cluster node: the load-balancer IPs on its loopback (as
        kube-proxy's IPVS mode puts them on a dummy device) and a server on web's port that
        answers with the client address it saw. Undone at cleanup."""
        for a in addresses:
            r = run(["ip", "-n", ns("pods2"), "addr", "add", f"{a}/32", "dev", "lo"], 10)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.addCleanup(run, ["ip", "-n", ns("pods2"), "addr", "del", f"{a}/32", "dev", "lo"], 10)
        name = f"node-{len(addresses)}-{time.monotonic_ns()}"
        proc = self.topo.spawn_in(ns("pods2"), name, PEER, "serve", "--tcp", WEB_LB_PORT, "--udp", WEB_LB_PORT,
                                  "--lifetime", 300)
        self.addCleanup(lambda: (proc.terminate(), proc.wait(5)))

    def from_outside(self, role, proto, src, dst, port=WEB_LB_PORT, timeout=5.0):
        """A TCP or UDP client in an external namespace; (ok, what the server saw or the error)."""
        r = run_peer(role, proto, dst, port, "--bind", src, "--timeout", timeout, timeout=timeout + 10)
        if r.returncode != 0:
            return False, (r.stderr or r.stdout).strip()
        return True, r.stdout.strip()

    def ingress_counters(self):
        return self.fresh_status(rewrites=1).get("ingress", {})

    def test_14_a_client_reaches_the_service_through_its_ingress_ip_and_gets_the_answer_back(self):
        self.node_serving(WEB_INGRESS)
        status = self.fresh_status(rewrites=1)
        before, created = status.get("ingress", {}), self.service(status, "default/web")["sessions_created"]
        # The node saw the client's own address (nothing translated on the way in), and the client
        # got the answer from the ingress IP it connected to (nothing translated on the way out:
        # the TCP handshake takes no other source).
        for _ in range(3):
            ok, seen = self.from_outside("ext1", "tcp", EXT1, WEB_INGRESS)
            self.assertTrue(ok, f"TCP {EXT1} -> {WEB_INGRESS}:{WEB_LB_PORT}: {seen}\n{self.diag()}")
            self.assertEqual(seen.partition(":")[0], EXT1, seen)
        status = self.fresh_status()
        after = status["ingress"]
        # At least SYN, ACK, FIN's ACK in; SYN+ACK, data, FIN out; per connection.
        self.assertGreaterEqual(after["forwarded_in"] - before.get("forwarded_in", 0), 9, (before, after))
        self.assertGreaterEqual(after["replies_out"] - before.get("replies_out", 0), 9, (before, after))
        self.assertEqual(self.service(status, "default/web")["sessions_created"], created,
                         "ingress made sessions")
        # What the Service does not list is not its: UDP on that port, TCP on another. No answer,
        # counted as before.
        drops = status["drops"]["no_session"]
        for proto, port in (("udp", WEB_LB_PORT), ("tcp", WEB_LB_PORT + 1)):
            ok, seen = self.from_outside("ext1", proto, EXT1, WEB_INGRESS, port=port, timeout=1.5)
            self.assertFalse(ok, f"{proto} {port}: {seen}")
        self.assertGreaterEqual(self.fresh_status()["drops"]["no_session"] - drops, 2)

    def test_15_the_answer_to_a_connection_into_a_service_leaves_through_the_services_network(self):
        # default/store is in network blue: its ingress IP is answered on ext2 only, and the node's
        # answers must be routed in blue, whose port is the only way to 198.51.100.0/24 (the
        # default table has no route there, so they would be dropped as no_route).
        path = self.manifests / "zz-e2e-store.yaml"
        self.addCleanup(path.unlink, missing_ok=True)
        path.write_text(STORE_MANIFEST.format(ingress=STORE_INGRESS))
        self.wait_for(lambda: (self.service(self.read_status() or {}, "default/store") or {}).get("programmed"),
                      CONVERGE_TIMEOUT, lambda: f"default/store not programmed\n{self.diag()}")
        self.node_serving(STORE_INGRESS)
        no_route = self.fresh_status(rewrites=1)["drops"]["no_route"]
        last = [None]

        def reached():
            ok, last[0] = self.from_outside("ext2", "tcp", EXT2, STORE_INGRESS, timeout=1.5)
            return ok and last[0].partition(":")[0] == EXT2
        harness.eventually_consistently(reached, CONVERGE_TIMEOUT, HOLD,
                                        lambda: f"{EXT2} -> {STORE_INGRESS}:{WEB_LB_PORT}: {last[0]}\n{self.diag()}")
        self.assertEqual(self.fresh_status()["drops"]["no_route"], no_route)
        # From ext1 (not the Service's network) the address is not even answered to ARP.
        ok, seen = self.from_outside("ext1", "tcp", EXT1, STORE_INGRESS, timeout=1.5)
        self.assertFalse(ok, seen)

    def test_16_a_pod_connecting_to_a_served_ingress_ip_is_refused_at_once(self):
        # Hairpin: refused with ICMP administratively prohibited, which the pod's kernel turns into
        # "No route to host" at once instead of a connect that times out.
        self.node_serving(WEB_INGRESS)
        before = self.fresh_status(rewrites=1)["icmp"]["sent"].get("admin_prohibited", 0)
        started = time.monotonic()
        ok, out = self.client("tcp", WEB_PODS[0], WEB_INGRESS, port=WEB_LB_PORT, timeout=5.0)
        elapsed = time.monotonic() - started
        self.assertFalse(ok, out)
        self.assertIn("No route to host", out)
        self.assertLess(elapsed, 4.0, f"the refusal took {elapsed:.1f}s: {out}")
        after = self.fresh_status()["icmp"]["sent"]["admin_prohibited"]
        self.assertGreaterEqual(after - before, 1)
        self.assert_seen_from("tcp", WEB_PODS[0], EXT1, WEB_INGRESS)   # its egress is untouched

    def spoof_rst(self, server, outside, offset):
        """Sends, from ext1, an RST on the server's side of a connection, `offset` past the next
        sequence number the server will use (its next data segment shows it)."""
        r = run_bounded(["ip", "netns", "exec", ns("ext1"), sys.executable, str(STREAM), "rst", "--src", server,
                         "--dst", outside, "--offset", hex(offset)], 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("sent "), f"no RST sent: {r.stdout}{r.stderr}")

    def test_17_an_rst_from_outside_is_honoured_only_within_the_sessions_window(self):
        # TCP tracking (docs/architecture.md): an RST from outside whose sequence number lies far
        # from what the server has sent (a blind spoof) leaves a live connection alone and is
        # counted; one at the server's next sequence number closes the session.
        port, sport = 8097, 41017
        inside = f"{WEB_PODS[0]}:{sport}"
        self.topo.spawn_in(ns("ext1"), "echo-17", STREAM, "echo", "--tcp", port, "--udp", port, "--lifetime", 120)
        out = self.topo.workdir / "tcp-17.json"
        self.topo.spawn_in(ns("pods"), "tcp-17", STREAM, "tcp", EXT1, port, "--bind", inside, "--rate", 20,
                           "--out", out, "--lifetime", 60)
        client = self.topo.procs["tcp-17"]
        self.addCleanup(stop_process, client)

        def session():
            return self.find_session(self.read_status() or {}, "tcp", inside)

        def established():
            s = session()
            return s is not None and s.get("state") == "established"
        self.wait_for(established, 5, lambda: f"no established session for {inside}\n{self.diag()}")
        outside = session()["outside"]
        self.assertTrue(outside.startswith(WEB_INGRESS + ":"), outside)
        drops_before = self.fresh_status(rewrites=1).get("drops", {})

        blind = time.monotonic()
        self.spoof_rst(f"{EXT1}:{port}", outside, 0x60000000)

        def counted():
            drops = (self.read_status() or {}).get("drops", {})
            return drops.get("tcp_rst_out_of_window", 0) - drops_before.get("tcp_rst_out_of_window", 0) == 1
        self.wait_for(counted, 5, lambda: f"the blind RST was not counted as tcp_rst_out_of_window\n{self.diag()}")
        harness.hold(established, HOLD * 2, lambda: f"the session left established after a blind RST\n{self.diag()}")

        in_window = time.monotonic()
        self.spoof_rst(f"{EXT1}:{port}", outside, 0)
        self.wait_for(lambda: (session() or {}).get("state", "closing") == "closing", 5,
                      lambda: f"an RST at the next sequence number did not close the session\n{self.diag()}")

        stop_process(client)
        result = json.loads(out.read_text())
        # Until the second RST the stream flowed: no error before it was sent (the pod may see that
        # one, forwarded), every echo in order, and echoes all through the time between the two.
        if result["error"] is not None:
            self.assertGreater(result["error"][0], in_window, f"the stream broke after the blind RST: {result}")
        self.assertEqual(result["out_of_order"], [], result)
        self.assertGreaterEqual(result["echoed"], int((in_window - blind) * 20 * 0.5), result)

    def test_18_a_pod_past_its_session_limit_gets_no_new_flows_while_other_pods_do(self):
        # sessions.max_per_pod: a pod spraying UDP flows gets its share and no more; every flow past
        # it is dropped and counted, and another pod's new flows still go out.
        port = 8098
        self.topo.spawn_in(ns("ext1"), "echo-18", STREAM, "echo", "--tcp", port, "--udp", port, "--lifetime", 120)
        run(["ip", "-n", ns("pods"), "addr", "add", f"{SPRAY_POD}/24", "dev", "eth0"], 10)
        self.addCleanup(run, ["ip", "-n", ns("pods"), "addr", "del", f"{SPRAY_POD}/24", "dev", "eth0"], 10)
        flows = POD_SESSION_LIMIT + 20
        drops_before = self.fresh_status(rewrites=1).get("drops", {}).get("pod_session_limit", 0)
        r = run_bounded(["ip", "netns", "exec", ns("pods"), sys.executable, str(STREAM), "udp-fan", EXT1,
                         "--bind", SPRAY_POD, "--sports", f"43000-{43000 + flows - 1}", "--dports", str(port),
                         "--timeout", "3"], 30)
        self.assertEqual(r.returncode, 0, r.stderr)
        answered = sum(json.loads(r.stdout).values())
        self.assertEqual(answered, POD_SESSION_LIMIT, f"{answered} of {flows} flows answered\n{self.diag()}")

        def counted():
            drops = (self.read_status() or {}).get("drops", {}).get("pod_session_limit", 0)
            return drops - drops_before == flows - POD_SESSION_LIMIT
        self.wait_for(counted, 5, lambda: f"pod_session_limit did not rise by {flows - POD_SESSION_LIMIT}\n{self.diag()}")
        self.assert_seen_from("udp", WEB_PODS[1], EXT1, WEB_INGRESS)
        self.assert_seen_from("tcp", OTHER_POD, EXT1, EXT1_GW)

    def test_99_egwd_stops_cleanly_on_sigint(self):
        code = stop_process(self.topo.egwd, signal.SIGINT, grace=STOP_TIMEOUT)
        self.assertEqual(code, 0, f"egwd exited with {code} on SIGINT\n{tail(self.egwd_log_path)}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
