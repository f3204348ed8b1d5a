# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of the kubernetes state source: the real egwd between real kernel hosts in
network namespaces, fed by the test API server instead of a manifest directory.

scripts/netns.sh builds the topology of tests/e2e/test_e2e.py (pods, pods2, ext1, ext2), egwd runs
on a staged copy of config/demo.json with state.source "kubernetes", and the test drives the
cluster through tests/apiserver/apiserver.py's /_test/ API: Nodes gw-1 (egwd's own) and gw-2 (a
second gateway whose liveness Lease the test renews, so that a host can be moved away from egwd),
the Services and EndpointSlices of the demo, and the EgressServices. egwd is the leader: it elects
the host, writes status.host and the node label, and programs its data plane from status.host.
The namespaces are dual-stack (EGW_NETNS_IPV6=1, as config/demo.json is): test_09's dual-stack
Service sends both families through egwd.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_k8s_e2e.py
EGWD names the binary (default build/control/egwd); EGW_E2E_KEEP=1 keeps the work directory.
"""

import json
import os
import sys
import threading
import time
import unittest
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True             # leave no __pycache__ in the tree
import harness  # noqa: E402  (processes, the test API server, the objects it is seeded with)
import peer  # noqa: E402  (tests/e2e/peer.py: stage_config and the traffic clients)
from harness import (egress_service, endpoint_slice, lb_service, node, run, run_bounded,  # noqa: E402
                     selector, stop_process, tail)
import test_metrics  # noqa: E402  (the exposition read through promtool, and the dashboard check)

EGWCTL = harness.egwctl_binary()
RESOURCES = ("egressservices", "services", "endpointslices", "nodes", "leases")
# Watched for EgressIP by a client of their own (docs/kubernetes.md, "EgressIP"), and the
# EgressFirewalls on the same client ("EgressFirewall").
EGRESS_IP_RESOURCES = ("egressips", "namespaces", "pods", "egressfirewalls")
PEER = HERE / "peer.py"
DEMO_CONFIG = REPO / "config" / "demo.json"

PREFIX = f"egwk8s{os.getpid()}"             # namespaces <prefix>-pods, -pods2, -ext1, -ext2
TAG = harness.iface_tag("k")                # root-side interfaces <tag>-pods, ... (scripts/netns.sh)
FILE_PREFIX = f"egw-k8s-e2e-{os.getpid()}"  # DPDK runtime directory of the egwd under test
LEASE_NS = "egw-system"
NODE = "gw-1"                               # egwd's node (config/demo.json)
OTHER = "gw-2"                              # another gateway, alive through the test's Lease
EGRESS_ASSIGNABLE = "k8s.ovn.org/egress-assignable"

WEB_PODS = ("10.244.1.10", "10.244.1.11")
WEB_INGRESS = "192.0.2.50"
NEW_POD = "10.244.1.30"                     # becomes an endpoint of web during the tests
DB_POD = "10.244.1.20"
EXT1 = "192.0.2.100"
EXT1_GW = "192.0.2.1"                       # masquerade address on ext1 (the default action)
EXT2 = "198.51.100.100"
EXT2_GW = "198.51.100.1"                    # masquerade address on ext2 (VRF blue)
SERVICE_PORT = 8080
LABEL = "egress-service.k8s.ovn.org/default-web"
# default/dual (test_09): its IPv6 ingress IP on ext1's IPv6 network, so that ext1's host finds it
# on-link by Neighbor Discovery; its first pod of each family is an address the test adds to the
# pods namespace and sends from.
DUAL_INGRESS = ("192.0.2.70", "2001:db8:2::70")
DUAL_PODS = ("10.244.1.40", "fd00:10:244:1::40", "fd00:10:244:1::41")
EXT1_V6 = "2001:db8:2::100"                 # ext1's host (scripts/netns.sh, EGW_NETNS_IPV6=1)

READY_TIMEOUT = 30.0
CONVERGE_TIMEOUT = 5.0
# How long a state that has come must then hold ("consistently", as OVN-Kubernetes' e2e checks
# it: 1-2 s for translations, 2-3 s for status.host and labels).
HOLD_TRANSLATION = 1.0
HOLD_STATE = 2.0


def ns(role):
    return f"{PREFIX}-{role}"


def seen_from(answer, ip):
    """Whether a server's answer ('192.0.2.50:40000', '[2001:db8:2::50]:40000') names `ip`."""
    return answer.startswith(f"[{ip}]:" if ":" in ip else f"{ip}:")


def run_peer(role, *args, timeout=20.0):
    return run_bounded(["ip", "netns", "exec", ns(role), sys.executable, str(PEER), *map(str, args)], timeout)


def liveness_lease(node_name, seconds=3):
    return harness.liveness_lease(node_name, LEASE_NS, seconds)


class KubernetesSourceE2E(unittest.TestCase):
    h = None

    @classmethod
    def setUpClass(cls):
        cls.h = h = harness.NamespaceRig.for_suite(cls, "k8s-e2e", PREFIX, TAG, binaries=[EGWCTL], ipv6=True)
        api = h.start_api()

        kubeconfig = api.write_kubeconfig(h.workdir / "kubeconfig", namespace=LEASE_NS)
        config, _ = peer.stage_config(DEMO_CONFIG, h.workdir, FILE_PREFIX, iface_tag=TAG)
        cfg = json.loads(config.read_text())
        cfg["state"] = {"source": "kubernetes", "kubeconfig": str(kubeconfig), "lease_namespace": LEASE_NS,
                        "lease_duration_s": 3, "renew_deadline_ms": 2000, "retry_period_ms": 250}
        cls.metrics_port = harness.free_port()
        cfg["metrics"] = {"enabled": True, "listen": f"127.0.0.1:{cls.metrics_port}"}
        if "fd00:10:244::/48" not in cfg["cluster"]["pod_cidrs"]:   # test_09's IPv6 endpoints are pods
            raise RuntimeError(f"{DEMO_CONFIG}: no IPv6 pod range: {cfg['cluster']}")
        config.write_text(json.dumps(cfg, indent=2))
        cls.status_file = h.workdir / "status.json"
        cls.egwd_log_path = h.log_path("egwd")

        # The cluster before egwd starts: two gateway nodes, the demo's Services, no EgressService.
        api.upsert(node(NODE))
        api.upsert(node(OTHER))
        api.upsert(lb_service("web", WEB_INGRESS, "10.96.0.50"))
        api.upsert(endpoint_slice("web-abc12", "web", WEB_PODS))
        api.upsert(lb_service("db", "192.0.2.60", "10.96.0.60"))
        api.upsert(endpoint_slice("db-xyz34", "db", [DB_POD], "worker-2"))
        cls.start_other_gateway()

        h.netns.up()
        h.start_egwd(config, cls.status_file, FILE_PREFIX)
        cls.wait_for(lambda: (cls.read_status() or {}).get("ready") is True, READY_TIMEOUT,
                     lambda: f"egwd not ready:\n{tail(cls.egwd_log_path)}")
        cls.wait_for(lambda: "became the leader" in cls.egwd_log_path.read_text(errors="replace"), READY_TIMEOUT,
                     lambda: f"egwd did not become the leader:\n{tail(cls.egwd_log_path)}")

        for role in ("ext1", "ext2"):
            h.spawn_in(ns(role), f"server-{role}", PEER, "serve", "--tcp", SERVICE_PORT, "--udp", SERVICE_PORT,
                       "--ipv6", "--lifetime", 1800)

    @classmethod
    def start_other_gateway(cls):
        """gw-2: a second gateway whose liveness Lease a thread renews while `renewing` is set."""
        h = cls.h
        cls.renewing = threading.Event()
        stopping = threading.Event()

        def renew():
            while not stopping.wait(0.5):
                if cls.renewing.is_set():
                    try:
                        h.api.upsert(liveness_lease(OTHER))
                    except (OSError, RuntimeError, AttributeError):   # AttributeError: the server is gone
                        pass
        cls.renewing.set()
        h.api.upsert(liveness_lease(OTHER))
        renewer = threading.Thread(target=renew, daemon=True)
        renewer.start()

        def stop():
            stopping.set()
            renewer.join(timeout=5)
        h.at_cleanup(stop, before_processes=True)

    # --- helpers ---------------------------------------------------------------------------

    wait_for = staticmethod(harness.wait_for)

    @classmethod
    def read_status(cls):
        return harness.read_status(cls.status_file)

    def diag(self):
        parts = []
        if self.h.egwd is not None and self.h.egwd.poll() is not None:
            parts.append(f"egwd EXITED with code {self.h.egwd.returncode}")
        for s in (self.read_status() or {}).get("services", []):
            parts.append(f"service {json.dumps(s, sort_keys=True)}")
        es = self.h.api.get("/apis/k8s.ovn.org/v1/egressservices") or {}
        for item in es.get("items", []):
            parts.append(f"EgressService {item['metadata']['name']}: spec {item.get('spec')} "
                         f"status {item.get('status')}")
        parts.append("--- egwd log (tail) ---\n" + tail(self.egwd_log_path, 30))
        return "\n".join(parts)

    def host(self, name):
        es = self.h.api.get(f"/apis/k8s.ovn.org/v1/namespaces/default/egressservices/{name}")
        return None if es is None else (es.get("status") or {}).get("host")

    def labelled(self):
        nodes = self.h.api.get("/api/v1/nodes") or {"items": []}
        return sorted(n["metadata"]["name"] for n in nodes["items"]
                      if LABEL in (n["metadata"].get("labels") or {}))

    def client(self, src, dst, timeout=1.5):
        r = run_peer("pods", "tcp", dst, SERVICE_PORT, "--bind", src, "--timeout", timeout, timeout=timeout + 10)
        return (r.returncode == 0), (r.stdout if r.returncode == 0 else r.stderr or r.stdout).strip()

    def wait_seen_from(self, src, dst, expected_ip, timeout=CONVERGE_TIMEOUT, hold=HOLD_TRANSLATION):
        """New TCP connections from `src` reach `dst` from `expected_ip` within `timeout`, and
        every new connection for `hold` seconds after that does too; returns the seconds it took
        to come."""
        t0 = time.monotonic()
        last = None
        while True:
            left = timeout - (time.monotonic() - t0)
            if left <= 0:
                self.fail(f"TCP {src} -> {dst} not seen from {expected_ip} within {timeout:g}s "
                          f"(last: {last})\n{self.diag()}")
            ok, last = self.client(src, dst, timeout=max(0.5, min(1.5, left)))
            if ok and seen_from(last, expected_ip):
                took = time.monotonic() - t0
                break
            time.sleep(0.05)

        def still():
            nonlocal ok, last
            ok, last = self.client(src, dst)
            return ok and seen_from(last, expected_ip)
        harness.hold(still, hold, lambda: f"TCP {src} -> {dst} was seen from {expected_ip}, then not "
                     f"within {hold:g}s (got {last})\n{self.diag()}")
        return took

    def wait_host(self, name, want, timeout=CONVERGE_TIMEOUT, hold=HOLD_STATE):
        """status.host of `name` becomes `want` within `timeout` and stays for `hold` seconds."""
        harness.eventually_consistently(
            lambda: self.host(name) == want, timeout, hold,
            lambda: f"{name}: status.host is {self.host(name)!r}, expected {want!r} (for {hold:g}s)\n{self.diag()}")

    def wait_labelled(self, want, timeout=CONVERGE_TIMEOUT, hold=HOLD_STATE):
        """Exactly the nodes `want` carry web's label within `timeout`, for `hold` seconds."""
        harness.eventually_consistently(
            lambda: self.labelled() == want, timeout, hold,
            lambda: f"{LABEL} on {self.labelled()}, expected {want} (for {hold:g}s)\n{self.diag()}")

    # --- tests (in name order; each leaves web hosted on gw-1 or deleted as it found it) ----

    def test_00_without_egress_service_the_default_action_applies(self):
        self.assertIsNone(self.host("web"))
        self.wait_seen_from(WEB_PODS[0], EXT1, EXT1_GW)
        web = [s for s in (self.read_status() or {}).get("services", []) if s["key"] == "default/web"]
        self.assertEqual(web, [], "egwd programmed a Service that has no EgressService")

    def test_01_creating_the_egress_service_makes_pods_leave_with_the_ingress_ip(self):
        self.h.api.upsert(egress_service("web", host=NODE))
        took = self.wait_seen_from(WEB_PODS[0], EXT1, WEB_INGRESS)
        self.assertEqual(self.host("web"), NODE)
        self.wait_labelled([NODE])
        self.wait_seen_from(WEB_PODS[1], EXT1, WEB_INGRESS)
        print(f"\n  EgressService created -> translated in {took:.2f} s", file=sys.stderr)
        # The CLI shows the spec as the API server has it.
        r = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "service", "default/web"], 20)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("kubernetes.io/hostname", r.stdout)
        self.assertNotIn("spec not available", r.stdout)

    def test_01b_show_k8s_reports_every_kind_synced_and_this_gateway_leading(self):
        r = run([str(EGWCTL), "-p", FILE_PREFIX, "--json", "show", "k8s"], 20)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        j = json.loads(r.stdout)
        self.assertTrue(j["synced"])
        self.assertTrue(j["leader"], j)
        self.assertEqual(j["election"], "leader")
        self.assertGreaterEqual(j["live_nodes"], 1)
        names = " ".join(x["name"] for x in j["resources"])
        for kind in ("egressservices", "services", "endpointslices", "nodes", "leases"):
            self.assertIn(kind, names)
        for res in j["resources"]:
            self.assertTrue(res["synced"], res)
            self.assertTrue(res["resource_version"], res)
            self.assertGreaterEqual(res["lists"], 1, res)
        # The table for people names the same kinds.
        r = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "k8s"], 20)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("leader: this gateway", r.stdout)
        self.assertIn("endpointslices", r.stdout)

    def scrape(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return test_metrics.parse_exposition(r.read().decode())

    def test_01d_node_heartbeats_cause_no_work_and_no_writes(self):
        # The test API server updates every Node's lastHeartbeatTime each second, as kubelets do:
        # egwd sees the events and neither republishes its policy nor writes anything but Leases.
        v = test_metrics.value
        self.wait_host("web", NODE, hold=0)  # precondition
        self.wait_labelled([NODE], hold=0)
        time.sleep(1)                        # the write-backs of earlier changes have landed
        before, seen = self.scrape(), len(self.h.api.get_requests())
        time.sleep(3.5)
        after = self.scrape()
        writes = [r for r in self.h.api.get_requests()[seen:]
                  if r["user"] == harness.EGWD_USER and r["verb"] in ("create", "update", "patch", "delete")
                  and "/leases/" not in r["path"]]
        self.assertEqual(writes, [])
        self.assertGreaterEqual(v(after, "egw_k8s_watch_events_total", resource="nodes")
                                - v(before, "egw_k8s_watch_events_total", resource="nodes"), 3)
        self.assertEqual(v(after, "egw_config_generation"), v(before, "egw_config_generation"))

    def test_01c_metrics_report_every_resource_synced_watching_and_this_gateway_leading(self):
        v = test_metrics.value
        # Write-backs are asynchronous to the traffic the earlier tests waited for: let the
        # status and label PATCHes for web land before reading their counters.
        self.wait_host("web", NODE, hold=0)  # precondition
        self.wait_labelled([NODE], hold=0)
        f = self.scrape()
        now = time.time()
        for res in RESOURCES:
            self.assertEqual(v(f, "egw_k8s_synced", resource=res), 1, res)
            self.assertEqual(v(f, "egw_k8s_watch_open", resource=res), 1, res)
            self.assertAlmostEqual(v(f, "egw_k8s_last_sync_timestamp_seconds", resource=res), now, delta=5)
            self.assertEqual(v(f, "egw_k8s_relists_total", resource=res), 0, res)
            self.assertEqual(v(f, "egw_k8s_list_failures_total", resource=res), 0, res)
            for reason in ("closed", "expired", "error"):   # watches last 5-10 minutes
                self.assertEqual(v(f, "egw_k8s_watch_restarts_total", resource=res, reason=reason), 0, (res, reason))
        self.assertGreaterEqual(v(f, "egw_k8s_watch_events_total", resource="egressservices"), 1)
        self.assertGreaterEqual(v(f, "egw_k8s_watch_events_total", resource="leases"), 1)  # gw-2 renews
        self.assertEqual(v(f, "egw_leader"), 1)
        self.assertEqual(v(f, "egw_leader_transitions_total"), 1)
        self.assertEqual(v(f, "egw_election_live_gateways"), 2)         # gw-1 (egwd) and gw-2 (the test)
        self.assertEqual(v(f, "egw_election_assigned_services"), 1)     # web, on gw-1
        self.assertGreaterEqual(v(f, "egw_election_lease_renewals_total"), 1)
        self.assertGreaterEqual(v(f, "egw_k8s_writes_total", object="status"), 1)
        self.assertGreaterEqual(v(f, "egw_k8s_writes_total", object="node_labels"), 1)
        self.assertEqual(v(f, "egw_k8s_write_failures_total", object="status"), 0)
        self.assertEqual(v(f, "egw_k8s_write_failures_total", object="node_labels"), 0)
        # The figures are the same ones `show k8s` prints (those that cannot move in between).
        r = run([str(EGWCTL), "-p", FILE_PREFIX, "--json", "show", "k8s"], 20)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        resources = json.loads(r.stdout)["resources"]
        # `show k8s` also lists EgressIP's reflectors, which have no metrics yet.
        self.assertEqual(sorted(res["resource"] for res in resources), sorted(RESOURCES + EGRESS_IP_RESOURCES))
        for res in resources:
            if res["resource"] in EGRESS_IP_RESOURCES:
                self.assertTrue(res["synced"] and res["watching"], res)
                continue
            name = res["resource"]
            self.assertEqual(res["lists"] - 1, v(f, "egw_k8s_relists_total", resource=name), res)
            self.assertEqual(res["list_failures"], v(f, "egw_k8s_list_failures_total", resource=name), res)
            self.assertEqual((res["watch_closed"], res["expired"], res["watch_failures"]),
                             tuple(v(f, "egw_k8s_watch_restarts_total", resource=name, reason=reason)
                                   for reason in ("closed", "expired", "error")), res)

    def test_02_network_egress_service_routes_in_its_vrf_on_every_gateway(self):
        self.h.api.upsert(egress_service("db", "Network", network="blue"))
        self.wait_host("db", "ALL")
        self.wait_seen_from(DB_POD, EXT2, EXT2_GW)

    def test_03_moving_the_host_away_stops_translation_and_back_restarts_it(self):
        self.wait_host("web", NODE, hold=0)  # precondition
        self.h.api.patch_spec("web", selector(OTHER))
        self.wait_host("web", OTHER)
        self.wait_labelled([OTHER])
        # egwd no longer serves web: its pods get the default action (masquerade to ext1).
        took = self.wait_seen_from(WEB_PODS[0], EXT1, EXT1_GW)

        def unprogrammed():   # the status file is rewritten every 500 ms
            status = self.read_status() or {}
            web = [s for s in status.get("services", []) if s["key"] == "default/web"]
            stale = [s for s in status.get("sessions", []) if s.get("outside", "").startswith(WEB_INGRESS + ":")]
            return web and not web[0]["programmed"] and web[0]["status_host"] == OTHER and not stale
        harness.eventually_consistently(
            unprogrammed, CONVERGE_TIMEOUT, HOLD_TRANSLATION,
            lambda: f"web still programmed, or sessions still translating to {WEB_INGRESS}, after the "
            f"host moved\n{self.diag()}")

        self.h.api.patch_spec("web", selector(NODE))
        back = self.wait_seen_from(WEB_PODS[0], EXT1, WEB_INGRESS)
        self.wait_labelled([NODE])
        print(f"\n  host moved away -> stopped in {took:.2f} s, moved back -> translating in {back:.2f} s",
              file=sys.stderr)

    def test_04_a_new_endpoint_is_translated_and_a_removed_one_is_not(self):
        self.wait_host("web", NODE, hold=0)  # precondition
        self.wait_seen_from(NEW_POD, EXT1, EXT1_GW)
        self.h.api.upsert(endpoint_slice("web-abc12", "web", [*WEB_PODS, NEW_POD]))
        self.wait_seen_from(NEW_POD, EXT1, WEB_INGRESS)
        self.h.api.upsert(endpoint_slice("web-abc12", "web", WEB_PODS))
        self.wait_seen_from(NEW_POD, EXT1, EXT1_GW)
        self.wait_seen_from(WEB_PODS[0], EXT1, WEB_INGRESS)

    def test_05_when_the_other_gateway_dies_its_service_comes_back_here(self):
        self.h.api.patch_spec("web", selector(None))    # any gateway node
        self.wait_host("web", NODE)                           # sticky: it stays here
        self.h.api.patch_spec("web", selector(OTHER))
        self.wait_host("web", OTHER)
        self.h.api.patch_spec("web", selector(None))    # both qualify again; it stays on gw-2
        harness.hold(lambda: self.host("web") == OTHER, HOLD_STATE,
                     lambda: f"web moved off {OTHER} while it stayed eligible: {self.host('web')!r}")
        self.renewing.clear()                          # gw-2 stops renewing its Lease
        self.addCleanup(self.renewing.set)
        self.wait_host("web", NODE, timeout=3 + CONVERGE_TIMEOUT)
        self.wait_labelled([NODE])
        self.wait_seen_from(WEB_PODS[0], EXT1, WEB_INGRESS)

    def test_06_deleting_the_egress_service_removes_its_label_and_translation(self):
        self.wait_host("web", NODE, hold=0)  # precondition
        self.h.api.delete("EgressService", "web")
        self.wait_labelled([])
        self.wait_seen_from(WEB_PODS[0], EXT1, EXT1_GW)

    def test_07_watch_restarts_are_counted_by_reason_and_410_costs_a_relist(self):
        v = test_metrics.value

        def counts():
            f = self.scrape()
            return {res: {"closed": v(f, "egw_k8s_watch_restarts_total", resource=res, reason="closed"),
                          "expired": v(f, "egw_k8s_watch_restarts_total", resource=res, reason="expired"),
                          "error": v(f, "egw_k8s_watch_restarts_total", resource=res, reason="error"),
                          "relists": v(f, "egw_k8s_relists_total", resource=res),
                          "open": v(f, "egw_k8s_watch_open", resource=res)} for res in RESOURCES}

        def step(action, reason, relists):
            before = counts()
            self.assertTrue(all(c["open"] == 1 for c in before.values()), before)
            action()
            want = {res: {**c, reason: c[reason] + 1, "relists": c["relists"] + relists, "open": 1}
                    for res, c in before.items()}
            self.wait_for(lambda: counts() == want, 10,
                          lambda: f"after {reason}: want {want}\ngot {counts()}\n{tail(self.egwd_log_path)}")

        # The server ends every watch at its timeout: egwd resumes from its resourceVersion.
        step(lambda: self.h.api.control("close-watches"), "closed", 0)
        # A cut connection: backoff, then resume, still without a list.
        step(lambda: self.h.api.control("close-watches", {"abort": True}), "error", 0)
        # History compacted under open watches: ERROR 410, and each resource lists again.
        step(lambda: self.h.api.control("compact", {"expireWatches": True}), "expired", 1)
        # Still programmed from the relisted state.
        self.wait_seen_from(DB_POD, EXT2, EXT2_GW)
        # `show k8s` tells the same story: one watch end of each kind per resource.
        table = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "k8s"], 20).stdout
        for res in RESOURCES:
            row = next((line for line in table.splitlines() if line.startswith(res)), "")
            self.assertRegex(row, r"\s1/1/1\s", table)

    def test_08_dashboards_use_only_metrics_this_egwd_exports_and_every_family_is_documented(self):
        # A kubernetes-source egwd exports every family, its own and the Kubernetes ones.
        families = self.scrape()
        self.assertEqual(test_metrics.dashboard_metrics_not_exported(families), {})
        doc = (REPO / "docs" / "metrics.md").read_text()
        for name in families:
            self.assertIn(f"| `{name}` |", doc, f"{name} is missing from docs/metrics.md")

    def test_09_a_dual_stack_service_translates_both_families_and_says_so_per_family(self):
        """A Service with ipFamilies IPv4+IPv6, an ingress IP and an EndpointSlice of each family:
        the host is elected and labelled as for any Service, a pod's TCP of each family reaches
        ext1's host from the ingress IP of its family (NAPT44 and NAPT66), consistently, and
        status, CLI and metrics say per family what is done. Then without its IPv4 ingress IP the
        Service keeps its host, says the IPv4 side is not translated, and its IPv6 pod still leaves
        with the IPv6 ingress IP while its IPv4 pod takes the default action."""
        api = self.h.api
        # The Service's first pod of each family, on the pods host beside the demo's.
        for address in (f"{DUAL_PODS[0]}/24", f"{DUAL_PODS[1]}/64"):
            r = run(["ip", "-n", ns("pods"), "addr", "add", address, "dev", "eth0"]
                    + (["nodad"] if ":" in address else []), 10)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.addCleanup(run, ["ip", "-n", ns("pods"), "addr", "del", address, "dev", "eth0"], 10)
        svc = harness.lb_service("dual", DUAL_INGRESS[0], "10.96.0.70")
        svc["spec"]["clusterIPs"] = ["10.96.0.70", "fd00:10:96::70"]
        svc["spec"]["ipFamilies"] = ["IPv4", "IPv6"]
        svc["spec"]["ipFamilyPolicy"] = "RequireDualStack"
        svc["status"]["loadBalancer"]["ingress"] = [{"ip": DUAL_INGRESS[0]}, {"ip": DUAL_INGRESS[1]}]
        v6 = harness.endpoint_slice("dual-v6", "dual", DUAL_PODS[1:])
        v6["addressType"] = "IPv6"
        api.upsert(svc)
        api.upsert(harness.endpoint_slice("dual-v4", "dual", DUAL_PODS[:1]))
        api.upsert(v6)
        api.upsert(egress_service("dual", host=NODE))
        dual_label = "egress-service.k8s.ovn.org/default-dual"

        def entry():
            return next((s for s in (self.read_status() or {}).get("services", []) if s["key"] == "default/dual"), {})

        def labelled():
            nodes = api.get("/api/v1/nodes") or {"items": []}
            return sorted(n["metadata"]["name"] for n in nodes["items"] if dual_label in (n["metadata"].get("labels") or {}))

        try:
            self.wait_host("dual", NODE)
            harness.eventually_consistently(lambda: labelled() == [NODE], CONVERGE_TIMEOUT, HOLD_STATE,
                                            lambda: f"{dual_label} on {labelled()}\n{self.diag()}")
            want = {"programmed": True, "ingress_ip": DUAL_INGRESS[0], "ingress_ipv6": DUAL_INGRESS[1],
                    "endpoints": 1, "endpoints_ipv6": 2, "ip_families": ["IPv4", "IPv6"],
                    "ip_family_policy": "RequireDualStack", "ipv4": f"SNAT to {DUAL_INGRESS[0]}",
                    "ipv6": f"SNAT to {DUAL_INGRESS[1]}"}
            self.wait_for(lambda: all(entry().get(k) == v for k, v in want.items()), CONVERGE_TIMEOUT,
                          lambda: f"status of default/dual: {entry()}, expected {want}\n{self.diag()}")

            r = run([str(EGWCTL), "-p", FILE_PREFIX, "--json", "show", "service", "default/dual"], 20)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual(j["ingress_ipv4"], DUAL_INGRESS[0])
            self.assertEqual(j["ingress_ipv6"], DUAL_INGRESS[1])
            self.assertEqual(j["ip_families"], ["IPv4", "IPv6"])
            self.assertEqual(j["families"], {"IPv4": want["ipv4"], "IPv6": want["ipv6"]})
            self.assertEqual(sorted(j["endpoints"]), sorted([DUAL_PODS[0], DUAL_PODS[1], DUAL_PODS[2]]))
            r = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "service", "default/dual"], 20)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1].strip() for ln in r.stdout.splitlines() if " " in ln}
            self.assertEqual(lines.get("IPv4"), want["ipv4"], r.stdout)
            self.assertEqual(lines.get("IPv6"), want["ipv6"], r.stdout)
            self.assertEqual(lines.get("ipFamilies"), "IPv4, IPv6 (RequireDualStack)", r.stdout)

            v = test_metrics.value
            f = self.scrape()
            self.assertEqual(v(f, "egw_service_family_translated", namespace="default", service="dual", family="IPv4"), 1)
            self.assertEqual(v(f, "egw_service_family_translated", namespace="default", service="dual", family="IPv6"), 1)
            self.assertEqual(v(f, "egw_service_family_endpoints", namespace="default", service="dual", family="IPv6"), 2)

            # Through the data plane: each family's pod leaves with its family's ingress IP.
            self.wait_seen_from(DUAL_PODS[0], EXT1, DUAL_INGRESS[0])
            self.wait_seen_from(DUAL_PODS[1], EXT1_V6, DUAL_INGRESS[1])

            # Only an IPv6 ingress IP left: the host stays (an ingress IP and pod endpoints remain),
            # the IPv4 side is no longer translated and says why.
            svc["status"]["loadBalancer"]["ingress"] = [{"ip": DUAL_INGRESS[1]}]
            api.upsert(svc)
            want4 = "not translated: no IPv4 ingress IP (the IPv4 data plane needs one)"
            self.wait_for(lambda: entry().get("ipv4") == want4 and entry().get("programmed") is False
                          and entry().get("ingress_ip") == "", CONVERGE_TIMEOUT,
                          lambda: f"status of default/dual: {entry()}\n{self.diag()}")
            self.wait_host("dual", NODE)
            self.wait_seen_from(DUAL_PODS[1], EXT1_V6, DUAL_INGRESS[1])
            self.wait_seen_from(DUAL_PODS[0], EXT1, EXT1_GW)   # the default action: masquerade
        finally:
            api.delete("EgressService", "dual")
            api.delete("EndpointSlice", "dual-v6")
            api.delete("EndpointSlice", "dual-v4")
            api.delete("Service", "dual")
        harness.eventually_consistently(lambda: labelled() == [], CONVERGE_TIMEOUT, HOLD_STATE,
                                        lambda: f"{dual_label} still on {labelled()}\n{self.diag()}")

    def test_10_egress_ip_sources_follow_namespace_and_pod_relabels(self):
        # Sources and selection only: what egwd holds is read from `show k8s` and its log, since
        # nothing of EgressIP reaches the data plane yet.
        api = self.h.api

        def selected():
            r = run([str(EGWCTL), "-p", FILE_PREFIX, "--json", "show", "k8s"], 20)
            j = json.loads(r.stdout)["egress_ips"] if r.returncode == 0 else {}
            return {e["name"]: (e["namespaces"], e["pods"], e["pod_ips"]) for e in j.get("selected", [])}

        def expect(want, what):
            self.wait_for(lambda: selected().get("eip-shop") == want, CONVERGE_TIMEOUT,
                          lambda: f"{what}: want {want}, got {selected()}\n{tail(self.egwd_log_path)}")

        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": "shop", "name": "web-1", "labels": {"app": "web"}},
               "spec": {"nodeName": "worker-1"},
               "status": {"phase": "Running", "podIPs": [{"ip": "10.128.7.5"}, {"ip": "fd00:10:128::7:5"}]}}
        try:
            api.upsert({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {}}})
            api.upsert(pod)
            api.upsert({"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": {"name": "eip-shop"},
                        "spec": {"egressIPs": ["192.0.2.70", "2001:db8::70"],
                                 "namespaceSelector": {"matchLabels": {"egress": "shop"}},
                                 "podSelector": {"matchExpressions": [{"key": "app", "operator": "In",
                                                                       "values": ["web"]}]}}})
            expect((0, 0, 0), "the namespace is not labelled")
            api.upsert({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": "shop", "labels": {"egress": "shop"}}})
            expect((1, 1, 2), "the namespace labelled in")
            api.upsert({**pod, "metadata": {**pod["metadata"], "labels": {"app": "db"}}})
            expect((1, 0, 0), "the pod labelled out")
            api.upsert(pod)
            expect((1, 1, 2), "the pod labelled back")
            api.upsert({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {}}})
            expect((0, 0, 0), "the namespace labelled out")
            log = self.egwd_log_path.read_text(errors="replace")
            self.assertIn("EgressIP eip-shop (192.0.2.70, 2001:db8::70) selects", log)
            table = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "k8s"], 20).stdout
            self.assertIn("EgressIP (sources only, not served yet): 1 object(s)", table)
            self.check_egress_ip_assignment()
        finally:
            self.label_node(EGRESS_ASSIGNABLE, None)
            api.delete("EgressIP", "eip-shop", namespace="")
            api.delete("Pod", "web-1", namespace="shop")
            api.delete("Namespace", "shop", namespace="")
        self.wait_for(lambda: "eip-shop" not in selected(), CONVERGE_TIMEOUT, lambda: f"{selected()}")

    def label_node(self, key, value):
        """Sets (None: removes) one label of egwd's Node, as `kubectl label` does."""
        code, out = self.h.api.request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {key: value}}},
                                       "application/merge-patch+json")
        self.assertEqual(code, 200, out)

    def check_egress_ip_assignment(self):
        # egwd leads: once its node is egress-assignable it takes 192.0.2.70 (on ext1's subnet);
        # 2001:db8::70 is on no gateway's subnet and is reported once, never written. The first
        # status write meets a 409, so the write reads the object back (a list by name) before it
        # writes again.
        api = self.h.api
        path = "/apis/k8s.ovn.org/v1/egressips/eip-shop"
        unhostable = "EgressIP eip-shop: 2001:db8::70 is not assigned: no node has an outside subnet that contains it"
        self.wait_for(lambda: unhostable in self.egwd_log_path.read_text(errors="replace"), CONVERGE_TIMEOUT,
                      lambda: f"2001:db8::70 not reported\n{tail(self.egwd_log_path)}")
        before = len(api.get_requests())
        api.control("faults", {"errors": [{"count": 1, "code": 409, "path": path, "verb": "patch"}]})
        self.label_node(EGRESS_ASSIGNABLE, "")
        want = [{"node": NODE, "egressIP": "192.0.2.70"}]

        def items():
            return ((api.get(path) or {}).get("status") or {}).get("items")
        harness.eventually_consistently(lambda: items() == want, CONVERGE_TIMEOUT, HOLD_STATE,
                                        lambda: f"status.items {items()}, want {want}\n{tail(self.egwd_log_path)}")
        log = self.egwd_log_path.read_text(errors="replace")
        self.assertEqual(log.count(unhostable), 1, "reported once")
        # The read back is a list by name (the request log keeps no query; the reflector's watch is
        # a watch, and it does not relist while its stream is unbroken).
        sent = [(r["verb"], r["code"]) for r in api.get_requests()[before:]
                if r["user"] == harness.EGWD_USER and r["verb"] in ("patch", "list")
                and r["path"] in (path, "/apis/k8s.ovn.org/v1/egressips")]
        self.assertEqual(sent, [("patch", 409), ("list", 200), ("patch", 200)])
        # The seam the data path will read (the status file), and the CLI.
        self.wait_for(lambda: (self.read_status() or {}).get("egress_ips", {}).get("assigned_here") ==
                      [{"name": "eip-shop", "egress_ip": "192.0.2.70"}], CONVERGE_TIMEOUT,
                      lambda: f"status file: {(self.read_status() or {}).get('egress_ips')}")
        table = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "egressips"], 20).stdout
        self.assertRegex(table, rf"eip-shop +192\.0\.2\.70 +{NODE} ")
        self.assertRegex(table, r"eip-shop +2001:db8::70 +unassigned: no node has an outside subnet that contains it")
        self.assertIn("assigned to this gateway: 1 address(es)", table)

    def test_11_egress_firewalls_are_read_and_shown_not_enforced_by_default(self):
        # Under Kubernetes policy.egress_firewall is off unless configured: the objects and the pods
        # they apply to are read and shown (show egressfirewall), nothing is filtered.
        api = self.h.api

        def shown():
            r = run([str(EGWCTL), "-p", FILE_PREFIX, "--json", "show", "egressfirewall"], 20)
            return json.loads(r.stdout) if r.returncode == 0 else {}

        def shop():
            return next((n for n in shown().get("namespaces", []) if n["namespace"] == "shop"), None)

        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "shop", "name": "web-1"},
               "spec": {"nodeName": "worker-1"},
               "status": {"phase": "Running", "podIPs": [{"ip": "10.128.7.5"}, {"ip": "fd00:10:128::7:5"}]}}
        fw = {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressFirewall",
              "metadata": {"namespace": "shop", "name": "default"},
              "spec": {"egress": [{"type": "Allow", "to": {"cidrSelector": "192.0.2.0/24"},
                                   "ports": [{"protocol": "TCP", "port": 443}]},
                                  {"type": "Allow", "to": {"dnsName": "*.example.com"}},
                                  {"type": "Deny", "to": {"cidrSelector": "0.0.0.0/0"}}]}}
        # What the cluster's DNS resolved for the wildcard, as CoreDNS's plugin writes it: a
        # wildcard rule stands for these addresses (egwd watches DNSNameResolver objects once a
        # wildcard rule appears).
        resolver = {"apiVersion": "network.openshift.io/v1alpha1", "kind": "DNSNameResolver",
                    "metadata": {"namespace": "openshift-ovn-kubernetes", "name": "dns-wild"},
                    "spec": {"name": "*.example.com."},
                    "status": {"resolvedNames": [
                        {"dnsName": "www.example.com.",
                         "resolvedAddresses": [{"ip": "203.0.113.80", "ttlSeconds": 300,
                                                "lastLookupTime": "2026-12-07T10:00:00Z"}]}]}}
        try:
            api.upsert({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {}}})
            api.upsert(pod)
            api.upsert(fw)
            api.control("upsert", resolver)
            self.wait_for(lambda: (shop() or {}).get("pod_ips") == 2, CONVERGE_TIMEOUT,
                          lambda: f"shop's EgressFirewall not shown: {shown()}\n{tail(self.egwd_log_path)}")
            j = shown()
            self.assertFalse(j["enforcing"], j)
            rules = shop()["rules"]
            self.assertEqual([(r["type"], r["to"], r["ports"]) for r in rules],
                             [("Allow", "cidrSelector 192.0.2.0/24", "TCP/443"), ("Allow", "dnsName *.example.com", ""),
                              ("Deny", "cidrSelector 0.0.0.0/0", "")])
            self.wait_for(lambda: ((shop() or {}).get("rules") or [{}, {}])[1].get("addresses") == ["203.0.113.80/32"],
                          CONVERGE_TIMEOUT, lambda: f"the wildcard's addresses not shown: {shop()}")
            table = run([str(EGWCTL), "-p", FILE_PREFIX, "show", "egressfirewall", "shop"], 20).stdout
            self.assertIn("enforcement: off", table)
            self.assertIn("shop/default: EgressFirewall Rules applied, 2 pod address(es)", table)
            self.assertIn("EgressFirewall shop/default: 3 rule(s) read, not enforced",
                          self.egwd_log_path.read_text(errors="replace"))
        finally:
            api.delete("EgressFirewall", "default", namespace="shop")
            api.delete("DNSNameResolver", "dns-wild", namespace="openshift-ovn-kubernetes")
            api.delete("Pod", "web-1", namespace="shop")
            api.delete("Namespace", "shop", namespace="")
        self.wait_for(lambda: shop() is None, CONVERGE_TIMEOUT, lambda: f"{shown()}")

    def test_98_rbac_grants_exactly_what_egwd_asked_for(self):
        # The test API server authorizes egwd with docker/k8s/rbac.yaml and logs every request with
        # its user: what egwd sent during this suite is what it needs. Nothing it sent may have been
        # refused (no less), and every verb the manifest grants must have been used (no more).
        import apiserver as test_apiserver  # tests/apiserver/apiserver.py: its URL parser
        sent = [r for r in self.h.api.get_requests() if r["user"] == harness.EGWD_USER]
        self.assertGreater(len(sent), 10)
        self.assertEqual([r for r in sent if r["code"] in (401, 403)], [], "egwd was refused")
        used = set()
        for r in sent:
            route = test_apiserver.parse_path(r["path"])
            if route[0] == "api":
                _, res, ns, _, sub = route
                used.add((res.group, res.plural + ("/" + sub if sub else ""), r["verb"], ns or ""))
        granted, unused = set(), []
        for doc in harness.debian_module("yaml").safe_load_all(harness.RBAC.read_text()):
            if not doc or doc["kind"] not in ("ClusterRole", "Role"):
                continue
            scope = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for res in rule["resources"]:
                        for verb in rule["verbs"]:
                            granted.add((group, res, verb))
                            if not any(u[:3] == (group, res, verb) and scope in (None, u[3]) for u in used):
                                unused.append(f"{doc['kind']} {doc['metadata']['name']}: {verb} {res} "
                                              f"in API group {group!r}")
        self.assertEqual(unused, [], "docker/k8s/rbac.yaml grants what egwd never asked for")
        self.assertEqual({u[:3] for u in used} - granted, set())
        print(f"\n  egwd used {len(used)} (group, resource, verb, namespace) combinations, all granted",
              file=sys.stderr)

    def test_99_egwd_stops_cleanly_and_hands_the_leader_lease_back(self):
        code = stop_process(self.h.egwd)
        self.assertEqual(code, 0, tail(self.egwd_log_path))
        lease = self.h.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/egw-leader")
        self.assertIsNotNone(lease)
        self.assertEqual(lease["spec"].get("holderIdentity", ""), "", lease)


if __name__ == "__main__":
    unittest.main()
