# SPDX-License-Identifier: Apache-2.0
"""End-to-end cases that the packet tests cover byte by byte, here with real kernel hosts
(issue 8 §6): ICMP errors in both directions, session expiry, a full session table, NAT port
exhaustion, one destination address reached through two VRFs (OVN-Kubernetes e2e E8), the
gateway's own Time Exceeded for a TTL 1 probe, and a pod's broadcasts and multicast kept inside.

The topology is scripts/netns.sh's (pods, pods2, ext1, ext2) with a tag of its own. egwd runs on a
staged copy of config/demo.json changed for these cases: 2-8 s session timeouts, at most 12
sessions, NAT ports 30000-30007 (one worker), 203.0.113.0/24 routed through ext1 in the default
VRF and through ext2 in VRF blue (both external namespaces own 203.0.113.7), and one more
EgressService, default/net1 (sourceIPBy Network in the default VRF, endpoint 10.244.1.30).

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_cases_e2e.py
"""

import json
import os
import re
import sys
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
PREFIX = f"egwcase{os.getpid()}"
TAG = harness.iface_tag("c")
FILE_PREFIX = f"egw-cases-{os.getpid()}"

PODS_GW = "10.244.1.1"         # the pods port's address: the gateway's own ICMP errors come from it
WEB_POD = "10.244.1.10"        # default/web: LoadBalancerIP 192.0.2.50
WEB_INGRESS = "192.0.2.50"
DB_POD = "10.244.1.20"         # default/db: Network, VRF blue (ext2)
NET1_POD = "10.244.1.30"       # default/net1: Network, VRF default (ext1)
POD2, PODS2_GW = "10.244.2.10", "10.244.2.1"  # pods2: of no Service (the default action)
EXT1, EXT1_GW = "192.0.2.100", "192.0.2.1"
EXT2, EXT2_GW = "198.51.100.100", "198.51.100.1"
SHARED = "203.0.113.7"         # owned by both ext1 and ext2
SERVE_PORT = 8080              # peer.py serve: answers with the address it saw
SHARED_PORT = 8081             # the same, bound to SHARED (so UDP answers come from that address)
ECHO_PORTS = (7001, 7002)      # stream.py echo
LATE_PORT = 7003               # stream.py late-echo
CLOSED_PORT = 9                # nothing listens there

MAX_SESSIONS = 12
PORT_MIN, PORT_MAX = 30000, 30007
# UDP's and established TCP's outlive what a test does with their sessions (a fan of flows, then
# the status file, the listing and /metrics read back) on a loaded machine: at 3 s a few seconds
# of scheduling delay expired them before they were counted.
TIMEOUTS = {"tcp_established": 8, "tcp_transitory": 2, "udp": 8, "icmp": 2}
EXPIRY_BOUND = 3.0             # the sweep passes over the sessions about once a second (kSweepPassMs)
CONVERGE_TIMEOUT = 3.0
HOLD = 1.0

NET1 = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "net1", "namespace": "default"},
     "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.70", "clusterIPs": ["10.96.0.70"]},
     "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.70"}]}}},
    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
     "metadata": {"name": "net1-a", "namespace": "default", "labels": {"kubernetes.io/service-name": "net1"}},
     "addressType": "IPv4",
     "endpoints": [{"addresses": [NET1_POD], "nodeName": "worker-1", "conditions": {"ready": True}}]},
    {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService", "metadata": {"name": "net1", "namespace": "default"},
     "spec": {"sourceIPBy": "Network", "network": "default"}},
]}


def ns(role):
    return f"{PREFIX}-{role}"


class EdgeCasesE2E(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "cases", PREFIX, TAG)
        cls.metrics_port = harness.free_port()
        cls.config, cls.manifests = peer.stage_config(DEMO_CONFIG, rig.workdir, FILE_PREFIX, iface_tag=TAG,
                                                      metrics_listen=f"127.0.0.1:{cls.metrics_port}")
        cfg = json.loads(cls.config.read_text())
        cfg["sessions"] = {"max": MAX_SESSIONS, "port_min": PORT_MIN, "port_max": PORT_MAX, "timeouts": TIMEOUTS}
        cfg["routes"] = [
            {"vrf": "default", "prefix": "203.0.113.0/24", "via": EXT1, "port": "ext1"},
            {"vrf": "blue", "prefix": "203.0.113.0/24", "via": EXT2, "port": "ext2"}]
        cls.config.write_text(json.dumps(cfg, indent=1))
        (cls.manifests / "net1.json").write_text(json.dumps(NET1, indent=1))
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")

        rig.netns.up()
        for role in ("ext1", "ext2"):
            r = run(["ip", "-n", ns(role), "addr", "add", f"{SHARED}/32", "dev", "lo"], 10)
            if r.returncode != 0:
                raise RuntimeError(r.stderr)
        rig.start_ready_egwd(cls.config, cls.status_file, FILE_PREFIX)
        for role in ("ext1", "ext2"):
            cls.spawn(role, f"serve-{role}", PEER, "serve", "--tcp", SERVE_PORT, "--udp", SERVE_PORT, "--lifetime", 900)
            cls.spawn(role, f"shared-{role}", PEER, "serve", "--tcp", SHARED_PORT, "--udp", SHARED_PORT,
                      "--bind", SHARED, "--lifetime", 900)
        for port in ECHO_PORTS:
            cls.spawn("ext1", f"echo-{port}", STREAM, "echo", "--tcp", port + 100, "--udp", port, "--lifetime", 900)
        cls.spawn("ext1", "late", STREAM, "late-echo", "--port", LATE_PORT, "--delay", 0.5, "--lifetime", 900)

    @classmethod
    def spawn(cls, role, name, script, *args):
        cls.rig.spawn_in(ns(role), name, script, *args)

    # --- helpers ----------------------------------------------------------------------------

    @classmethod
    def status(cls):
        return harness.read_status(cls.status_file)

    def fresh_status(self, rewrites=2):
        """The status as of now: the file is rewritten every 500 ms; wait for `rewrites`."""
        harness.wait_rewritten(self.status_file, rewrites, 5, "status file not rewritten")
        return self.status()

    def drops(self, reason):
        return (self.fresh_status() or {}).get("drops", {}).get(reason, 0)

    def metric(self, series):
        """One sample of /metrics, by its exact series text (`egw_drops_total{reason="x"}`)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
        self.assertIsNotNone(m, f"{series} is not exported")
        return float(m.group(1))

    def sessions(self):
        """The status file's session listing. It is empty, not partial, when the worker did not
        answer within 50 ms, so tests only count on what it lists, never on what it leaves out."""
        return (self.status() or {}).get("sessions", [])

    def active(self, status=None):
        """Sessions in the table: created minus closed, summed over the workers' counters."""
        workers = (status or self.status() or {}).get("workers")
        if workers is None:
            return None
        return sum(w["sessions_created"] - w["sessions_closed"] for w in workers)

    def diag(self):
        st = self.status() or {}
        return (f"drops {st.get('drops')}\nsessions {json.dumps(st.get('sessions'))}\n"
                f"--- egwd log ---\n{tail(self.log_path, 25)}")

    def in_ns(self, role, script, *args, timeout=20):
        r = run_bounded(["ip", "netns", "exec", ns(role), sys.executable, str(script), *map(str, args)], timeout)
        return r.stdout.strip(), r

    def wait_no_sessions(self):
        """Every session of the earlier tests has expired (timeouts are 2-8 s)."""
        self.fresh_status(rewrites=1)   # not a file written before the last test's packets
        harness.wait_for(lambda: self.active() == 0, max(TIMEOUTS.values()) + EXPIRY_BOUND + 2,
                         lambda: f"sessions did not expire ({self.active()} active)\n{self.diag()}")

    def assert_alive(self):
        self.assertIsNone(self.rig.egwd.poll(), f"egwd exited\n{tail(self.log_path)}")

    # --- ICMP errors ------------------------------------------------------------------------

    def test_1_udp_to_a_closed_port_gets_port_unreachable_translated_back(self):
        # The external kernel answers with a port unreachable quoting the translated datagram
        # (192.0.2.50:P -> 192.0.2.100:9). The pod's connected socket gets ECONNREFUSED only
        # if egwd rewrote the outer destination and the quoted source back to 10.244.1.10:41001
        # and fixed every checksum (the kernel checks the ICMP one and matches the quote).
        out, r = self.in_ns("pods", STREAM, "probe-udp", EXT1, CLOSED_PORT, "--bind", f"{WEB_POD}:41001",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")
        # The same through VRF blue with the network's address (db).
        out, r = self.in_ns("pods", STREAM, "probe-udp", EXT2, CLOSED_PORT, "--bind", f"{DB_POD}:41001",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")

    def test_1_tcp_to_a_closed_port_gets_the_rst(self):
        out, r = self.in_ns("pods", STREAM, "probe-tcp", EXT1, CLOSED_PORT, "--bind", f"{WEB_POD}:41002",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")
        # A port that listens still connects (the RST was the closed port's, not egwd's).
        out, r = self.in_ns("pods", STREAM, "probe-tcp", EXT1, SERVE_PORT, "--bind", f"{WEB_POD}:41003",
                            "--timeout", 3)
        self.assertEqual(out, "connected", f"{r.stderr}\n{self.diag()}")

    def test_2_a_pods_port_unreachable_reaches_the_external_host_translated(self):
        # The pod sends one datagram and closes its socket; the external host answers half a
        # second later from a connected socket; the pod's kernel answers that with a port
        # unreachable, which egwd must translate outwards (outer source and quoted destination
        # to 192.0.2.50:P) for the external socket to get ECONNREFUSED.
        log = self.rig.workdir / "late.log"
        before = log.read_text()
        out, r = self.in_ns("pods", STREAM, "udp-once", EXT1, LATE_PORT, "--bind", f"{WEB_POD}:41004")
        self.assertEqual(out, "sent", r.stderr)

        def outcome():
            m = re.search(r"^(ECONNREFUSED|no-error|answer) (\S+)$", log.read_text()[len(before):], re.M)
            return m and m.groups()
        result, peer_addr = harness.wait_for(outcome, 6, lambda: f"late-echo: {log.read_text()}\n{self.diag()}")
        self.assertTrue(peer_addr.startswith(WEB_INGRESS + ":"), peer_addr)
        self.assertEqual(result, "ECONNREFUSED", f"{log.read_text()}\n{self.diag()}")

    # --- sessions ---------------------------------------------------------------------------

    def test_3_sessions_expire_after_their_timeout_and_replies_then_find_none(self):
        self.wait_no_sessions()
        before = self.fresh_status()
        expired_before = sum(w["sessions_expired"] for w in before["workers"])
        # The session is made after this instant, however long the peer takes to start and to end:
        # the times below count from it, so a slow machine shortens the hold, never fails it.
        not_before = time.monotonic()
        out, r = self.in_ns("pods", PEER, "udp", EXT1, SERVE_PORT, "--bind", f"{NET1_POD}:41005", "--timeout", 3)
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{self.diag()}")
        outside = out
        self.assertTrue(outside.startswith(EXT1_GW + ":"), outside)
        session = harness.wait_for(
            lambda: next((s for s in self.sessions() if s["inside"] == f"{NET1_POD}:41005"), None), 3,
            lambda: f"no session for {NET1_POD}:41005\n{self.diag()}")
        self.assertEqual(session["outside"], outside, session)
        # It stays while younger than the UDP timeout (it is the only one), checked until a second
        # before the earliest it may go...
        harness.hold(lambda: self.active() == 1, not_before + TIMEOUTS["udp"] - 1.0 - time.monotonic(),
                     lambda: f"the session went before its timeout\n{self.diag()}")
        # ... and is gone within the bound after it, not before.
        harness.wait_for(lambda: self.active() == 0, TIMEOUTS["udp"] + EXPIRY_BOUND,
                         lambda: f"the session did not expire\n{self.diag()}")
        self.assertGreaterEqual(time.monotonic() - not_before, TIMEOUTS["udp"])
        after = self.fresh_status()
        self.assertGreater(sum(w["sessions_expired"] for w in after["workers"]), expired_before)
        # A late reply to the expired translation reaches nobody and is counted.
        no_session = after["drops"].get("no_session", 0)
        nat_ip, nat_port = outside.split(":")
        out, r = self.in_ns("ext1", STREAM, "probe-udp", nat_ip, nat_port, "--bind", f"{EXT1}:{ECHO_PORTS[0]}",
                            "--timeout", 1)
        self.assertEqual(out, "timeout", r.stderr)
        harness.wait_for(lambda: self.drops("no_session") > no_session, 3,
                         lambda: f"the late reply was not counted as no_session\n{self.diag()}")
        self.assert_alive()

    def fan(self, sports, dports):
        out, r = self.in_ns("pods", STREAM, "udp-fan", EXT1, "--bind", NET1_POD, "--sports", sports,
                            "--dports", dports, "--timeout", 1)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(out)

    def test_4_a_full_session_table_drops_and_counts_then_recovers(self):
        self.wait_no_sessions()
        limit = self.drops("session_limit")
        exhausted = self.drops("port_exhausted")
        # 7 flows to each of two echo ports: ports do not run out (7 < 8 per destination), the
        # table (12) does.
        answered = self.fan("42000-42006", f"{ECHO_PORTS[0]}-{ECHO_PORTS[1]}")
        self.assertEqual(sum(answered.values()), MAX_SESSIONS, f"{answered}\n{self.diag()}")
        st = self.fresh_status(rewrites=1)    # before the sessions expire (8 s)
        self.assertEqual(self.active(st), MAX_SESSIONS, self.diag())
        self.assertEqual(st["drops"]["session_limit"] - limit, 14 - MAX_SESSIONS, self.diag())
        self.assertEqual(st["drops"]["port_exhausted"], exhausted, self.diag())
        # /metrics counts the same drops and shows the table full.
        self.assertEqual(self.metric('egw_drops_total{reason="session_limit"}'), st["drops"]["session_limit"])
        self.assertEqual(self.metric('egw_sessions_capacity{family="IPv4"}'), MAX_SESSIONS)
        self.assertEqual(self.metric('egw_sessions_active{lcore="1",family="IPv4"}'), MAX_SESSIONS)
        self.assertEqual(self.metric('egw_sessions_active{lcore="1",family="IPv6"}'), 0)
        self.assert_alive()
        # Once they expire, new flows get sessions again.
        self.wait_no_sessions()
        answered = self.fan("42100-42101", f"{ECHO_PORTS[0]}")
        self.assertTrue(all(answered.values()), f"{answered}\n{self.diag()}")

    def test_5_nat_port_exhaustion_drops_and_counts_then_recovers(self):
        self.wait_no_sessions()
        limit = self.drops("session_limit")
        exhausted = self.drops("port_exhausted")
        ports = PORT_MAX - PORT_MIN + 1
        # 10 flows to one destination: 8 NAT ports, so 2 find none (the table has room for 12).
        answered = self.fan("43000-43009", f"{ECHO_PORTS[0]}")
        self.assertEqual(sum(answered.values()), ports, f"{answered}\n{self.diag()}")
        st = self.fresh_status(rewrites=1)    # before the sessions expire (8 s)
        self.assertEqual(st["drops"]["port_exhausted"] - exhausted, 10 - ports, self.diag())
        self.assertEqual(st["drops"]["session_limit"], limit, self.diag())
        self.assertEqual(self.metric('egw_drops_total{reason="port_exhausted"}'), st["drops"]["port_exhausted"])
        self.assertEqual(self.active(st), ports, self.diag())
        listed = harness.wait_for(lambda: [s for s in self.sessions() if s["remote"] == f"{EXT1}:{ECHO_PORTS[0]}"],
                                  1.5, lambda: f"no session listed\n{self.diag()}")
        outside = sorted(int(s["outside"].split(":")[1]) for s in listed)
        self.assertEqual(outside, list(range(PORT_MIN, PORT_MAX + 1)), self.diag())
        # Another destination still has all its ports (endpoint-dependent allocation).
        answered = self.fan("43100", f"{ECHO_PORTS[1]}")
        self.assertTrue(all(answered.values()), f"{answered}\n{self.diag()}")
        self.assert_alive()
        self.wait_no_sessions()
        answered = self.fan("43200-43201", f"{ECHO_PORTS[0]}")
        self.assertTrue(all(answered.values()), f"{answered}\n{self.diag()}")

    # --- one destination, two VRFs (OVN-Kubernetes e2e E8) -----------------------------------

    def seen(self, proto, src, sport):
        out, r = self.in_ns("pods", PEER, proto, SHARED, SHARED_PORT, "--bind", f"{src}:{sport}", "--timeout", 3)
        return out if r.returncode == 0 else f"failed: {r.stderr.strip()}"

    def clear_sessions(self):
        """Closes every session; egwctl returns once the workers have done it."""
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "clear", "sessions", "all"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)

    def seen_fresh(self, proto, src, sport):
        """seen() on an empty table. Every probe of test_6 is a new flow and a check polls for
        seconds: with 12 sessions, 8 NAT ports and 8 s timeouts, a fast machine's probes would
        exhaust the ports within one second's hold, and the next probe would go unanswered."""
        self.clear_sessions()
        return self.seen(proto, src, sport)

    def test_6_the_same_destination_through_two_vrfs_by_two_network_services(self):
        self.wait_no_sessions()
        # db (network blue) reaches 203.0.113.7 through ext2 and leaves with ext2's address;
        # net1 (network default) reaches the other 203.0.113.7 through ext1 with ext1's. Both
        # hold (new connections, 1 s).
        for proto in ("tcp", "udp"):
            with self.subTest(proto=proto):
                counter = iter(range(44000, 44100))
                for src, want in ((DB_POD, EXT2_GW), (NET1_POD, EXT1_GW)):
                    harness.eventually_consistently(
                        lambda: self.seen_fresh(proto, src, next(counter)).startswith(want + ":"), CONVERGE_TIMEOUT, HOLD,
                        lambda: f"{proto} {src} -> {SHARED} not seen from {want}: "
                        f"{self.seen_fresh(proto, src, next(counter))}\n{self.diag()}")
        # The sessions say so too (each with its Service, VRF and port).
        self.clear_sessions()
        self.seen("udp", DB_POD, 44200)
        self.seen("udp", NET1_POD, 44201)

        def listed():
            return {s["inside"]: (s["service"], s["vrf"], s["port"]) for s in self.sessions()
                    if s["inside"] in (f"{DB_POD}:44200", f"{NET1_POD}:44201")}
        got = harness.wait_for(lambda: len(listed()) == 2 and listed(), 2, lambda: f"{listed()}\n{self.diag()}")
        self.assertIn(got[f"{DB_POD}:44200"], (("default/db", "blue", "ext2"), ("default/db", "100", "ext2")))
        self.assertEqual(got[f"{NET1_POD}:44201"], ("default/net1", "default", "ext1"))
        # Without its EgressService, db takes the default action: masquerade, default VRF, ext1.
        path = self.manifests / "db.json"        # a List: drop its EgressService item
        original = path.read_text()
        self.addCleanup(path.write_text, original)
        doc = json.loads(original)
        doc["items"] = [item for item in doc["items"] if item["kind"] != "EgressService"]
        path.write_text(json.dumps(doc))
        counter = iter(range(44300, 44400))
        harness.eventually_consistently(
            lambda: self.seen_fresh("udp", DB_POD, next(counter)).startswith(EXT1_GW + ":"), CONVERGE_TIMEOUT, HOLD,
            lambda: f"db without its EgressService not seen from {EXT1_GW}\n{self.diag()}")


    # --- the gateway's own ICMP errors and filtering -------------------------------------------

    def test_7_a_ttl_one_probe_gets_time_exceeded_from_the_gateway(self):
        # As traceroute's first hop: a UDP datagram with TTL 1 from a pod of default/web. The
        # kernel queues the Time Exceeded on the socket only when its quote names the socket's own
        # (untranslated) addresses and ports and the checksums are right; the offender is the
        # gateway's inside address.
        sent = self.metric('egw_icmp_errors_sent_total{type="time_exceeded"}')
        out, r = self.in_ns("pods", STREAM, "ttl-probe", EXT1, 33434, "--bind", f"{WEB_POD}:41010", "--timeout", 3)
        self.assertEqual(out, f"icmp 11 0 {PODS_GW}", f"{r.stderr}\n{self.diag()}")
        # A pod of default/db (Network, VRF blue), toward the other network: the same.
        out, r = self.in_ns("pods", STREAM, "ttl-probe", EXT2, 33435, "--bind", f"{DB_POD}:41011", "--timeout", 3)
        self.assertEqual(out, f"icmp 11 0 {PODS_GW}", f"{r.stderr}\n{self.diag()}")
        # A pod of no Service (the default action) behind the other inside port: the error comes
        # from that port's address.
        out, r = self.in_ns("pods2", STREAM, "ttl-probe", EXT1, 33436, "--bind", f"{POD2}:41013", "--timeout", 3)
        self.assertEqual(out, f"icmp 11 0 {PODS2_GW}", f"{r.stderr}\n{self.diag()}")
        # TTL 2 reaches the server (and no error comes back).
        out, r = self.in_ns("pods", STREAM, "ttl-probe", EXT1, SERVE_PORT, "--bind", f"{WEB_POD}:41012", "--ttl", 2,
                            "--timeout", 1)
        self.assertEqual(out, "timeout", f"{r.stderr}\n{self.diag()}")
        harness.wait_for(lambda: self.metric('egw_icmp_errors_sent_total{type="time_exceeded"}') == sent + 3, 3,
                         lambda: f"the errors were not counted\n{self.diag()}")
        # egwctl shows the same count.
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "--json", "show", "icmp"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["sent"]["time_exceeded"], sent + 3, r.stdout)
        self.assert_alive()

    def test_7_b_broadcast_and_multicast_from_a_pod_stay_inside(self):
        # A pod's DHCP-like limited broadcast, its mDNS, and a broadcast to its own subnet: none
        # leaves an outside port (a capture in both external namespaces sees none), each counted by
        # its own reason.
        reasons = ("broadcast", "multicast", "directed_broadcast")
        before = {r: self.drops(r) for r in reasons}
        captures = {}
        for role in ("ext1", "ext2"):
            path = self.rig.workdir / f"capture-{role}-{time.monotonic_ns()}.txt"
            self.spawn(role, f"capture-{role}", STREAM, "capture", "--out", path, "--lifetime", 30)
            captures[role] = path
        out, r = self.in_ns("pods", STREAM, "send-to", "--bind", WEB_POD,
                            "--to", "255.255.255.255:6767,224.0.0.251:5353,10.244.1.255:6768")
        self.assertEqual(out, "sent 3", r.stderr)
        harness.wait_for(lambda: all(self.drops(r) >= before[r] + 1 for r in reasons), 3,
                         lambda: f"not counted: {before}\n{self.diag()}")
        # Then an ordinary datagram of the same pod, which must show up in ext1's capture, so the
        # capture is known to be running when the others would have passed.
        out, r = self.in_ns("pods", PEER, "udp", EXT1, SERVE_PORT, "--bind", f"{WEB_POD}:41013", "--timeout", 3)
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{self.diag()}")
        harness.wait_for(lambda: f" {SERVE_PORT} " in captures["ext1"].read_text(), 3,
                         lambda: f"the capture in ext1 saw nothing\n{captures['ext1'].read_text()}")
        for role, path in captures.items():
            for line in path.read_text().splitlines():
                self.assertNotRegex(line, r" (6767|5353|6768) ", f"left through {role}: {line}")
        after = {r: self.drops(r) for r in reasons}
        for reason in reasons:
            self.assertEqual(after[reason], before[reason] + 1, f"{reason}: {before} -> {after}")
        self.assert_alive()


    # --- the packet trace ----------------------------------------------------------------------

    def ctl(self, *args):
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, *map(str, args)], 10)
        self.assertEqual(r.returncode, 0, f"egwctl {args}:\n{r.stdout}{r.stderr}")
        return r.stdout

    def traced(self):
        return json.loads(self.ctl("--json", "show", "trace"))

    def test_8_the_packet_trace_shows_each_stage_and_the_headers(self):
        # A new flow of web's pod: translated to the ingress IP in nat_slow, which creates its
        # session; out through ext1 toward the server.
        # The server's MAC known first (a packet the trace does not match), so that the traced
        # one leaves at once rather than waiting for ARP in the control thread.
        out, r = self.in_ns("pods", STREAM, "probe-udp", EXT1, CLOSED_PORT, "--bind", f"{WEB_POD}:41019",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")
        started = self.ctl("trace", "start", 1, "saddr", WEB_POD, "sport", 41020, "proto", "udp")
        self.assertRegex(started, rf"^tracing the next 1 packet\(s\) of proto udp saddr {WEB_POD} sport 41020 on \d+ worker")
        out, r = self.in_ns("pods", STREAM, "probe-udp", EXT1, CLOSED_PORT, "--bind", f"{WEB_POD}:41020",
                            "--timeout", 3)
        self.assertEqual(out, "ECONNREFUSED", f"{r.stderr}\n{self.diag()}")
        got = harness.wait_for(lambda: self.traced()["packets"], 3, lambda: f"nothing traced\n{self.diag()}")
        self.assertEqual(len(got), 1, got)
        p = got[0]
        self.assertEqual(p["port"], "pods")
        self.assertEqual((p["before"]["src"], p["before"]["sport"], p["before"]["dst"], p["before"]["dport"]),
                         (WEB_POD, 41020, EXT1, CLOSED_PORT), p)
        stages = [s["stage"] for s in p["steps"]]
        self.assertEqual(stages, ["input", "nat_lookup", "nat_slow", "output"], p)
        slow = p["steps"][2]
        self.assertEqual((slow["next"], slow["session_change"], slow["port"], slow["next_hop"]),
                         ("output", "created", "ext1", EXT1), slow)
        # The NAT address and port (41020 is outside this gateway's range 30000-30007).
        nat_port = slow["headers"]["sport"]
        self.assertEqual(slow["headers"]["src"], WEB_INGRESS, slow)
        self.assertIn(nat_port, range(PORT_MIN, PORT_MAX + 1), slow)
        self.assertEqual(p["outcome"], "queued", p)
        self.assertEqual((p["after"]["src"], p["after"]["sport"], p["after"]["ttl"]),
                         (WEB_INGRESS, nat_port, p["before"]["ttl"] - 1), p)
        self.assertNotEqual(p["after"]["src_mac"], p["before"]["src_mac"], "the Ethernet header output wrote")
        text = self.ctl("show", "trace")
        self.assertIn("tracing: 1 of 1 packet(s)", text)
        self.assertRegex(text, r"packet 1, worker \d+, port pods, [0-9.]+ ms after start")
        self.assertIn(f"nat_slow -> output, session {slow['session']} created, port ext1 via {EXT1}; now "
                      f"{WEB_INGRESS}.{nat_port} > {EXT1}.{CLOSED_PORT}", text)

        # TTL 1: refused with the gateway's own Time Exceeded, built by icmp_reply, back to the pod.
        self.ctl("trace", "start", 5, "saddr", WEB_POD, "sport", 41021)
        out, r = self.in_ns("pods", STREAM, "ttl-probe", EXT1, 33437, "--bind", f"{WEB_POD}:41021", "--timeout", 3)
        self.assertEqual(out, f"icmp 11 0 {PODS_GW}", f"{r.stderr}\n{self.diag()}")
        got = self.traced()["packets"]
        self.assertEqual(len(got), 1, got)
        p = got[0]
        refused = [s for s in p["steps"] if s["next"] == "icmp_reply"]
        self.assertEqual([(s["icmp"], s["reason"]) for s in refused], [("time_exceeded", "ttl_exceeded")], p)
        built = [s for s in p["steps"] if s["stage"] == "icmp_reply"]
        self.assertEqual(len(built), 1, p)
        self.assertTrue(built[0].get("icmp_generated"), p)
        self.assertEqual((p["after"]["src"], p["after"]["dst"], p["after"]["icmp_type"]), (PODS_GW, WEB_POD, 11), p)

        # Stopped: nothing more is taken, and what was stays.
        self.assertIn("trace stopped: 1 packet(s) recorded", self.ctl("trace", "stop"))
        self.in_ns("pods", STREAM, "ttl-probe", EXT1, 33437, "--bind", f"{WEB_POD}:41021", "--timeout", 1)
        shown = self.traced()
        self.assertFalse(shown["tracing"])
        self.assertEqual(len(shown["packets"]), 1, shown)
        self.assertIn("no trace running", self.ctl("trace", "stop"))
        self.assert_alive()


if __name__ == "__main__":
    unittest.main()
