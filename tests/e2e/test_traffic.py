# SPDX-License-Identifier: Apache-2.0
"""Traffic under change (issue 8 §5): two egwd, each with two workers, between real kernel hosts,
while a long-lived TCP connection and a steady UDP stream from a pod keep running and the test
changes everything around them through the test API server.

Topology (built here, not by scripts/netns.sh: each gateway needs veths of its own):

    <p>-pods                       egwd gw-1 (root ns)                       <p>-ext
    lo 10.244.1.10/32 ...  g1 == <t>-p1 | pods 10.244.1.1   ext1 192.0.2.1 | <t>-x1 == g1   lo 192.0.2.100/32
                                                                                           echo :7001 udp, :7002 tcp
                           g2 == <t>-p2 | pods 10.244.1.1   ext1 192.0.2.2 | <t>-x2 == g2   capture of every packet
                                   egwd gw-2 (root ns)

The test also plays the network around the gateways: a thread follows web's status.host and
points the pod namespace's default route, and the external namespace's route to the ingress
IPs, at the host (OVN-Kubernetes reroutes a Service's pods to its host; an announcer such as
MetalLB moves the ingress IP with the node label).

tests/e2e/stream.py runs the UDP stream (numbered datagrams, echoed), the TCP stream (numbered
lines on one connection, echoed in order) and a capture in the external namespace that records,
for every packet, the time, the interface (so the gateway) and the source address. Each test then
checks every captured packet of the pod's flows against the policy of the moment: before a
change the old source, from the change's bound on the new one, in between either, per gateway
never the old one after the new one, never a third address; and the new state holds (is checked
over a period) after the bound.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_traffic.py
"""

import json
import os
import signal
import sys
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import harness  # noqa: E402
from harness import (egress_service, endpoint_slice, lb_service, node, run,  # noqa: E402
                     selector, stop_process, tail)

STREAM = HERE / "stream.py"
PREFIX = f"egwtr{os.getpid()}"               # namespaces <prefix>-pods, <prefix>-ext
TAG = harness.iface_tag("t")                 # root-side interfaces <tag>-p1, -p2, -x1, -x2
LEASE_NS = "egw-system"
GATEWAYS = ("gw-1", "gw-2")
MASQ = {"gw-1": "192.0.2.1", "gw-2": "192.0.2.2"}   # each gateway's ext1 address (the default action)
IFACE = {"gw-1": "g1", "gw-2": "g2"}                # the interface in <p>-ext (and <p>-pods) of each
POD = "10.244.1.10"                          # endpoint of default/web
OTHER_POD = "10.244.1.11"                    # endpoint of default/web too
EXT = "192.0.2.100"
INGRESS = ("192.0.2.50", "192.0.2.51")       # web's ingress IP before and after test_2
UDP_PORT, TCP_PORT = 7001, 7002
UDP_SPORT, TCP_SPORT = 45001, 45002
RATE_UDP, RATE_TCP = 50, 20                  # per second: modest, the machine has two cores

LEASE_S = 2
RETRY_MS = 250
# The bound the docs state for a change to reach the packets: a watch event is applied and
# published at once ("Policy changes reach sessions at once", docs/architecture.md; the files
# source converges within a second). On a loaded two-core machine with four busy-polling
# workers, 2 s.
BOUND = 2.0
# A dead gateway's Services move within lease_duration_s of its last renewal plus at most a
# second (docs/kubernetes.md "Timings"), then BOUND.
FAILOVER_BOUND = LEASE_S + 1 + BOUND
HOLD = 2.0                                   # the new state must hold this long ("consistently")
READY_TIMEOUT = 40.0


def ns(role):
    return f"{PREFIX}-{role}"


def policy(host, ingress):
    """The source each gateway gives the pod's packets when web is on `host` with `ingress` as
    its ingress IP (host None: no EgressService): the host translates to the ingress IP, every
    other gateway applies the default action (masquerade to its own address)."""
    return {gw: ingress if gw == host else MASQ[gw] for gw in GATEWAYS}


def ip(*args, netns=None, check=True):
    cmd = ["ip", *(["-n", netns] if netns else []), *map(str, args)]
    r = run(cmd, 20)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def sysctl(path, value, netns=None):
    cmd = ["sh", "-c", f"[ -w /proc/sys/{path} ] && echo {value} > /proc/sys/{path} || true"]
    run((["ip", "netns", "exec", netns] if netns else []) + cmd, 10)


def testpmd_verdicts(rules, file_prefix):
    """Feeds `flow validate` forms of `rules` (testpmd `flow create` lines) to dpdk-testpmd on a
    net_null port, which has no rte_flow: a rule testpmd's grammar accepts reaches the driver and
    comes back "Function not implemented", one it cannot parse gets "Bad arguments". Returns the
    count of each verdict: {"parsed": N, "bad": M}."""
    lines = []
    for r in rules:
        words = r.split()
        assert words[:2] == ["flow", "create"], r
        lines.append(" ".join(["flow", "validate", "0"] + words[3:]))
    try:
        r = run(["dpdk-testpmd", "--no-huge", "-m", "512", "--no-pci", "--vdev", "net_null0", "--file-prefix",
                 file_prefix, "-l", "0-1", "--log-level=error", "--", "-i", "--rxq=4", "--txq=4",
                 "--total-num-mbufs=2048"], 120, check=False, input="\n".join(lines + ["quit"]) + "\n")
    finally:
        harness.remove_dpdk_runtime_dir(file_prefix)
    # The driver's complaints go to stderr, the parser's to stdout: count both.
    verdicts = []
    for line in (r.stdout + "\n" + r.stderr).splitlines():
        line = line.split("testpmd> ")[-1].strip()
        if "Function not implemented" in line:
            verdicts.append("parsed")
        elif line == "Bad arguments":
            verdicts.append("bad")
    return {v: verdicts.count(v) for v in set(verdicts)}


def egwd_config(gw, kubeconfig, file_prefix):
    n = GATEWAYS.index(gw) + 1
    return {
        # Two workers on two CPUs shared with the control thread (and everything else): lcores
        # 0-2 float over CPUs 0-1. Each port has two queues, so flows spread over both workers
        # and replies are handed off between them.
        "eal": {"lcores": "(0-2)@(0-1)", "main_lcore": 0, "no_huge": True, "memory_mb": 256,
                "file_prefix": file_prefix,
                "vdevs": [f"net_af_packet0,iface={TAG}-p{n},qpairs=2",
                          f"net_af_packet1,iface={TAG}-x{n},qpairs=2"]},
        "workers": [1, 2],
        "mempool": {"mbufs": 8191},
        "ports": [
            {"name": "pods", "device": "net_af_packet0", "role": "inside", "addresses": ["10.244.1.1/24"],
             "mac": f"02:e9:0{n}:00:00:01"},
            {"name": "ext1", "device": "net_af_packet1", "role": "outside", "addresses": [f"{MASQ[gw]}/24"],
             "mac": f"02:e9:0{n}:00:00:03"}],
        "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
        "default_action": "masquerade",
        "sessions": {"max": 65536},
        "node": {"name": gw},
        "state": {"source": "kubernetes", "kubeconfig": str(kubeconfig), "lease_namespace": LEASE_NS,
                  "lease_duration_s": LEASE_S, "renew_deadline_ms": 1500, "retry_period_ms": RETRY_MS},
    }


# egw's RSS key (dataplane/flow_owner.h, Microsoft's verification key) and the owner of a flow from
# inside it gives: the Toeplitz hash of (source, destination, source port, destination port)
# through egw's redirection table (entry j: worker j mod N, over 512 entries on virtual devices).
RSS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")


def flow_owner(src, dst, sport, dport, workers):
    data = (bytes(map(int, src.split("."))) + bytes(map(int, dst.split("."))) + sport.to_bytes(2, "big")
            + dport.to_bytes(2, "big"))
    key, key_bits, h = int.from_bytes(RSS_KEY, "big"), len(RSS_KEY) * 8, 0
    for i in range(len(data) * 8):
        if data[i // 8] >> (7 - i % 8) & 1:
            h ^= (key >> (key_bits - 32 - i)) & 0xFFFFFFFF
    return (h & 511) % workers


class Rig(harness.NamespaceRig):
    """The suite's NamespaceRig with a topology of its own (two veths per namespace, one to each
    gateway) instead of scripts/netns.sh's, and the thread that moves routes after web's host."""

    def __init__(self, suite, netns=None):
        super().__init__(suite, netns)
        self.links = []
        self.namespaces = []
        self.follower = None
        self.following = threading.Event()
        self.host_changes = []
        self.at_cleanup(self.stop_following, before_processes=True)
        self.at_cleanup(self.remove_topology)

    def stop_following(self):
        self.following.clear()
        if self.follower:
            self.follower.join(timeout=5)
            self.follower = None

    def remove_topology(self):
        for link in self.links:
            run(["ip", "link", "delete", "dev", link], 10)
        self.links = []
        for n in self.namespaces:
            run(["ip", "netns", "delete", n], 10)
        self.namespaces = []

    @staticmethod
    def prefix(gw):
        return f"egw-traffic-{os.getpid()}-{gw}"

    def build_topology(self):
        for role in ("pods", "ext"):
            ip("netns", "add", ns(role))
            self.namespaces.append(ns(role))
            for key in ("all", "default"):
                sysctl(f"net/ipv6/conf/{key}/disable_ipv6", 1, ns(role))
                sysctl(f"net/ipv4/conf/{key}/rp_filter", 0, ns(role))
            ip("link", "set", "lo", "up", netns=ns(role))
        for gw in GATEWAYS:
            n = GATEWAYS.index(gw) + 1
            for role, end in (("pods", f"{TAG}-p{n}"), ("ext", f"{TAG}-x{n}")):
                inner = IFACE[gw]
                for _ in range(8):   # a random index: see harness.random_ifindex
                    r = ip("link", "add", end, "index", harness.random_ifindex(), "type", "veth",
                           "peer", "name", inner, "netns", ns(role), check=False)
                    if r.returncode == 0:
                        break
                else:
                    raise RuntimeError(f"cannot create veth {end}: {r.stderr}")
                self.links.append(end)
                sysctl(f"net/ipv6/conf/{end}/disable_ipv6", 1)
                sysctl(f"net/ipv4/conf/{end}/arp_ignore", 8)
                run(["ethtool", "-K", end, "gro", "off", "tso", "off", "gso", "off"], 10)
                ip("link", "set", end, "up")
                run(["ip", "netns", "exec", ns(role), "ethtool", "-K", inner, "tx", "off", "tso", "off",
                     "gso", "off"], 10)
                sysctl(f"net/ipv4/conf/{inner}/rp_filter", 0, ns(role))
                ip("link", "set", inner, "up", netns=ns(role))
        for a in (POD, OTHER_POD):
            ip("addr", "add", f"{a}/32", "dev", "lo", netns=ns("pods"))
        ip("addr", "add", f"{EXT}/32", "dev", "lo", netns=ns("ext"))
        for gw in GATEWAYS:
            ip("route", "add", f"{MASQ[gw]}/32", "dev", IFACE[gw], netns=ns("ext"))
        self.route_to("gw-1")

    def route_to(self, gw):
        """The network follows web's host: pods leave through it, the ingress IPs are reached
        through it."""
        ip("route", "replace", "default", "via", "10.244.1.1", "dev", IFACE[gw], "onlink", netns=ns("pods"))
        ip("route", "replace", "192.0.2.48/28", "dev", IFACE[gw], netns=ns("ext"))


class TrafficUnderChange(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = Rig.for_suite(cls, "traffic")
        rig.build_topology()

        api = rig.start_api()
        kubeconfig = api.write_kubeconfig(rig.workdir / "kubeconfig", namespace=LEASE_NS)
        for gw in GATEWAYS:
            api.upsert(node(gw))
        api.upsert(lb_service("web", INGRESS[0], "10.96.0.50"))
        api.upsert(endpoint_slice("web-abc12", "web", [POD, OTHER_POD]))
        api.upsert(egress_service("web", host="gw-1"))
        for gw in GATEWAYS:
            cfg = rig.workdir / f"{gw}.json"
            cfg.write_text(json.dumps(egwd_config(gw, kubeconfig, rig.prefix(gw)), indent=1))
            rig.start_egwd(cfg, rig.workdir / f"{gw}.status.json", rig.prefix(gw), name=gw)
        for gw in GATEWAYS:
            harness.wait_for(lambda gw=gw: cls.status(gw).get("ready") is True, READY_TIMEOUT,
                             lambda gw=gw: f"{gw} not ready\n{cls.logs_tail()}")
        harness.wait_for(lambda: cls.host() == "gw-1", READY_TIMEOUT, lambda: f"web not on gw-1\n{cls.logs_tail()}")

        rig.following.set()
        rig.follower = threading.Thread(target=cls.follow_host, daemon=True)
        rig.follower.start()

        cls.capture_path = rig.workdir / "capture.txt"
        cls.spawn_in("ext", "echo", "--tcp", TCP_PORT, "--udp", UDP_PORT, "--lifetime", 900)
        cls.spawn_in("ext", "capture", "--out", cls.capture_path, "--lifetime", 900)

    @classmethod
    def spawn_in(cls, role, *args):
        """stream.py with `args` in namespace <prefix>-`role`, once it is ready."""
        return cls.rig.spawn_in(ns(role), f"stream-{len(cls.rig.procs)}-{args[0]}", STREAM, *args)

    @classmethod
    def follow_host(cls):
        rig = cls.rig
        current = "gw-1"
        while rig.following.is_set():
            try:
                host = cls.host()
            except Exception:   # the API server going away at the end
                host = None
            if host in GATEWAYS and host != current:
                t = time.monotonic()
                try:
                    rig.route_to(host)
                except RuntimeError as e:
                    print(f"follower: {e}", file=sys.stderr)
                    continue
                current = host
                rig.host_changes.append((t, host))
            time.sleep(0.05)

    # --- state ------------------------------------------------------------------------------

    @classmethod
    def status(cls, gw):
        try:
            return json.loads((cls.rig.workdir / f"{gw}.status.json").read_text())
        except (OSError, ValueError):
            return {}

    @classmethod
    def host(cls):
        es = cls.rig.api.get("/apis/k8s.ovn.org/v1/namespaces/default/egressservices/web")
        return None if es is None else (es.get("status") or {}).get("host")

    @classmethod
    def logs_tail(cls):
        return "\n".join(f"--- {gw} ---\n{tail(cls.rig.workdir / f'{gw}.log', 20)}" for gw in GATEWAYS)

    def leader(self):
        lease = self.rig.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/egw-leader") or {}
        return (lease.get("spec") or {}).get("holderIdentity")

    def captured(self, t_from, t_to):
        """The pod's stream packets that reached the external namespace in [t_from, t_to]:
        [(t, gateway, proto, source address, tag)]."""
        by_iface = {v: k for k, v in IFACE.items()}
        out = []
        for line in self.capture_path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 8:
                continue
            t, iface, proto, src, sport, dst, dport, tag = parts
            t = float(t)
            if not (t_from <= t <= t_to) or dst != EXT or int(dport) not in (UDP_PORT, TCP_PORT):
                continue
            out.append((t, by_iface.get(iface, iface), proto, src, tag))
        return out

    # --- streams ----------------------------------------------------------------------------

    def start_streams(self, tcp=True):
        """A UDP stream and (optionally) a TCP stream from POD; returns their result files once
        both carry traffic end to end."""
        n = len(self.rig.procs)
        files = {"udp": self.rig.workdir / f"udp-{n}.json", "tcp": self.rig.workdir / f"tcp-{n}.json"}
        procs = {"udp": self.spawn_in("pods", "udp", EXT, UDP_PORT, "--bind", f"{POD}:{UDP_SPORT}",
                                      "--rate", RATE_UDP, "--out", files["udp"], "--lifetime", 300)}
        if tcp:   # a port of its own each time: the last connection's may be in TIME_WAIT
            procs["tcp"] = self.spawn_in("pods", "tcp", EXT, TCP_PORT, "--bind", f"{POD}:{TCP_SPORT + n}",
                                         "--rate", RATE_TCP, "--out", files["tcp"], "--lifetime", 300)
        self.streams = (procs, files)
        self.addCleanup(self.stop_streams)
        return procs, files

    def stop_streams(self):
        procs, files = self.streams
        results = {}
        for kind, p in procs.items():
            stop_process(p, signal.SIGTERM, grace=5)
            try:
                results[kind] = json.loads(files[kind].read_text())
            except (OSError, ValueError):
                results[kind] = None
        self.streams = ({}, files)
        return results

    def wait_flowing(self, src_ip, gw, timeout=BOUND + 3):
        """Stream packets reach the external side through `gw` from `src_ip` (both protocols
        when a TCP stream runs)."""
        t0 = time.monotonic()
        protos = set(self.streams[0])

        def flowing():
            seen = {p for (t, g, p, s, tag) in self.captured(t0, time.monotonic()) if g == gw and s == src_ip}
            return protos <= seen
        harness.wait_for(flowing, timeout, lambda: f"stream packets not seen through {gw} from {src_ip}\n"
                         f"{self.captured(t0, time.monotonic())[-5:]}\n{self.logs_tail()}")

    # --- the policy of the moment ----------------------------------------------------------

    def check_sources(self, t_from, t_to, phases, min_share=None):
        """Every stream packet captured in [t_from, t_to] carries the source the policy said.
        `phases` is [(t_start, policy(...)[, window])], the first starting at or before t_from,
        each at the moment the test asked for the change; a change takes effect within its
        window (BOUND unless given), so from a phase's start to start + window the previous
        phase's source is still allowed, and on each gateway (and per protocol) the previous
        source never comes back once the new one was seen. With `min_share`, at least that share
        of the UDP stream's packets over the window must have been captured, so that a capture
        that stopped cannot pass for a clean one."""
        problems = []
        packets = self.captured(t_from, t_to)
        if min_share is not None:
            self.assertGreaterEqual(len(packets), RATE_UDP * (t_to - t_from) * min_share,
                                    f"too few stream packets captured in the window\n{self.logs_tail()}")
        new_seen = {}
        phases = [(ph[0], ph[1], ph[2] if len(ph) > 2 else BOUND) for ph in phases]
        for t, gw, proto, src, tag in packets:
            i = max(k for k, ph in enumerate(phases) if ph[0] <= t) if t >= phases[0][0] else 0
            start, allowed, window = phases[i]
            want = allowed.get(gw)
            ok = src == want
            if not ok and i > 0 and t < start + window:
                old = phases[i - 1][1].get(gw)
                ok = src == old and not new_seen.get((i, gw, proto))
            if src == want:
                new_seen[(i, gw, proto)] = True
            if not ok:
                problems.append(f"{t - t_from:7.3f}s {proto} {tag} via {gw} from {src}, policy says {want} "
                                f"(phase {i} from {start - t_from:.3f}s)")
        self.assertEqual(problems[:20], [], f"{len(problems)} packet(s) left with a source the policy did not "
                         f"say, of {len(packets)}\n{self.logs_tail()}")
        return packets

    def assert_no_loss(self, udp, t_from, t_to):
        """Every UDP datagram sent in [t_from, t_to] came back."""
        lost = [seq for seq, t in udp["sent"] if t_from <= t <= t_to and str(seq) not in udp["echoed"]]
        sent = sum(1 for _, t in udp["sent"] if t_from <= t <= t_to)
        self.assertGreater(sent, 0)
        if lost:   # say on which leg: the capture shows what reached the external side
            out = {tag for (_, _, proto, _, tag) in self.captured(t_from - 1, time.monotonic()) if proto == "udp"}
            where = ", ".join(f"{seq} ({'echo lost' if f'u:{seq}' in out else 'never left'})" for seq in lost[:20])
            self.fail(f"{len(lost)} of {sent} UDP datagrams lost: {where}\n{self.logs_tail()}")
        return sent

    def hold_flowing(self, gw, src_ip, duration=HOLD):
        """For `duration` seconds, new stream packets keep arriving through `gw` from `src_ip`,
        and nothing else arrives (consistently)."""
        t0 = time.monotonic()
        time.sleep(duration)
        packets = self.captured(t0, time.monotonic())
        wrong = [p for p in packets if p[1] != gw or p[3] != src_ip]
        self.assertEqual(wrong[:10], [], f"while holding {gw}/{src_ip}\n{self.logs_tail()}")
        self.assertGreaterEqual(len(packets), RATE_UDP * duration * 0.5,
                                f"the stream did not keep flowing through {gw}\n{self.logs_tail()}")

    # --- tests (in name order, each leaves web hosted on gw-1 unless it says otherwise) ------

    def test_0_two_queues_per_port_each_flow_on_the_worker_its_key_names(self):
        """Two workers, two queues per port: net_af_packet's fan-out by flow hash spreads the
        pod's flows over both queues; each flow is owned by the worker its key hashes to (handed
        there when the kernel gave it to the other queue, as it has no RSS of egw's), its session
        lives on exactly that worker, with a NAT port of that worker's block, the flows are spread
        over both, and each reply comes back, through the software hand-off where it arrived on
        the other queue (net_af_packet has no rte_flow)."""
        ctl = [str(harness.egwctl_binary()), "-p", self.rig.prefix("gw-1"), "--json"]
        steering = json.loads(run(ctl + ["show", "steering"], 20).stdout)
        (ext,) = steering["ports"]
        self.assertEqual(ext["mode"], "software", ext)
        self.assertTrue(ext["reason"].startswith("rte_flow_validate refused flow create "), ext["reason"])
        self.assertEqual(ext["rules_installed"], 0)
        blocks = {w["index"]: tuple(map(int, w["nat_ports"].split("-"))) for w in steering["workers"]}
        self.assertEqual(sorted(blocks), [0, 1])
        # The rules a NIC would get (one NAT address at least, two workers: 12 matches x 3
        # protocols each) parse in testpmd's flow grammar; a misspelt one does not.
        self.assertEqual(len(ext["rules"]) % 36, 0, ext["rules"])
        self.assertEqual({r.split("queue index ")[1] for r in ext["rules"]}, {"0 / end", "1 / end"})
        bad = ext["rules"][0].replace(" dst spec ", " dstt spec ")
        verdicts = testpmd_verdicts(ext["rules"] + [bad], f"egw-tp-{os.getpid()}")
        self.assertEqual(verdicts, {"parsed": len(ext["rules"]), "bad": 1})
        info = {p["name"]: p for p in json.loads(run(ctl + ["show", "port", "info", "all"], 20).stdout)}
        self.assertEqual((info["pods"]["rx_queues"], info["ext1"]["rx_queues"]), (2, 2))
        handed_before = sum(w["handed_off"] for w in steering["workers"])

        ports = list(range(31000, 31032))
        for port in ports:
            r = run(["ip", "netns", "exec", ns("pods"), sys.executable, str(HERE / "peer.py"), "udp", EXT, str(UDP_PORT),
                     "--bind", f"{POD}:{port}", "--timeout", "5", "--interval", "0.5"], 20, check=False)
            self.assertEqual(r.returncode, 0, f"flow from port {port}: {r.stdout}{r.stderr}")

        def ours():
            return [s for s in self.status("gw-1").get("sessions", [])
                    if s["inside"].startswith(POD + ":") and int(s["inside"].split(":")[1]) in ports]
        harness.wait_for(lambda: len(ours()) >= len(ports), 10, lambda: f"sessions: {ours()}")
        by_flow = {}
        for s in ours():
            by_flow.setdefault(s["inside"], []).append(s)
        self.assertEqual(len(by_flow), len(ports))
        workers = set()
        for flow, ss in by_flow.items():
            self.assertEqual(len(ss), 1, f"{flow} has sessions on several workers: {ss}")
            w = ss[0]["worker"]
            pod_port = int(flow.split(":")[1])
            self.assertEqual(w, flow_owner(POD, EXT, pod_port, UDP_PORT, 2),
                             f"{flow}: its session is not on the worker its key names")
            nat = int(ss[0]["outside"].split(":")[1])
            lo, hi = blocks[w]
            self.assertTrue(lo <= nat <= hi, f"{flow}: NAT port {nat} outside worker {w}'s block {lo}-{hi}")
            workers.add(w)
        self.assertEqual(workers, {0, 1}, "the fan-out gave every flow to one queue")
        steering = json.loads(run(ctl + ["show", "steering"], 20).stdout)
        self.assertGreater(sum(w["handed_off"] for w in steering["workers"]), handed_before,
                           "no reply arrived on the other worker's queue")

    def test_1_hundreds_of_unrelated_changes_lose_nothing_and_break_nothing(self):
        self.start_streams()
        self.wait_flowing(INGRESS[0], "gw-1")
        api = self.rig.api
        t0 = time.monotonic()
        changes = 0
        count = 60
        for i in range(count):     # Services, endpoints and EgressServices of other Services
            api.upsert(lb_service(f"other-{i}", f"203.0.113.{i + 1}", f"10.96.1.{i + 1}"))
            api.upsert(endpoint_slice(f"other-{i}-x", f"other-{i}", [f"10.244.5.{i + 1}"]))
            api.upsert(egress_service(f"other-{i}", node_selector=harness.GATEWAY_LABEL))
            changes += 3
        for i in range(count):     # new ingress IPs, new endpoints
            api.upsert(lb_service(f"other-{i}", f"203.0.113.{i + 101}", f"10.96.1.{i + 1}"))
            api.upsert(endpoint_slice(f"other-{i}-x", f"other-{i}", [f"10.244.5.{i + 1}", f"10.244.6.{i + 1}"]))
            changes += 2
        for i in range(count):     # and gone again
            api.delete("EgressService", f"other-{i}")
            api.delete("EndpointSlice", f"other-{i}-x")
            api.delete("Service", f"other-{i}")
            changes += 3
        # Let both gateways take in the last of them, then hold.
        harness.wait_for(lambda: all(len(self.status(gw).get("services", [])) <= 1 for gw in GATEWAYS), 20,
                         lambda: f"the other Services are still in the status files\n{self.logs_tail()}")
        time.sleep(HOLD)
        t1 = time.monotonic()
        time.sleep(1.0)   # the echoes of what was sent up to t1 on a loaded machine
        results = self.stop_streams()
        udp, tcp = results["udp"], results["tcp"]
        self.assertIsNotNone(udp)
        self.assertIsNotNone(tcp)
        # Nothing held the stream after t0: the capture itself must show it flowing throughout.
        self.check_sources(t0, t1, [(t0, policy("gw-1", INGRESS[0]))], min_share=0.5)
        sent = self.assert_no_loss(udp, t0, t1)
        self.assertEqual(udp["errors"], [])
        self.assertIsNone(tcp["error"], f"the TCP connection broke\n{self.logs_tail()}")
        self.assertEqual(tcp["out_of_order"], [])
        self.assertGreaterEqual(tcp["echoed"], tcp["sent"] - RATE_TCP, tcp)  # what was in flight at the end
        self.assertEqual(self.host(), "gw-1")
        print(f"\n  {changes} unrelated changes in {t1 - t0 - HOLD:.1f} s: {sent} UDP datagrams, "
              f"{tcp['echoed']} TCP lines, none lost", file=sys.stderr)

    def test_2_a_new_ingress_ip_replaces_the_old_one_on_every_packet(self):
        self.start_streams()
        self.wait_flowing(INGRESS[0], "gw-1")
        t0 = time.monotonic()
        time.sleep(0.5)
        changed = time.monotonic()
        self.rig.api.upsert(lb_service("web", INGRESS[1], "10.96.0.50"))
        time.sleep(BOUND)
        # The old connection cannot survive a new source address; the UDP stream goes on.
        self.hold_flowing("gw-1", INGRESS[1])
        t1 = time.monotonic()
        udp = self.stop_streams()["udp"]
        self.check_sources(t0, t1, [(t0, policy("gw-1", INGRESS[0])), (changed, policy("gw-1", INGRESS[1]))])
        self.assert_no_loss(udp, changed + BOUND, t1 - 0.5)
        # A new connection leaves from the new address, and holds.
        self.start_streams()
        self.wait_flowing(INGRESS[1], "gw-1")
        self.hold_flowing("gw-1", INGRESS[1])
        tcp = self.stop_streams()["tcp"]
        self.assertIsNone(tcp["error"])

    def test_3_deleting_the_egress_service_falls_back_and_restoring_it_comes_back(self):
        self.start_streams(tcp=False)
        self.wait_flowing(INGRESS[1], "gw-1")
        t0 = time.monotonic()
        time.sleep(0.5)
        deleted = time.monotonic()
        self.rig.api.delete("EgressService", "web")
        time.sleep(BOUND)
        self.hold_flowing("gw-1", MASQ["gw-1"])
        restored = time.monotonic()
        self.rig.api.upsert(egress_service("web", host="gw-1"))
        time.sleep(BOUND)
        self.hold_flowing("gw-1", INGRESS[1])
        t1 = time.monotonic()
        udp = self.stop_streams()["udp"]
        self.check_sources(t0, t1, [(t0, policy("gw-1", INGRESS[1])), (deleted, policy(None, None)),
                                    (restored, policy("gw-1", INGRESS[1]))])
        self.assert_no_loss(udp, deleted + BOUND, restored - 0.5)
        self.assert_no_loss(udp, restored + BOUND, t1 - 0.5)

    def move_host(self, to):
        """Puts web on `to` by its nodeSelector; returns, once status.host says so (the follower
        thread then moves the routes), the time the change was asked for."""
        before = len(self.rig.host_changes)
        asked = time.monotonic()
        self.rig.api.patch_spec("web", selector(to))
        harness.wait_for(lambda: len(self.rig.host_changes) > before and self.rig.host_changes[-1][1] == to,
                         BOUND + 3, lambda: f"status.host is {self.host()!r}, not {to}\n{self.logs_tail()}")
        self.assertLess(self.rig.host_changes[-1][0] - asked, BOUND)
        return asked

    def test_4_moving_the_host_away_and_back_moves_the_source(self):
        self.start_streams(tcp=False)
        self.wait_flowing(INGRESS[1], "gw-1")
        t0 = time.monotonic()
        moved = self.move_host("gw-2")
        time.sleep(BOUND)
        self.hold_flowing("gw-2", INGRESS[1])
        back = self.move_host("gw-1")
        time.sleep(BOUND)
        self.hold_flowing("gw-1", INGRESS[1])
        t1 = time.monotonic()
        udp = self.stop_streams()["udp"]
        # While status.host moves, the old host may still translate (until it has taken the
        # change in) or masquerade (it no longer serves web); never the ingress IP after BOUND.
        self.check_sources(t0, t1, [(t0, policy("gw-1", INGRESS[1])), (moved, policy("gw-2", INGRESS[1])),
                                    (back, policy("gw-1", INGRESS[1]))])
        self.assert_no_loss(udp, moved + BOUND, back - 0.5)
        self.assert_no_loss(udp, back + BOUND, t1 - 0.5)

    def test_5_killing_the_leader_moves_its_service_to_the_survivor(self):
        leader = self.leader()
        self.assertIn(leader, GATEWAYS)
        survivor = next(g for g in GATEWAYS if g != leader)
        if self.host() != leader:
            self.move_host(leader)
        self.rig.api.patch_spec("web", selector(None))    # any gateway may take it over
        self.start_streams(tcp=False)
        self.wait_flowing(INGRESS[1], leader)
        t0 = time.monotonic()
        before = len(self.rig.host_changes)
        killed = time.monotonic()
        self.rig.egwds[leader].kill()
        self.rig.egwds[leader].wait(timeout=10)
        harness.wait_for(lambda: len(self.rig.host_changes) > before, FAILOVER_BOUND + 3,
                         lambda: f"status.host is still {self.host()!r}\n{self.logs_tail()}")
        moved_at, host = self.rig.host_changes[-1]
        self.assertEqual(host, survivor)
        self.assertLess(moved_at - killed, FAILOVER_BOUND, "web moved later than the docs say")
        time.sleep(BOUND)
        self.hold_flowing(survivor, INGRESS[1])
        t1 = time.monotonic()
        udp = self.stop_streams()["udp"]
        self.assertEqual(self.leader(), survivor)
        # Before the move the survivor carries nothing (the pods' route points at the dead
        # gateway, whose packets are lost); after it, only the ingress IP.
        self.check_sources(t0, t1, [(t0, policy(leader, INGRESS[1])),
                                    (killed, policy(survivor, INGRESS[1]), FAILOVER_BOUND)])
        self.assert_no_loss(udp, moved_at + BOUND, t1 - 0.5)
        print(f"\n  leader {leader} killed -> web on {survivor} after {moved_at - killed:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
