# SPDX-License-Identifier: Apache-2.0
"""Two full egwd processes as two gateways of one cluster, against the test API server.

Each egwd runs on two net_null ports (no traffic) with its own DPDK file prefix and its own node
(gw-1, gw-2). The test checks what only whole processes show: the leader is elected among the
daemons and alone writes status.host and the node label, each daemon programs its data plane from
status.host (its --status-file), a leader killed with SIGKILL is replaced and the Service keeps or
regains a host within the bound docs/kubernetes.md states for egwd's default timings, and a host
stopped with SIGTERM gives its Leases up so that the Service moves within a second. The EgressIP
test checks the leader's status.items: one address of an object per node, an address no gateway
can host reported and not written, moves on a lost label and on a kill -9, stickiness otherwise.
tests/unit/k8s_source/test_cluster.cpp covers the rules with three controllers in one process.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_cluster.py
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import harness  # noqa: E402
from harness import (GATEWAY_LABEL, ApiServer, egress_service, endpoint_slice, lb_service, node,  # noqa: E402
                     stop_process, tail)

LEASE_NS = "egw-system"
# egwd's default timings (docs/kubernetes.md, Timings): 2 s Leases, 500 ms retries, a grace period
# of two retries before a new leader that took an unreleased Lease decides.
LEASE_S = 2
RETRY_S = 0.5
GRACE_S = 2 * RETRY_S
KILL_BOUND = LEASE_S + RETRY_S + GRACE_S     # 3.5 s: the leader dies -> its Services have a host
STOP_BOUND = 1.0                             # SIGTERM of the host -> its Services have moved
NODES = ("gw-1", "gw-2")
LABEL = "egress-service.k8s.ovn.org/default-web"
HOLD = 2.0          # status.host and the label, once right, must stay so ("consistently")
EGRESS_ASSIGNABLE = "k8s.ovn.org/egress-assignable"


def egwd_config(node_name, kubeconfig, file_prefix):
    return {
        "eal": {"lcores": "0-1", "main_lcore": 0, "no_huge": True, "memory_mb": 256, "file_prefix": file_prefix,
                "vdevs": ["net_null0,no-rx=1", "net_null1,no-rx=1"]},
        "workers": [1],
        "mempool": {"mbufs": 2047},
        "sessions": {"max": 4096},
        "ports": [
            {"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.244.1.1/24"],
             "mac": "02:e9:00:00:00:01"},
            {"name": "ext1", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24"],
             "mac": "02:e9:00:00:00:03"}],
        "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
        "node": {"name": node_name},
        "state": {"source": "kubernetes", "kubeconfig": str(kubeconfig), "lease_namespace": LEASE_NS},
    }


class TwoGateways(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("egwd needs root for its DPDK runtime directory")
        self.egwd_bin = harness.egwd_binary()
        harness.require_binaries(self.egwd_bin)
        self.workdir = Path(tempfile.mkdtemp(prefix="egw-cluster-"))
        self.addCleanup(self.cleanup)
        self.procs, self.logs, self.prefixes = {}, {}, []
        self.api = ApiServer(self.workdir)
        self.kubeconfig = self.api.write_kubeconfig(self.workdir / "kubeconfig")
        for n in NODES:
            self.api.upsert(node(n))
        self.api.upsert(lb_service("web", "192.0.2.50", "10.96.0.50"))
        self.api.upsert(endpoint_slice("web-abc12", "web", ["10.244.1.10", "10.244.1.11"]))
        self.api.upsert(egress_service("web", node_selector=GATEWAY_LABEL))

    def cleanup(self):
        for proc in self.procs.values():
            stop_process(proc, signal.SIGKILL, grace=5)
        for log in self.logs.values():
            log.close()
        if getattr(self, "api", None):
            self.api.stop()
        for prefix in self.prefixes:
            harness.remove_dpdk_runtime_dir(prefix)
        harness.remove_workdir(self.workdir, "cluster e2e")

    # --- helpers ---------------------------------------------------------------------------

    def start(self, node_name, *flags):
        prefix = f"egw-cluster-{os.getpid()}-{node_name}"
        self.prefixes.append(prefix)
        cfg = self.workdir / f"{node_name}.json"
        cfg.write_text(json.dumps(egwd_config(node_name, self.kubeconfig, prefix), indent=2))
        if node_name in self.logs:
            self.logs[node_name].close()   # a restart: the old log is of a dead process
        self.logs[node_name] = open(self.workdir / f"{node_name}.log", "w")
        self.procs[node_name] = harness.spawn(
            [str(self.egwd_bin), "-c", str(cfg), "--status-file", str(self.workdir / f"{node_name}.status.json"),
             *flags],
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=self.logs[node_name], stderr=subprocess.STDOUT)

    def log(self, node_name):
        return (self.workdir / f"{node_name}.log").read_text(errors="replace")

    def status(self, node_name):
        try:
            return json.loads((self.workdir / f"{node_name}.status.json").read_text())
        except (OSError, ValueError):
            return {}

    def web_state(self, node_name):
        for s in self.status(node_name).get("services", []):
            if s["key"] == "default/web":
                return s
        return None

    def host(self):
        es = self.api.get("/apis/k8s.ovn.org/v1/namespaces/default/egressservices/web") or {}
        return (es.get("status") or {}).get("host")

    def labelled(self):
        nodes = self.api.get("/api/v1/nodes") or {"items": []}
        return sorted(n["metadata"]["name"] for n in nodes["items"] if LABEL in (n["metadata"].get("labels") or {}))

    def leaders(self):
        return [n for n in self.procs if self.procs[n].poll() is None and "became the leader" in self.log(n)
                and "no longer the leader" not in self.log(n)]

    def wait_for(self, predicate, timeout, message, interval=0.1):
        def with_logs():
            logs = "\n".join(f"--- {n} ---\n{tail(self.workdir / f'{n}.log', 25)}" for n in self.procs)
            return f"{message() if callable(message) else message}\n{logs}"
        return harness.wait_for(predicate, timeout, with_logs, interval)

    def consistently(self, predicate, timeout, message, duration=HOLD):
        """The state comes within `timeout` and then holds for `duration` seconds."""
        def with_logs():
            logs = "\n".join(f"--- {n} ---\n{tail(self.workdir / f'{n}.log', 25)}" for n in self.procs)
            return f"{message() if callable(message) else message} (for {duration:g}s)\n{logs}"
        harness.eventually_consistently(predicate, timeout, duration, with_logs)

    def writes_in_log(self, node_name):
        """status.host and label writes this egwd logged (only a leader writes)."""
        text = self.log(node_name)
        return (len(re.findall(rf"egw {node_name}: \S+ status\.host=", text)),
                len(re.findall(rf"egw {node_name}: node \S+ labels ", text)))

    # --- the test --------------------------------------------------------------------------

    def test_leader_elected_then_killed_then_stopped(self):
        for n in NODES:
            self.start(n)
        self.wait_for(lambda: len(self.leaders()) == 1, 15, "no single leader among the two egwd")
        self.wait_for(lambda: self.host() in NODES, 10, lambda: f"status.host is {self.host()!r}")
        hosted = self.host()
        self.consistently(lambda: self.host() == hosted and self.labelled() == [hosted], 10,
                          lambda: f"status.host is {self.host()!r}, label on {self.labelled()}, want {hosted}")
        other = next(n for n in NODES if n != hosted)

        # Each daemon programs from status.host: the host translates, the other does not.
        self.wait_for(lambda: (self.web_state(hosted) or {}).get("programmed") is True, 10,
                      lambda: f"{hosted} does not program web: {self.web_state(hosted)}")
        self.wait_for(lambda: (self.web_state(other) or {}).get("reason") == f"served by {hosted}", 10,
                      lambda: f"{other}: {self.web_state(other)}")
        self.assertFalse(self.web_state(other)["programmed"])

        # Only the leader wrote: the server's PATCHes are exactly the leader's logged writes.
        (leader,) = self.leaders()
        follower = next(n for n in NODES if n != leader)
        self.assertEqual(self.writes_in_log(follower), (0, 0), self.log(follower))
        patches = [r for r in self.api.get_requests() if r["verb"] == "patch" and r["code"] == 200]
        statuses, labels = self.writes_in_log(leader)
        self.assertEqual(len(patches), statuses + labels, patches)

        # SIGKILL the leader: the other takes the leader Lease over, and web keeps its host (the
        # follower) or regains one (the follower, once the dead leader's liveness Lease ran out)
        # within the documented bound, plus slack for a loaded machine.
        killed = time.monotonic()
        self.procs[leader].kill()
        self.procs[leader].wait(timeout=10)
        if hosted == follower:
            self.consistently(lambda: self.host() == follower, 0, lambda: f"status.host is {self.host()!r}",
                              duration=KILL_BOUND + 1)
        self.wait_for(lambda: self.host() == follower, KILL_BOUND + 1, lambda: f"status.host is {self.host()!r}",
                      interval=0.02)
        regained = time.monotonic() - killed
        self.wait_for(lambda: "became the leader" in self.log(follower), LEASE_S + 3,
                      f"{follower} did not take over within {LEASE_S + 3} s")
        self.consistently(lambda: self.host() == follower and self.labelled() == [follower], 5,
                          lambda: f"status.host is {self.host()!r}, label on {self.labelled()}, want {follower}")
        self.wait_for(lambda: (self.web_state(follower) or {}).get("programmed") is True, 5,
                      lambda: f"{follower} does not program web: {self.web_state(follower)}")
        if hosted == leader:
            print(f"\n  leader {leader}, web's host, killed -> web on {follower} after {regained:.2f} s",
                  file=sys.stderr)
        else:
            print(f"\n  leader {leader} killed -> web stayed on {follower} throughout ({KILL_BOUND + 1:g} s)",
                  file=sys.stderr)
        if hosted == leader:
            self.assertLess(regained, KILL_BOUND + 1)

        # The killed gateway comes back; then SIGTERM web's host (the leader now): it gives its
        # liveness and leader Leases up before it stops, and web moves within a second.
        self.start(leader)
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/"
        self.wait_for(lambda: ((self.api.get(lease_path + f"egw-node-{leader}") or {}).get("spec") or {})
                      .get("holderIdentity") == leader, 15, f"{leader} did not take its liveness Lease")
        time.sleep(LEASE_S)   # every egwd has seen it renewed
        stopped = time.monotonic()
        self.procs[follower].send_signal(signal.SIGTERM)
        self.wait_for(lambda: self.host() == leader, STOP_BOUND + 2, lambda: f"status.host is {self.host()!r}",
                      interval=0.02)
        moved = time.monotonic() - stopped
        code = stop_process(self.procs[follower], signal.SIGTERM)
        self.assertEqual(code, 0, tail(self.workdir / f"{follower}.log"))
        print(f"  host {follower} stopped with SIGTERM -> web on {leader} after {moved:.2f} s", file=sys.stderr)
        self.assertLess(moved, STOP_BOUND)
        self.consistently(lambda: self.host() == leader and self.labelled() == [leader], 5,
                          lambda: f"status.host is {self.host()!r}, label on {self.labelled()}, want {leader}")
        gone = self.api.get(lease_path + f"egw-node-{follower}")
        self.assertEqual(gone["spec"].get("holderIdentity", ""), "", gone)
        lead = self.api.get(lease_path + "egw-leader")
        self.assertEqual(lead["spec"].get("holderIdentity", ""), leader, lead)

    # --- EgressIP ----------------------------------------------------------------------------

    def egress_ip_items(self, name):
        """status.items of EgressIP `name` as {address: node}."""
        eip = self.api.get(f"/apis/k8s.ovn.org/v1/egressips/{name}") or {}
        return {i["egressIP"]: i["node"] for i in (eip.get("status") or {}).get("items") or []}

    def set_assignable(self, node_name, assignable):
        labels = {EGRESS_ASSIGNABLE: "" if assignable else None}
        code, out = self.api.request("PATCH", f"/api/v1/nodes/{node_name}", {"metadata": {"labels": labels}},
                                     "application/merge-patch+json")
        self.assertEqual(code, 200, out)

    def assigned_here(self, node_name):
        return sorted(a["egress_ip"] for a in (self.status(node_name).get("egress_ips") or {}).get("assigned_here", []))

    def test_egress_ip_assignment_follows_liveness_and_the_label(self):
        # Both gateways are egress-assignable with ext1 on 192.0.2.0/24. eip-a has two addresses
        # there (one per node: never two of one object on a node) and one on no gateway's subnet
        # (reported once, never written); eip-b has one more, which goes where there is room.
        for n in NODES:
            self.set_assignable(n, True)
        selector = {"namespaceSelector": {"matchLabels": {"egress": "yes"}}}
        self.api.upsert({"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": {"name": "eip-a"},
                         "spec": {"egressIPs": ["192.0.2.80", "192.0.2.81", "203.0.113.7"], **selector}})
        self.api.upsert({"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": {"name": "eip-b"},
                         "spec": {"egressIPs": ["192.0.2.82"], **selector}})
        for n in NODES:
            self.start(n)
        self.wait_for(lambda: len(self.leaders()) == 1, 15, "no single leader among the two egwd")
        a = lambda: self.egress_ip_items("eip-a")  # noqa: E731
        b = lambda: self.egress_ip_items("eip-b")  # noqa: E731
        self.wait_for(lambda: len(a()) == 2 and len(b()) == 1, 15, lambda: f"eip-a {a()}, eip-b {b()}")
        first_a, first_b = a(), b()
        self.assertEqual(sorted(first_a), ["192.0.2.80", "192.0.2.81"])
        self.assertEqual(sorted(first_a.values()), list(NODES), "one address of eip-a per node")
        # Assignments stay put over a period, not only at first sight.
        self.consistently(lambda: a() == first_a and b() == first_b, 0, lambda: f"eip-a {a()}, eip-b {b()}",
                          duration=3 * LEASE_S)
        (leader,) = self.leaders()
        unhostable = "EgressIP eip-a: 203.0.113.7 is not assigned: no node has an outside subnet that contains it"
        self.assertEqual(self.log(leader).count(unhostable), 1, tail(self.workdir / f"{leader}.log"))
        # Each gateway sees what is assigned to it (the status file, the data path's seam later).
        for n in NODES:
            want = sorted([ip for ip, host in first_a.items() if host == n] + [ip for ip, host in first_b.items()
                                                                                if host == n])
            self.wait_for(lambda: self.assigned_here(n) == want, 5,
                          lambda: f"{n} serves {self.assigned_here(n)}, want {want}")

        # The node holding eip-b loses the label: eip-b moves to the other node, and eip-a's address
        # there has no node left (the other already holds eip-a's second address).
        holder = first_b["192.0.2.82"]
        other = next(n for n in NODES if n != holder)
        self.set_assignable(holder, False)
        self.consistently(lambda: b() == {"192.0.2.82": other} and a() == {ip: n for ip, n in first_a.items()
                                                                            if n == other},
                          5, lambda: f"after {holder} lost the label: eip-a {a()}, eip-b {b()}")
        # It gets the label back: eip-a's free address returns to it; eip-b stays where it is.
        self.set_assignable(holder, True)
        self.consistently(lambda: a() == first_a and b() == {"192.0.2.82": other}, 5,
                          lambda: f"after {holder} was labelled again: eip-a {a()}, eip-b {b()}")

        # kill -9 of the gateway that holds eip-b now: it moves back within the failover bound
        # (a new leader's grace included when the leader was killed), plus slack for a loaded machine.
        killed_at = time.monotonic()
        self.procs[other].kill()
        self.procs[other].wait(timeout=10)
        self.wait_for(lambda: b() == {"192.0.2.82": holder}, KILL_BOUND + 1, lambda: f"eip-b {b()}", interval=0.02)
        moved = time.monotonic() - killed_at
        print(f"\n  {other} (leader: {other == leader}) killed -> eip-b on {holder} after {moved:.2f} s",
              file=sys.stderr)
        self.assertLess(moved, KILL_BOUND + 1)
        self.consistently(lambda: b() == {"192.0.2.82": holder} and a() == {ip: n for ip, n in first_a.items()
                                                                             if n == holder},
                          5, lambda: f"after {other} was killed: eip-a {a()}, eip-b {b()}")

    def test_egress_ip_under_external_election_is_followed_never_written(self):
        # OVN-Kubernetes' cluster manager assigns (the test writes status.items as it would): each
        # egwd serves what names its node, and none writes, even for an address it could host.
        for n in NODES:
            self.set_assignable(n, True)
        items = [{"node": "gw-2", "egressIP": "192.0.2.90"}, {"node": "gw-1", "egressIP": "192.0.2.91"}]
        self.api.upsert({"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": {"name": "eip-x"},
                         "spec": {"egressIPs": ["192.0.2.90", "192.0.2.91", "192.0.2.92"],
                                  "namespaceSelector": {"matchLabels": {"egress": "yes"}}},
                         "status": {"items": items}})
        for n in NODES:
            self.start(n, "--election", "external")
        self.wait_for(lambda: self.assigned_here("gw-1") == ["192.0.2.91"] and
                      self.assigned_here("gw-2") == ["192.0.2.90"], 15,
                      lambda: f"gw-1 serves {self.assigned_here('gw-1')}, gw-2 {self.assigned_here('gw-2')}")
        # The cluster manager moves 192.0.2.90 to gw-1: gw-1 follows, gw-2 lets it go.
        moved = [{"node": "gw-1", "egressIP": "192.0.2.90"}, {"node": "gw-1", "egressIP": "192.0.2.91"}]
        code, out = self.api.request("PATCH", "/apis/k8s.ovn.org/v1/egressips/eip-x", {"status": {"items": moved}},
                                     "application/merge-patch+json")
        self.assertEqual(code, 200, out)
        self.consistently(lambda: self.assigned_here("gw-1") == ["192.0.2.90", "192.0.2.91"] and
                          self.assigned_here("gw-2") == [], 5,
                          lambda: f"gw-1 serves {self.assigned_here('gw-1')}, gw-2 {self.assigned_here('gw-2')}",
                          duration=2 * LEASE_S)
        eip = self.api.get("/apis/k8s.ovn.org/v1/egressips/eip-x")
        self.assertEqual(eip["status"]["items"], moved, "192.0.2.92 stays unassigned: egwd writes nothing")
        written = [r for r in self.api.get_requests()
                   if r["user"] == harness.EGWD_USER and r["verb"] in ("patch", "update") and "egressips" in r["path"]]
        self.assertEqual(written, [])
        for n in NODES:
            self.assertNotIn("assigning EgressIPs", self.log(n))


if __name__ == "__main__":
    unittest.main()
