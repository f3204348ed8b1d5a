# SPDX-License-Identifier: Apache-2.0
"""End to end: an outside network whose MTU is smaller than the inside one (issue 10 §2, §3).

scripts/netns.sh's topology with a tag of its own; ext1's link (its namespace side and egwd's
port, `mtu` 1000 in the staged config) carries 1000-byte datagrams, the pods' link 1500. A pod
sends a UDP datagram larger than both: its kernel cuts it for its 1500-byte link, egwd translates
it and cuts it again for ext1's 1000 bytes, and the kernel of ext1 puts it together and sees the
ingress IP as its source. The answer, as large, is cut by ext1's kernel and reaches the pod
translated, cut by egwd for the inside link. A datagram with Don't Fragment set that does not fit
ext1 is answered with ICMP Fragmentation Needed, from which the pod's kernel learns ext1's MTU.

Where egwd reads it through net_af_packet, the root namespace's kernel has already put a
fragmented datagram together: the PMD joins its sockets to a PACKET_FANOUT group with
PACKET_FANOUT_FLAG_DEFRAG (docs/testing.md), so MtuE2E, on net_af_packet, covers the MTU on both
ports and the fragments egwd makes, checked by the kernels that receive them. FragmentsE2E drives
the pods and ext1 links with net_pcap instead (libpcap's packet socket, no fanout group, so nothing
reassembles before egwd): the fragments the kernels make reach egwd as fragments, and egwd puts
them together itself, both ways. IngressMtuE2E narrows the inside link toward `ingress.via`
instead: a client outside connecting to the Service's ingress IP learns that link's MTU from
egwd's Fragmentation Needed, and its data arrives.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_mtu_e2e.py
"""

import json
import os
import sys
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import harness  # noqa: E402
import peer  # noqa: E402  (stage_config)
from harness import run, tail  # noqa: E402

DEMO_CONFIG = REPO / "config" / "demo.json"
PREFIX = f"egwmtu{os.getpid()}"
TAG = harness.iface_tag("m")
FILE_PREFIX = f"egw-mtu-{os.getpid()}"

WEB_POD = "10.244.1.10"        # default/web: LoadBalancerIP 192.0.2.50
WEB_INGRESS = "192.0.2.50"
EXT1 = "192.0.2.100"
PORT = 9100
OUTSIDE_MTU = 1000
INSIDE_MTU = 1500
# UDP payload: more than either MTU, less than a net_af_packet ring frame (2,048 bytes by default,
# which is what the root namespace's kernel hands egwd, reassembled).
SIZE = 1600

# The server in ext1: answers each datagram with a JSON line (the source it saw, the size and
# SHA-256 of what arrived), a newline and the payload echoed back.
SERVER = textwrap.dedent("""\
    import hashlib, json, socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", int(sys.argv[1])))
    print("ready", flush=True)
    while True:
        data, addr = s.recvfrom(65535)
        head = json.dumps({"src": addr[0], "len": len(data), "sha": hashlib.sha256(data).hexdigest()})
        s.sendto(head.encode() + b"\\n" + data, addr)
        print("answered", addr[0], len(data), flush=True)
""")

# The client in the pods namespace: one datagram, one answer, printed as JSON.
CLIENT = textwrap.dedent("""\
    import hashlib, json, os, socket, sys
    bind, dst, port, size, df = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "df"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 0))
    if df:
        s.setsockopt(socket.IPPROTO_IP, 10, 2)   # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF on every datagram
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


def ns(role):
    return f"{PREFIX}-{role}"


def snmp_ip(namespace):
    """The Ip: counters of a namespace's kernel (/proc/net/snmp), by name."""
    r = run(["ip", "netns", "exec", namespace, "cat", "/proc/net/snmp"], 10)
    lines = [line.split() for line in r.stdout.splitlines() if line.startswith("Ip:")]
    return dict(zip(lines[0][1:], map(int, lines[1][1:])))


class MtuE2E(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "mtu", PREFIX, TAG)
        cls.config, _ = peer.stage_config(DEMO_CONFIG, rig.workdir, FILE_PREFIX, iface_tag=TAG,
                                          metrics_listen=f"127.0.0.1:{harness.free_port()}")
        cfg = json.loads(cls.config.read_text())
        for p in cfg["ports"]:
            if p["name"] == "ext1":
                p["mtu"] = OUTSIDE_MTU
                # An IPv6 link has an MTU of 1280 or more (RFC 8200), and egwd refuses an IPv6
                # address on a port below it: this suite's outside link is IPv4 only.
                p["addresses"] = [a for a in p["addresses"] if ":" not in a]
        cls.config.write_text(json.dumps(cfg, indent=1))
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")
        (rig.workdir / "server.py").write_text(SERVER)
        (rig.workdir / "client.py").write_text(CLIENT)

        rig.netns.up()
        r = run(["ip", "-n", ns("ext1"), "link", "set", "eth0", "mtu", str(OUTSIDE_MTU)], 10)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        rig.start_ready_egwd(cls.config, cls.status_file, FILE_PREFIX)
        rig.spawn_in(ns("ext1"), "server", rig.workdir / "server.py", PORT)

    def client(self, size, df=False):
        r = run(["ip", "netns", "exec", ns("pods"), sys.executable, str(self.rig.workdir / "client.py"),
                 WEB_POD, EXT1, str(PORT), str(size), "df" if df else "plain"], 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_1_egwd_set_the_mtu_on_its_port(self):
        # net_af_packet applies rte_eth_dev_set_mtu to its kernel interface.
        r = run(["ip", "-j", "link", "show", self.rig.netns.iface("ext1")], 10)
        self.assertEqual(json.loads(r.stdout)[0]["mtu"], OUTSIDE_MTU, r.stdout)
        r = run(["ip", "-j", "link", "show", self.rig.netns.iface("pods")], 10)
        self.assertEqual(json.loads(r.stdout)[0]["mtu"], INSIDE_MTU, r.stdout)

    def test_2_large_datagram_both_ways_in_fragments(self):
        ext1_before, pods_before = snmp_ip(ns("ext1")), snmp_ip(ns("pods"))
        out = self.client(SIZE)
        self.assertNotIn("error", out, f"{out}\n{tail(self.log_path)}")
        answer = out["answer"]
        # The outside host put it together and saw the ingress IP.
        self.assertEqual(answer["src"], WEB_INGRESS)
        self.assertEqual(answer["len"], SIZE)
        self.assertEqual(answer["sha"], out["sha"], "the datagram arrived changed")
        # The answer (larger still) reached the pod whole.
        self.assertTrue(out["echo_ok"], out)
        ext1_after, pods_after = snmp_ip(ns("ext1")), snmp_ip(ns("pods"))
        # 1,628 bytes of datagram at 1,000 bytes a fragment: two, put together by ext1's kernel;
        # the answer reached the pod in fragments of at most 1,500 bytes, put together there.
        self.assertGreaterEqual(ext1_after["ReasmOKs"] - ext1_before["ReasmOKs"], 1)
        self.assertGreaterEqual(ext1_after["ReasmReqds"] - ext1_before["ReasmReqds"], 2)
        self.assertGreaterEqual(pods_after["ReasmOKs"] - pods_before["ReasmOKs"], 1)
        self.assertEqual(ext1_after["ReasmFails"], ext1_before["ReasmFails"])

    def test_3_dont_fragment_larger_than_the_outside_mtu_gets_fragmentation_needed(self):
        out = self.client(OUTSIDE_MTU + 200, df=True)
        self.assertIn("error", out, "a DF datagram larger than ext1's MTU got an answer")
        # The pod's kernel took the next-hop MTU from egwd's Fragmentation Needed.
        def learned():
            r = run(["ip", "-n", ns("pods"), "route", "get", EXT1, "from", WEB_POD], 10)
            return f"mtu {OUTSIDE_MTU}" in r.stdout
        harness.wait_for(learned, 5, lambda: f"the pod's route to {EXT1} has no learned MTU\n{tail(self.log_path)}")
        # One that fits goes through, DF and all.
        out = self.client(OUTSIDE_MTU - 100, df=True)
        self.assertNotIn("error", out, out)
        self.assertEqual(out["answer"]["src"], WEB_INGRESS)


# Second topology: the same namespaces under another prefix and tag, pods and ext1 read and
# written by net_pcap (a receive handle that sees only incoming frames, a transmit handle).
FRAG_PREFIX = f"egwfrg{os.getpid()}"
FRAG_TAG = harness.iface_tag("g")
FRAG_FILE_PREFIX = f"egw-frag-{os.getpid()}"
# UDP payload: three fragments on a 1500-byte link (1480 + 1480 + 1048 bytes of IP payload).
FRAG_SIZE = 4000


def frag_ns(role):
    return f"{FRAG_PREFIX}-{role}"


class FragmentsE2E(unittest.TestCase):
    """A pod sends a 4000-byte UDP datagram: its kernel cuts it for the 1500-byte link, egwd puts
    the fragments together, translates the datagram and cuts it again for ext1; ext1's kernel puts
    it together and sees the ingress IP. The echo comes back in the fragments ext1's kernel cuts,
    which egwd puts together, translates back and cuts for the pods link."""

    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "mtu-frag", FRAG_PREFIX, FRAG_TAG)
        cls.config, _ = peer.stage_config(DEMO_CONFIG, rig.workdir, FRAG_FILE_PREFIX, iface_tag=FRAG_TAG,
                                          metrics_listen=f"127.0.0.1:{harness.free_port()}")
        cfg = json.loads(cls.config.read_text())
        pcap = {}
        vdevs = []
        for v in cfg["eal"]["vdevs"]:
            name, _, args = v.partition(",")
            iface = dict(a.split("=", 1) for a in args.split(","))["iface"]
            role = iface.rsplit("-", 1)[1]
            if role in ("pods", "ext1"):
                dev = f"net_pcap_{role}"
                pcap[name] = dev
                v = f"{dev},rx_iface_in={iface},tx_iface={iface}"
            vdevs.append(v)
        cfg["eal"]["vdevs"] = vdevs
        for p in cfg["ports"]:
            p["device"] = pcap.get(p["device"], p["device"])
        if sorted(pcap.values()) != ["net_pcap_ext1", "net_pcap_pods"]:
            raise RuntimeError(f"the demo config's vdevs changed: {cfg['eal']['vdevs']}")
        cls.config.write_text(json.dumps(cfg, indent=1))
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")
        (rig.workdir / "server.py").write_text(SERVER)
        (rig.workdir / "client.py").write_text(CLIENT)

        rig.netns.up()
        rig.start_ready_egwd(cls.config, cls.status_file, FRAG_FILE_PREFIX)
        rig.spawn_in(frag_ns("ext1"), "server", rig.workdir / "server.py", PORT)

    def client(self, size):
        r = run(["ip", "netns", "exec", frag_ns("pods"), sys.executable, str(self.rig.workdir / "client.py"),
                 WEB_POD, EXT1, str(PORT), str(size), "plain"], 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def fragments(self):
        status = harness.read_status(self.status_file) or {}
        return status.get("fragments", {}), status.get("drops", {})

    def test_large_datagram_in_fragments_both_ways(self):
        before, drops_before = self.fragments()
        self.assertIn("received", before, "the status file has no fragment counters")
        ext1_before, pods_before = snmp_ip(frag_ns("ext1")), snmp_ip(frag_ns("pods"))
        out = self.client(FRAG_SIZE)
        self.assertNotIn("error", out, f"{out}\n{tail(self.log_path)}")
        answer = out["answer"]
        # ext1's kernel put egwd's fragments together and saw the ingress IP.
        self.assertEqual(answer["src"], WEB_INGRESS)
        self.assertEqual(answer["len"], FRAG_SIZE)
        self.assertEqual(answer["sha"], out["sha"], "the datagram arrived changed")
        # The echo, cut by ext1's kernel, reached the pod whole.
        self.assertTrue(out["echo_ok"], out)
        ext1_after, pods_after = snmp_ip(frag_ns("ext1")), snmp_ip(frag_ns("pods"))
        # Each kernel cut what it sent (3 fragments of the 4,028-byte datagram, more for the echo)
        # and put together what egwd sent it.
        self.assertGreaterEqual(pods_after["FragCreates"] - pods_before["FragCreates"], 3)
        self.assertGreaterEqual(ext1_after["FragCreates"] - ext1_before["FragCreates"], 3)
        self.assertGreaterEqual(ext1_after["ReasmOKs"] - ext1_before["ReasmOKs"], 1)
        self.assertGreaterEqual(pods_after["ReasmOKs"] - pods_before["ReasmOKs"], 1)
        self.assertEqual(ext1_after["ReasmFails"], ext1_before["ReasmFails"])
        # egwd itself received fragments, put the two datagrams together and cut them again: the
        # counters only move on a topology where nothing reassembles in front of egwd.
        def counted():
            after, _ = self.fragments()
            return (after.get("received", 0) - before["received"] >= 6
                    and after.get("reassembled", 0) - before["reassembled"] >= 2)
        harness.wait_for(counted, 5, lambda: f"egwd did not count the fragments: {self.fragments()}")
        after, drops_after = self.fragments()
        self.assertGreaterEqual(after["fragmented"] - before["fragmented"], 2)
        self.assertGreaterEqual(after["sent"] - before["sent"], 6)
        for reason in ("fragment", "fragment_timeout", "fragment_failed"):
            self.assertEqual(drops_after.get(reason), drops_before.get(reason), reason)


ING_PREFIX = f"egwimt{os.getpid()}"
ING_TAG = harness.iface_tag("i")
ING_FILE_PREFIX = f"egw-imtu-{os.getpid()}"
POD2 = "10.244.2.10"           # the host in pods2, playing a cluster node (ingress.via)
WEB_LB_PORT = 80               # web's spec.ports (config/demo-manifests/web.yaml)
INGRESS_MTU = 1000             # egwd's pods2 port; the node's side of the link stays at 1500
INGRESS_SIZE = 6000

# The node's service on the load-balancer IP: reads a connection to its end and answers with what
# arrived, as JSON.
NODE = textwrap.dedent("""\
    import hashlib, json, socket, sys, threading
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.listen(8)
    print("ready", flush=True)
    def serve(c, addr):
        with c:
            c.settimeout(20)
            data = b""
            try:
                while chunk := c.recv(65536):
                    data += chunk
            except OSError:
                pass
            c.sendall(json.dumps({"src": addr[0], "len": len(data), "sha": hashlib.sha256(data).hexdigest()}).encode())
            print("served", addr[0], len(data), flush=True)
    while True:
        c, addr = s.accept()
        threading.Thread(target=serve, args=(c, addr), daemon=True).start()
""")

# A client outside: one connection carrying `size` bytes (full-sized segments with DF, as Linux's
# TCP sends them), its end, the node's answer; printed as JSON.
INGRESS_CLIENT = textwrap.dedent("""\
    import hashlib, json, os, socket, sys
    dst, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    payload = os.urandom(size)
    out = {"sha": hashlib.sha256(payload).hexdigest()}
    try:
        c = socket.create_connection((dst, port), timeout=8)
        c.settimeout(8)
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := c.recv(65536):
            data += chunk
        out["answer"] = json.loads(data)
    except (OSError, ValueError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out), flush=True)
""")


def ing_ns(role):
    return f"{ING_PREFIX}-{role}"


class IngressMtuE2E(unittest.TestCase):
    """Ingress to a served ingress IP goes through egwd's one forwarding body, the egress MTU
    included. egwd's pods2 port (toward ingress.via, a host playing a cluster node with the
    load-balancer IP on its loopback) has an MTU of 1000 while the node's side of the link, and
    so the MSS it announces, stays at 1500: a client's full-sized TCP segments (DF, as Linux
    sends them) do not fit. egwd answers them with Fragmentation Needed carrying 1000, the client's
    kernel lowers its path MTU and sends again, and the data arrives. Before, egwd dropped them at
    output unanswered and the connection hung (a path-MTU black hole)."""

    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "mtu-ingress", ING_PREFIX, ING_TAG)
        cls.config, _ = peer.stage_config(DEMO_CONFIG, rig.workdir, ING_FILE_PREFIX, iface_tag=ING_TAG,
                                          metrics_listen=f"127.0.0.1:{harness.free_port()}")
        cfg = json.loads(cls.config.read_text())
        cfg["ingress"] = {"via": POD2, "port": "pods2"}
        for p in cfg["ports"]:
            if p["name"] == "pods2":
                p["mtu"] = INGRESS_MTU
                # An IPv6 link has an MTU of 1280 or more (RFC 8200), and egwd refuses an IPv6
                # address on a port below it: this inside link is IPv4 only, as MtuE2E's ext1.
                p["addresses"] = [a for a in p["addresses"] if ":" not in a]
        cls.config.write_text(json.dumps(cfg, indent=1))
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")
        (rig.workdir / "node.py").write_text(NODE)
        (rig.workdir / "client.py").write_text(INGRESS_CLIENT)

        rig.netns.up()
        r = run(["ip", "-n", ing_ns("pods2"), "addr", "add", f"{WEB_INGRESS}/32", "dev", "lo"], 10)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        rig.start_ready_egwd(cls.config, cls.status_file, ING_FILE_PREFIX)
        rig.spawn_in(ing_ns("pods2"), "node", rig.workdir / "node.py", WEB_INGRESS, WEB_LB_PORT)

    def frag_needed_sent(self):
        status = harness.read_status(self.status_file) or {}
        return status.get("icmp", {}).get("sent", {}).get("fragmentation_needed", 0)

    def test_a_client_of_the_service_learns_the_inside_mtu_and_its_data_arrives(self):
        before = self.frag_needed_sent()
        r = run(["ip", "netns", "exec", ing_ns("ext1"), sys.executable, str(self.rig.workdir / "client.py"),
                 WEB_INGRESS, str(WEB_LB_PORT), str(INGRESS_SIZE)], 30)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertNotIn("error", out, f"{out}\n{tail(self.log_path)}")
        # The node saw the client's own address and every byte.
        self.assertEqual(out["answer"]["src"], EXT1)
        self.assertEqual(out["answer"]["len"], INGRESS_SIZE)
        self.assertEqual(out["answer"]["sha"], out["sha"], "the data arrived changed")
        # ext1's kernel holds the path MTU egwd told it.
        route = run(["ip", "-n", ing_ns("ext1"), "route", "get", WEB_INGRESS], 10).stdout
        self.assertIn(f"mtu {INGRESS_MTU}", route, route)
        harness.wait_for(lambda: self.frag_needed_sent() > before, 5,
                         lambda: f"egwd counted no Fragmentation Needed: {self.frag_needed_sent()}")


if __name__ == "__main__":
    unittest.main()
