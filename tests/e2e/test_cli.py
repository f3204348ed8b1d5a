# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of egw's CLI: a real egwd on virtual devices, driven by egwctl and on a pty.

No namespaces and no NIC: the port "pods" is a net_pcap device that replays a capture written
here (flows of two EgressServices, a pod of none, a malformed frame), "ext1" and "ext2" are
net_null devices that swallow what egwd sends. Static neighbours spare ARP. Every command of
docs/cli.md runs through `egwctl` one-shot, from a file and from stdin, and its answer is checked
against what the state holds (the status file, the frames sent); then `egwd -i` runs on a
pseudo-terminal for TAB completion, help and quit.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_cli.py
EGWD and EGWCTL name the binaries (default build/control/egwd and build/control/egwctl);
EGW_E2E_KEEP=1 keeps the work directory.
"""

import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True             # leave no __pycache__ in the tree

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import harness  # noqa: E402  (binaries, processes, work directories)
from harness import stop_process  # noqa: E402

READY_TIMEOUT = 30.0
COMMAND_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0

PODS_MAC = "02:e9:00:00:00:01"
WEB_PODS = ("10.244.1.10", "10.244.1.11")
WEB_INGRESS = "192.0.2.50"
DB_POD = "10.244.1.20"
OTHER_POD = "10.244.1.30"
REMOTE = "192.0.2.100"
REMOTE_BLUE = "198.51.100.100"
EXT1_ADDR = "192.0.2.1"
EXT2_ADDR = "198.51.100.1"


EGWD = harness.egwd_binary()
EGWCTL = harness.egwctl_binary()


# --- frames -----------------------------------------------------------------------------------

def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip4(s):
    return socket.inet_aton(s)


def csum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_frame(src_mac, src, dst, proto, l4, bad_checksum=False):
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0, 64, proto, 0, ip4(src), ip4(dst))
    check = csum(header) ^ (0xFFFF if bad_checksum else 0)
    header = header[:10] + struct.pack("!H", check) + header[12:]
    return mac(PODS_MAC) + mac(src_mac) + b"\x08\x00" + header + l4


def l4_checksum(src, dst, proto, segment):
    pseudo = ip4(src) + ip4(dst) + struct.pack("!BBH", 0, proto, len(segment))
    return csum(pseudo + segment)


def udp(src, sport, dst, dport, payload=b"egw-cli"):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = l4_checksum(src, dst, 17, seg) or 0xFFFF
    seg = seg[:6] + struct.pack("!H", c) + seg[8:]
    return ipv4_frame("02:00:00:00:01:01", src, dst, 17, seg)


def tcp_syn(src, sport, dst, dport):
    seg = struct.pack("!HHIIBBHHH", sport, dport, 1000, 0, 5 << 4, 0x02, 64240, 0, 0)
    c = l4_checksum(src, dst, 6, seg)
    seg = seg[:16] + struct.pack("!H", c) + seg[18:]
    return ipv4_frame("02:00:00:00:01:01", src, dst, 6, seg)


def icmp_echo(src, dst, ident):
    msg = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"ping"
    msg = msg[:2] + struct.pack("!H", csum(msg)) + msg[4:]
    return ipv4_frame("02:00:00:00:01:01", src, dst, 1, msg)


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", 1, i, len(frame), len(frame)))
            f.write(frame)


# The sessions these frames make, as (proto, inside, outside, remote, service).
FLOWS = [
    (udp(WEB_PODS[0], 40001, REMOTE, 8080), ("udp", f"{WEB_PODS[0]}:40001", f"{WEB_INGRESS}:40001",
                                             f"{REMOTE}:8080", "default/web")),
    (udp(WEB_PODS[0], 40002, REMOTE, 8080), ("udp", f"{WEB_PODS[0]}:40002", f"{WEB_INGRESS}:40002",
                                             f"{REMOTE}:8080", "default/web")),
    (udp(WEB_PODS[1], 40003, REMOTE, 53), ("udp", f"{WEB_PODS[1]}:40003", f"{WEB_INGRESS}:40003",
                                           f"{REMOTE}:53", "default/web")),
    (tcp_syn(WEB_PODS[1], 40004, REMOTE, 443), ("tcp", f"{WEB_PODS[1]}:40004", f"{WEB_INGRESS}:40004",
                                                f"{REMOTE}:443", "default/web")),
    (icmp_echo(WEB_PODS[0], REMOTE, 4777), ("icmp", f"{WEB_PODS[0]}:4777", f"{WEB_INGRESS}:4777",
                                            f"{REMOTE}:0", "default/web")),
    (udp(OTHER_POD, 40005, REMOTE, 8080), ("udp", f"{OTHER_POD}:40005", f"{EXT1_ADDR}:40005",
                                           f"{REMOTE}:8080", "")),
    (udp(DB_POD, 40006, REMOTE_BLUE, 8080), ("udp", f"{DB_POD}:40006", f"{EXT2_ADDR}:40006",
                                             f"{REMOTE_BLUE}:8080", "default/db")),
]
MALFORMED = ipv4_frame("02:00:00:00:01:01", OTHER_POD, REMOTE, 17, b"\0" * 8, bad_checksum=True)
FRAMES = [f for f, _ in FLOWS] + [MALFORMED]


# --- configuration and manifests --------------------------------------------------------------

MANIFESTS = {
    "node.yaml": """\
apiVersion: v1
kind: Node
metadata:
  name: gw-1
  labels:
    egw.example.com/gateway: "true"
status:
  conditions:
  - type: Ready
    status: "True"
""",
    "web.yaml": """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {type: LoadBalancer, clusterIP: 10.96.0.50, externalTrafficPolicy: Cluster}
status: {loadBalancer: {ingress: [{ip: 192.0.2.50}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
endpoints:
- {addresses: [10.244.1.10], nodeName: worker-1, conditions: {ready: true}}
- {addresses: [10.244.1.11], nodeName: worker-2, conditions: {ready: true}}
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {name: web, namespace: default}
spec:
  sourceIPBy: LoadBalancerIP
  nodeSelector: {matchLabels: {egw.example.com/gateway: "true"}}
""",
    "db.yaml": """\
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec: {type: LoadBalancer, clusterIP: 10.96.0.60}
status: {loadBalancer: {ingress: [{ip: 192.0.2.60}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-1
  namespace: default
  labels: {kubernetes.io/service-name: db}
addressType: IPv4
endpoints:
- {addresses: [10.244.1.20], nodeName: worker-1, conditions: {ready: true}}
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {name: db, namespace: default}
spec: {sourceIPBy: Network, network: blue}
""",
    "ghost.yaml": """\
apiVersion: v1
kind: Service
metadata: {name: ghost, namespace: default}
spec: {type: LoadBalancer, clusterIP: 10.96.0.70}
status: {loadBalancer: {ingress: [{ip: 192.0.2.70}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ghost-1
  namespace: default
  labels: {kubernetes.io/service-name: ghost}
addressType: IPv4
endpoints:
- {addresses: [10.244.1.40], nodeName: worker-1, conditions: {ready: true}}
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {name: ghost, namespace: default}
spec: {sourceIPBy: LoadBalancerIP, network: nosuch}
""",
    "cart.yaml": """\
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec: {type: LoadBalancer, clusterIP: 10.96.0.80}
status: {loadBalancer: {ingress: [{ip: 192.0.2.80}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cart-1
  namespace: shop
  labels: {kubernetes.io/service-name: cart}
addressType: IPv4
endpoints:
- {addresses: [10.244.1.50], nodeName: worker-1, conditions: {ready: true}}
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {name: cart, namespace: shop}
spec:
  sourceIPBy: LoadBalancerIP
  nodeSelector: {matchLabels: {egw.example.com/gateway: "elsewhere"}}
""",
}


def write_config(workdir, file_prefix):
    """A config on three virtual ports; returns its path."""
    workdir = Path(workdir)
    (workdir / "manifests").mkdir()
    for name, text in MANIFESTS.items():
        (workdir / "manifests" / name).write_text(text)
    write_pcap(workdir / "pods-in.pcap", FRAMES)
    config = {
        "eal": {"lcores": "0-1", "main_lcore": 0, "no_huge": True, "memory_mb": 256, "file_prefix": file_prefix,
                "vdevs": [f"net_pcap0,rx_pcap={workdir}/pods-in.pcap,tx_pcap={workdir}/pods-out.pcap",
                          "net_null0,no-rx=1", "net_null1,no-rx=1"]},
        "workers": [1],
        "mempool": {"mbufs": 2047, "cache": 64},
        "ports": [
            {"name": "pods", "device": "net_pcap0", "role": "inside", "addresses": ["10.244.1.1/24"],
             "mac": PODS_MAC},
            {"name": "ext1", "device": "net_null0", "role": "outside", "addresses": [f"{EXT1_ADDR}/24"],
             "mac": "02:e9:00:00:00:03"},
            {"name": "ext2", "device": "net_null1", "role": "outside", "vrf": "blue",
             "addresses": [f"{EXT2_ADDR}/24"], "mac": "02:e9:00:00:00:04"},
        ],
        "neighbors": [
            {"port": "ext1", "ip": REMOTE, "mac": "02:00:00:00:00:64"},
            {"port": "ext2", "ip": REMOTE_BLUE, "mac": "02:00:00:00:00:65"},
        ],
        "vrfs": [{"name": "blue", "table": 100}],
        "routes": [{"vrf": "blue", "prefix": "203.0.113.0/24", "via": "198.51.100.254", "port": "ext2"}],
        "cluster": {"pod_cidrs": ["10.244.0.0/16"], "service_cidrs": ["10.96.0.0/12"], "node_ips": []},
        "default_action": "masquerade",
        "sessions": {"max": 4096,
                     "timeouts": {"tcp_established": 3600, "tcp_transitory": 3600, "udp": 3600, "icmp": 3600}},
        "node": {"name": "gw-1", "labels": {"egw.example.com/gateway": "true"}},
        "state": {"source": "files", "path": "manifests"},
    }
    path = workdir / "egw.json"
    path.write_text(json.dumps(config, indent=1))
    return path


# --- processes --------------------------------------------------------------------------------

def runtime_dir(file_prefix):
    return harness.dpdk_runtime_dir(file_prefix)


def require_environment():
    if os.geteuid() != 0:
        raise unittest.SkipTest("the CLI end-to-end tests run egwd, which needs root here")
    harness.require_binaries(EGWD, EGWCTL)


class Daemon:
    """One egwd in a work directory of its own, always stopped by close()."""

    def __init__(self, tag, interactive=False):
        self.file_prefix = f"egw-cli-{tag}-{os.getpid()}"
        self.workdir = Path(tempfile.mkdtemp(prefix=f"egw-cli-{tag}-"))
        self.config = write_config(self.workdir, self.file_prefix)
        self.status_file = self.workdir / "status.json"
        self.log_path = self.workdir / "egwd.log"
        self.socket = runtime_dir(self.file_prefix) / "egw.sock"
        self.proc = None
        self.master = None
        self.log = None
        args = [str(EGWD), "-c", str(self.config), "--status-file", str(self.status_file)]
        if interactive:
            self.master, slave = pty.openpty()
            self.proc = harness.spawn(args + ["-i"], cwd=self.workdir, stdin=slave, stdout=slave,
                                         stderr=slave, start_new_session=True)
            os.close(slave)
        else:
            self.log = open(self.log_path, "w")
            self.proc = harness.spawn(args, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=subprocess.STDOUT)

    def log_tail(self, lines=30):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def status(self):
        try:
            return json.loads(self.status_file.read_text())
        except (OSError, ValueError):
            return None

    def wait_ready(self, predicate=lambda st: True):
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"egwd exited with {self.proc.returncode}:\n{self.log_tail()}")
            st = self.status()
            if st and st.get("ready") and self.socket.exists() and predicate(st):
                return st
            time.sleep(0.1)
        raise RuntimeError(f"egwd not ready within {READY_TIMEOUT:g}s:\n{self.log_tail()}")

    def close(self):
        code = stop_process(self.proc)
        if self.master is not None:
            os.close(self.master)
            self.master = None
        if self.log:
            self.log.close()
            self.log = None
        shutil.rmtree(runtime_dir(self.file_prefix), ignore_errors=True)
        harness.remove_workdir(self.workdir, "test_cli")
        return code


def rows(text):
    """The data rows of a table: the lines after its upper-case header, split at runs of blanks."""
    lines = [l for l in text.splitlines() if l.strip()]
    for i, line in enumerate(lines):
        if line == line.upper() and re.match(r"^[A-Z][A-Z0-9-]*( {2,}[A-Z][A-Z0-9-]*)+$", line):
            cells = [re.split(r" {2,}", l.strip()) for l in lines[i + 1:]]
            return [c for c in cells if len(c) > 1]    # not the notes under the table
    return []


# --- egwctl against a running egwd ------------------------------------------------------------

class CliThroughEgwctl(unittest.TestCase):
    daemon = None

    @classmethod
    def setUpClass(cls):
        require_environment()
        cls.daemon = Daemon("ctl")
        cls.addClassCleanup(cls.daemon.close)
        # Every frame of the capture has been through the worker: all sessions exist, and the
        # malformed frame (the capture's last) has been counted, so the status file's snapshot
        # and the live counters agree from here on.
        cls.daemon.wait_ready(lambda st: len(st.get("sessions", [])) == len(FLOWS)
                              and st.get("drops", {}).get("malformed") == 1)

    def ctl(self, *args, stdin=None, check=None):
        r = subprocess.run([str(EGWCTL), "-p", self.daemon.file_prefix, *args], input=stdin, capture_output=True,
                           text=True, timeout=COMMAND_TIMEOUT)
        if check is not None:
            self.assertEqual(r.returncode, check, f"egwctl {' '.join(args)}:\n{r.stdout}{r.stderr}")
        return r

    def out(self, *args):
        return self.ctl(*args, check=0).stdout

    def json(self, *args):
        return json.loads(self.out("--json", *args))

    def assert_alive(self):
        self.assertIsNone(self.daemon.proc.poll(), f"egwd died:\n{self.daemon.log_tail()}")
        self.assertIn("REASON", self.out("show", "drops"))

    # ports

    def test_port_stats_match_ethdev(self):
        text = self.out("show", "port", "stats", "all")
        table = {r[1]: r for r in rows(text)}
        self.assertEqual(set(table), {"pods", "ext1", "ext2"}, text)
        self.assertEqual(table["pods"][0], "0")
        self.assertEqual(table["pods"][3], str(len(FRAMES)), text)    # RX-PACKETS
        one = self.json("show", "port", "stats", "pods")
        self.assertEqual(len(one), 1)
        self.assertEqual(one[0]["id"], 0)
        self.assertEqual(one[0]["rx_packets"], len(FRAMES))
        by_id = self.json("show", "port", "stats", "0")
        self.assertEqual(by_id[0]["name"], "pods")
        # egw's own transmit-queue counters: nothing refused, no queue stalled on this run.
        self.assertIn("TX-STALLS", text)
        for p in self.json("show", "port", "stats", "all"):
            self.assertEqual((p["tx_refused"], p["tx_stalls"], p["tx_stalled_queues"]), (0, 0, 0), p)
        # What went out: every flow but the malformed frame, through ext1 or ext2, and once the
        # gratuitous ARPs are done, 3 of them for each address answered there (ext1: its own and
        # web's ingress IP; ext2: its own).
        deadline = time.monotonic() + 5
        while self.json("show", "arp")["announcing"] and time.monotonic() < deadline:
            time.sleep(0.2)
        sent = {p["name"]: p["tx_packets"] for p in self.json("show", "port", "stats", "all")}
        self.assertEqual(sent["ext1"] + sent["ext2"], len(FLOWS) + 3 * 3)
        self.assertEqual(sent["ext2"], 1 + 3)

    def test_port_xstats(self):
        text = self.out("show", "port", "xstats", "pods")
        self.assertIn("NAME", text)
        self.assertRegex(text, rf"rx_good_packets +{len(FRAMES)}\b")
        j = self.json("show", "port", "xstats", "0")
        self.assertEqual(j["port"], "pods")
        self.assertEqual(j["xstats"]["rx_good_packets"], len(FRAMES))

    def test_zy_clear_port_stats(self):
        self.assertGreater(self.json("show", "port", "stats", "ext2")[0]["tx_packets"], 0)
        self.assertIn("statistics cleared: ext2", self.out("clear", "port", "stats", "ext2"))
        self.assertEqual(self.json("show", "port", "stats", "ext2")[0]["tx_packets"], 0)
        self.assertEqual(self.json("show", "port", "stats", "pods")[0]["rx_packets"], len(FRAMES))

    def test_port_info(self):
        info = {p["name"]: p for p in self.json("sh", "po", "info", "all")}
        self.assertEqual(set(info), {"pods", "ext1", "ext2"})
        self.assertEqual(info["pods"]["driver"], "net_pcap")
        self.assertEqual(info["ext1"]["driver"], "net_null")
        self.assertRegex(info["pods"]["mac"], r"^([0-9A-F]{2}:){5}[0-9A-F]{2}$")  # the device's own
        self.assertEqual(info["pods"]["rx_queues"], 1)
        self.assertEqual(info["pods"]["rss"], "none")
        self.assertIsNone(info["pods"]["steering"])          # inside: nothing to steer
        self.assertEqual(info["ext1"]["steering"], "software")
        self.assertIn("DRIVER", self.out("show", "port", "info", "pods"))

    def test_steering(self):
        # One worker: the outside ports stay on software (nothing to steer) and no rule is made.
        st = self.json("show", "steering")
        self.assertEqual([p["name"] for p in st["ports"]], ["ext1", "ext2"])
        for p in st["ports"]:
            self.assertEqual((p["mode"], p["reason"], p["rules_installed"]),
                             ("software", "one worker: every reply is its own", 0), p)
        self.assertEqual([(w["index"], w["nat_ports"]) for w in st["workers"]], [(0, "1024-65535")])
        # The rules a NIC would get, in testpmd syntax: one address, one worker, 6 matches x 3 protocols.
        ext1 = st["ports"][0]
        self.assertEqual(len(ext1["rules"]) % 18, 0, ext1["rules"])
        self.assertIn(f"flow create {ext1['id']} ingress pattern eth / ipv4 dst is {WEB_INGRESS} / tcp dst spec 1024 "
                      "dst mask 0xfc00 / end actions queue index 0 / end", ext1["rules"])
        self.assertIn("not installed", self.out("show", "steering"))

    def test_zz_clear_counters(self):
        self.assertIn("statistics cleared: pods, ext1, ext2", self.out("clear", "counters"))
        for p in self.json("show", "port", "stats", "all"):
            self.assertEqual((p["rx_packets"], p["tx_packets"]), (0, 0), p)

    def test_habits_of_testpmd_and_vppctl_users(self):
        # Prefixes, -j anywhere, ? for what may follow, show version.
        self.assertEqual(self.out("sh", "serv"), self.out("show", "services"))
        self.assertEqual(json.loads(self.out("sh", "serv", "-j")), self.json("show", "services"))
        self.assertEqual(json.loads(self.out("show", "-j", "services")), self.json("show", "services"))
        words = self.out("show", "?").split()
        self.assertIn("services", words)
        self.assertIn("version", words)
        self.assertEqual(self.out("show", "port", "?").split(), ["info", "stats", "xstats"])
        r = self.ctl("show", "se", check=1)
        self.assertIn('ambiguous "se" after "show": service, services, sessions', r.stdout + r.stderr)
        v = self.json("show", "version")
        self.assertRegex(v["egwd"], r"^\d+\.\d+\.\d+$")
        self.assertTrue(v["dpdk"].startswith("DPDK "))
        self.assertIn("egwd " + v["egwd"], self.out("sh", "ver"))

    # services

    def test_services(self):
        text = self.out("show", "services")
        table = {r[0]: r for r in rows(text)}
        self.assertEqual(set(table), {"default/web", "default/db", "default/ghost", "shop/cart"}, text)
        self.assertEqual(table["default/web"][1:3], ["gw-1", "yes"])
        self.assertEqual(table["default/db"][1:3], ["ALL", "yes"])
        self.assertEqual(table["default/ghost"][2], "no")
        self.assertIn("unknown network", table["default/ghost"][-1])
        self.assertEqual(table["shop/cart"][1], '""')
        # No Service of the capture has an IPv6 ingress IP: its column says so on every row.
        self.assertEqual({key: row[5] for key, row in table.items()}, {key: "-" for key in table}, text)
        services = {s["key"]: s for s in self.json("show", "services")}
        status = {s["key"]: s for s in self.daemon.status()["services"]}
        self.assertEqual(set(services), set(status))
        for key, s in services.items():
            for field in ("status_host", "reason", "programmed", "mode", "ingress_ip", "vrf", "endpoints"):
                self.assertEqual(s[field], status[key][field], f"{key} {field}")
        self.assertEqual(services["default/web"]["packets_out"], 5)

    def test_services_of_a_namespace(self):
        table = rows(self.out("show", "services", "namespace", "shop"))
        self.assertEqual([r[0] for r in table], ["shop/cart"])
        self.assertEqual([s["key"] for s in self.json("show", "services", "namespace", "default")],
                         ["default/db", "default/ghost", "default/web"])

    def test_one_service(self):
        text = self.out("show", "service", "default/web")
        for expected in ("sourceIPBy      LoadBalancerIP", "status.host     gw-1", "egw.example.com/gateway=true",
                         "ingress IPs     192.0.2.50", "endpoints       10.244.1.10, 10.244.1.11",
                         "programmed      yes: SNAT to 192.0.2.50, VRF default"):
            self.assertIn(expected, text)
        j = self.json("show", "service", "default/web")
        self.assertEqual(j["spec"]["sourceIPBy"], "LoadBalancerIP")
        self.assertEqual(j["spec"]["nodeSelector"]["matchLabels"], {"egw.example.com/gateway": "true"})
        self.assertEqual(j["status"]["host"], "gw-1")
        self.assertEqual(j["ingress_ips"], ["192.0.2.50"])
        self.assertEqual(j["counters"]["packets_out"], 5)
        self.assertEqual(j["counters"]["sessions_active"], 5)
        cart = self.json("show", "service", "shop/cart")
        self.assertEqual(cart["status"]["host"], "")
        self.assertTrue(cart["reason"], "an unserved Service says why")
        ghost = self.out("show", "service", "default/ghost")
        self.assertIn('programmed      no: unknown network "nosuch"', ghost)

    # sessions

    def test_sessions(self):
        listed = self.json("show", "sessions")
        self.assertFalse(listed["truncated"])
        got = sorted((s["proto"], s["inside"], s["outside"], s["remote"], s["service"]) for s in listed["sessions"])
        self.assertEqual(got, sorted(f for _, f in FLOWS))
        self.assertEqual(len(rows(self.out("show", "sessions"))), len(FLOWS))

    def test_session_filters(self):
        def count(*args):
            return len(self.json("show", "sessions", *args)["sessions"])
        self.assertEqual(count("service", "default/web"), 5)
        self.assertEqual(count("service", "default/db"), 1)
        self.assertEqual(count("saddr", WEB_PODS[0]), 3)
        self.assertEqual(count("saddr", WEB_PODS[0], "proto", "udp"), 2)
        self.assertEqual(count("daddr", REMOTE_BLUE), 1)
        self.assertEqual(count("dport", "53"), 1)
        self.assertEqual(count("sport", "40002", "service", "default/web"), 1)
        self.assertEqual(count("proto", "icmp"), 1)
        tcp = self.json("show", "sessions", "proto", "tcp")["sessions"]
        self.assertEqual([s["state"] for s in tcp], ["opening"])
        limited = self.json("show", "sessions", "limit", "2")
        self.assertEqual(len(limited["sessions"]), 2)
        self.assertTrue(limited["truncated"])
        self.assertIn("more match", self.out("show", "sessions", "limit", "2"))
        blue = self.json("show", "sessions", "daddr", REMOTE_BLUE)["sessions"][0]
        self.assertEqual((blue["vrf"], blue["port"], blue["outside"]), ("blue", "ext2", f"{EXT2_ADDR}:40006"))

    def test_snat_pools(self):
        pools = self.json("show", "snat", "pools")
        use = {(p["address"], p["proto"]): p for p in pools}
        self.assertEqual(use[(WEB_INGRESS, "udp")]["ports_in_use"], 3)
        self.assertEqual(use[(WEB_INGRESS, "tcp")]["ports_in_use"], 1)
        self.assertEqual(use[(WEB_INGRESS, "icmp")]["ports_in_use"], 1)
        self.assertEqual(use[(WEB_INGRESS, "udp")]["used_by"], ["default/web"])
        self.assertEqual(use[(EXT1_ADDR, "udp")]["ports_in_use"], 1)
        self.assertEqual(use[(EXT2_ADDR, "udp")]["ports_in_use"], 1)
        self.assertEqual(use[(EXT2_ADDR, "tcp")]["ports_in_use"], 0)
        self.assertEqual(use[(WEB_INGRESS, "udp")]["capacity"], 65535 - 1024 + 1)
        table = rows(self.out("show", "snat", "pools"))
        self.assertIn([WEB_INGRESS, "default/web", "udp", "0", "3", "64512", "0.0%", "3"], table)

    # routing

    def test_vrfs_and_routes(self):
        table = {r[0]: r for r in rows(self.out("show", "vrfs"))}
        self.assertEqual(table["default"][1:3], ["254", "pods,ext1"])
        self.assertEqual(table["blue"], ["blue", "100", "ext2", "2", "default/db"])
        routes = self.json("show", "routes", "vrf", "blue")
        self.assertEqual(routes["falls_back_to"], "default")
        self.assertEqual([(r["prefix"], r["via"], r["port"], r["type"]) for r in routes["routes"]],
                         [("198.51.100.0/24", None, "ext2", "connected"),
                          ("203.0.113.0/24", "198.51.100.254", "ext2", "static")])
        self.assertEqual(self.json("show", "routes", "vrf", "100"), routes)
        text = self.out("show", "routes", "vrf", "default")
        self.assertIn("10.244.1.0/24", text)
        self.assertNotIn("looked up in VRF", text)

    def test_neighbors(self):
        table = {r[1]: r for r in rows(self.out("show", "neighbors"))}
        self.assertEqual(table[REMOTE][0], "ext1")
        self.assertEqual(table[REMOTE][2:4], ["02:00:00:00:00:64", "static"])
        self.assertEqual({n["ip"] for n in self.json("show", "neighbors")}, {REMOTE, REMOTE_BLUE})

    def test_arp(self):
        # Announced since start: the three port addresses on their ports and web's ingress IP on
        # ext1 (db is a Network Service, cart is served elsewhere), 3 times each, 1 s apart.
        j = self.json("show", "arp")
        self.assertEqual(j["addresses_announced"], 4, j)
        self.assertEqual(j["announcements_failed"], 0, j)
        self.assertGreaterEqual(j["announcements_sent"], 4, j)
        self.assertLessEqual(j["announcements_sent"], 12, j)
        self.assertEqual(j["announcements_sent"] + sum(a["left"] for a in j["announcing"]), 12, j)
        for a in j["announcing"]:
            self.assertIn((a["port"], a["ip"], a["what"]),
                          {("pods", "10.244.1.1", "port address"), ("ext1", EXT1_ADDR, "port address"),
                           ("ext2", EXT2_ADDR, "port address"), ("ext1", WEB_INGRESS, "ingress IP")})
            self.assertLessEqual(a["next_ms"], 1000)
        deadline = time.monotonic() + 5
        while self.json("show", "arp")["announcing"] and time.monotonic() < deadline:
            time.sleep(0.2)
        j = self.json("show", "arp")
        self.assertEqual((j["announcements_sent"], j["announcing"]), (12, []))
        table = {r[0]: r for r in rows(self.out("show", "arp"))}
        self.assertEqual(table["announcements_sent"][1], "12")
        self.assertIn("no gratuitous ARP in progress", self.out("show", "arp"))

    # system

    def test_lcores(self):
        j = self.json("show", "lcores")
        self.assertEqual(j[0]["role"], "control")
        worker = j[1]
        self.assertEqual((worker["lcore"], worker["index"], worker["rx_queues"]), (1, 0, ["pods:0", "ext1:0", "ext2:0"]))
        self.assertGreater(worker["total_cycles"], 0)
        self.assertGreaterEqual(worker["total_cycles"], worker["busy_cycles"])
        self.assertGreater(worker["busy_cycles"], 0)
        # Every per-worker counter of EGW_WORKER_COUNTERS is there, the poll loop's iterations too.
        self.assertGreater(worker["iterations"], 0)
        self.assertGreaterEqual(worker["sessions_created"], worker["sessions_closed"])
        self.assertIn("BUSY-CYCLES", self.out("show", "lcores"))

    def test_drops(self):
        drops = self.json("show", "drops")
        self.assertEqual(drops["malformed"], 1)
        self.assertEqual(drops, self.daemon.status()["drops"])
        table = {r[0]: r for r in rows(self.out("show", "drops"))}
        self.assertEqual(table["malformed"][1], "1")

    def test_config(self):
        j = self.json("show", "config")
        self.assertEqual(j["file"], str(self.daemon.config))
        self.assertEqual(j["eal"]["file_prefix"], self.daemon.file_prefix)
        self.assertEqual([p["name"] for p in j["ports"]], ["pods", "ext1", "ext2"])
        self.assertEqual(j["sessions"]["max"], 4096)
        # Sections the file leaves out are there with their defaults; state has its source's keys only.
        self.assertEqual(j["metrics"], {"enabled": False, "listen": "127.0.0.1:9469"})
        self.assertNotIn("kubeconfig", j["state"])
        text = self.out("show", "config")
        self.assertRegex(text, r"ports\[2\]\.vrf +blue")
        self.assertRegex(text, r"metrics\.enabled +false")
        # Without "file", the JSON form is a configuration file: egwctl -c loads it to find the socket.
        dump = self.daemon.workdir / "show-config.json"
        dump.write_text(json.dumps({k: v for k, v in j.items() if k != "file"}))
        r = subprocess.run([str(EGWCTL), "-c", str(dump), "show", "drops"], capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("REASON", r.stdout)

    def test_log_level(self):
        self.assertIn("log level is now debug", self.out("set", "log", "level", "debug"))
        self.assertIn("log level is now info", self.out("set", "log", "level", "info"))
        time.sleep(0.2)
        self.assertIn("log level debug (was info)", self.daemon.log_path.read_text())

    def test_help(self):
        overview = self.out("help")
        for section in ("ports", "services", "sessions", "routing", "system"):
            self.assertRegex(overview, rf"(?m)^  {section} ")
        sessions = self.out("help", "sessions")
        self.assertIn("show snat pools", sessions)
        self.assertIn("clear sessions service SERVICE", sessions)
        self.assertNotIn("show port xstats", sessions)
        everything = self.out("help", "all")
        self.assertIn("show port xstats PORT", everything)
        self.assertIn("set log level LEVEL", everything)

    def test_every_show_has_json(self):
        for cmd in (["show", "port", "stats", "all"], ["show", "port", "xstats", "ext1"], ["show", "services"],
                    ["show", "service", "default/db"], ["show", "sessions"], ["show", "snat", "pools"],
                    ["show", "vrfs"], ["show", "routes", "vrf", "blue"], ["show", "neighbors"], ["show", "arp"], ["show", "lcores"],
                    ["show", "drops"], ["show", "config"]):
            with self.subTest(cmd=" ".join(cmd)):
                self.json(*cmd)
                self.assertIsInstance(json.loads(self.out(*cmd, "--json")), (dict, list))

    def test_show_k8s_on_the_files_source_says_why_not(self):
        r = self.ctl("show", "k8s")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("files", r.stdout + r.stderr)
        self.assertIn("no Kubernetes connection", r.stdout + r.stderr)
        self.assert_alive()

    # bad input

    def test_bad_input_is_named(self):
        cases = [
            (["frobnicate"], 'unknown command "frobnicate": expected one of clear, help, quit, reload, set, show, trace'),
            (["show", "portz"], 'unknown word "portz" after "show"'),
            (["show"], 'incomplete command "show": expected one of '),
            (["show", "port", "stats"], 'missing PORTS (a port name or DPDK port id, or all) after "show port stats"'),
            (["show", "port", "stats", "9"], 'bad PORTS "9" after "show port stats"'),
            (["show", "port", "xstats", "all"], 'bad PORT "all"'),
            (["show", "service", "web"], 'bad SERVICE "web" after "show service": expected an EgressService as '
                                         'namespace/name; usage: show service SERVICE'),
            (["show", "service", "default/nope"], 'no EgressService "default/nope"'),
            (["show", "sessions", "limit", "0"], 'bad N "0"'),
            (["show", "sessions", "saddr", "10.0.0"], 'bad IP "10.0.0"'),
            (["show", "sessions", "proto", "sctp"], 'bad PROTO "sctp"'),
            (["show", "sessions", "color", "red"], 'unexpected "color" after "show sessions": expected one of'),
            (["show", "drops", "now"], 'unexpected "now" after "show drops": the command ends there'),
            (["show", "routes", "vrf", "green"], 'bad VRF "green"'),
            (["set", "log", "level", "loud"], 'bad LEVEL "loud"'),
            (["help", "nonsense"], 'bad SECTION "nonsense"'),
            (["clear", "sessions", "service", "default/nope"], 'no EgressService "default/nope"'),
        ]
        for args, message in cases:
            with self.subTest(cmd=" ".join(args)):
                r = self.ctl(*args, check=1)
                self.assertIn(message, r.stderr)
                self.assertEqual(r.stdout, "")
        self.assert_alive()

    def test_protocol(self):
        sock = self.daemon.socket
        self.assertEqual(stat.S_IMODE(os.stat(sock).st_mode), 0o600)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(COMMAND_TIMEOUT)
            s.connect(str(sock))
            f = s.makefile("rwb")

            def ask(line):
                f.write(line.encode() + b"\n")
                f.flush()
                status, length = f.readline().decode().split()
                return status, f.read(int(length)).decode()

            self.assertEqual(ask("complete show po"), ("ok", "c port\n"))
            status, body = ask("complete show service ")
            self.assertEqual(body.splitlines(), ["c default/db", "c default/ghost", "c default/web", "c shop/cart"])
            status, body = ask("complete show sessions saddr ")
            self.assertEqual(body, "h IP: an IPv4 or IPv6 address\n")
            self.assertEqual(ask("run show drops --json")[0], "ok")
            self.assertEqual(ask("frob x"), ("error", 'unknown request "frob": expected run or complete\n'))
            self.assertEqual(ask("run quit"), ("bye", "bye\n"))
            self.assertEqual(f.read(), b"")          # closed after bye
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(COMMAND_TIMEOUT)
            s.connect(str(sock))
            s.sendall(b"run " + b"x" * 5000 + b"\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            self.assertTrue(data.startswith(b"error "), data)
            self.assertIn(b"longer than 4096 bytes", data)
        self.assert_alive()

    # modes

    def test_one_shot_with_config_and_socket_options(self):
        self.assertIn("REASON", subprocess.run([str(EGWCTL), "-c", str(self.daemon.config), "show", "drops"],
                                               capture_output=True, text=True, timeout=COMMAND_TIMEOUT).stdout)
        self.assertIn("REASON", subprocess.run([str(EGWCTL), "--socket", str(self.daemon.socket), "show", "drops"],
                                               capture_output=True, text=True, timeout=COMMAND_TIMEOUT).stdout)
        r = subprocess.run([str(EGWCTL), "-p", "egw-cli-nobody-here", "show", "drops"], capture_output=True,
                           text=True, timeout=COMMAND_TIMEOUT)
        self.assertEqual(r.returncode, 3)
        self.assertIn("egw-cli-nobody-here/egw.sock", r.stderr)

    def test_file_mode(self):
        script = self.daemon.workdir / "commands.egw"
        script.write_text("# a comment, then a blank line\n\nshow vrfs\nshow bogus\nshow drops\n")
        r = self.ctl("-f", str(script), check=1)
        self.assertIn("VRF", r.stdout)
        self.assertIn("REASON", r.stdout)                    # went on after the error
        self.assertIn(f"{script}:4: unknown word \"bogus\" after \"show\"", r.stderr)
        r = self.ctl("-f", str(script), "--stop-on-error", "-x", check=1)
        self.assertIn("egw> show vrfs", r.stdout)
        self.assertIn("egw> show bogus", r.stdout)
        self.assertNotIn("REASON", r.stdout)                 # stopped at line 4
        script.write_text("show vrfs\nshow drops\n")
        self.assertEqual(self.ctl("-e", "-f", str(script)).returncode, 0)

    def test_stdin_mode(self):
        r = self.ctl("--json", stdin="show vrfs\nshow drops\nquit\nshow lcores\n", check=0)
        docs = r.stdout.split("\n}\n")  # pretty-printed documents, one after the other
        self.assertEqual(json.loads(r.stdout[:r.stdout.index("\n]\n") + 2])[0]["name"], "default")
        self.assertIn('"malformed": 1', r.stdout)
        self.assertIn('"message": "bye"', r.stdout)
        self.assertNotIn("BUSY", r.stdout)
        self.assertGreaterEqual(len(docs), 2)

    # state changes run last (tests run in name order)

    def test_zz_clear_sessions(self):
        r = self.out("clear", "sessions", "service", "default/web")
        self.assertIn("closed 5 session(s) of default/web", r)
        self.assertEqual(self.json("show", "sessions", "service", "default/web")["sessions"], [])
        self.assertEqual(len(self.json("show", "sessions")["sessions"]), len(FLOWS) - 5)
        web = self.json("show", "service", "default/web")["counters"]
        self.assertEqual(web["sessions_active"], 0)
        self.assertEqual(self.json("clear", "sessions", "all"), {"closed": 2, "per_worker": [2]})
        self.assertEqual(self.json("show", "sessions")["sessions"], [])
        self.assert_alive()

    def test_zzz_socket_removed_on_exit(self):
        self.assertTrue(self.daemon.socket.exists())
        self.assertEqual(stop_process(self.daemon.proc), 0, self.daemon.log_tail())
        self.assertFalse(self.daemon.socket.exists(), "egwd left its socket behind")


# --- reload config --------------------------------------------------------------------------

class ReloadConfig(unittest.TestCase):
    """`reload config` (and SIGHUP) against a daemon of its own: the tests edit its file."""
    daemon = None

    @classmethod
    def setUpClass(cls):
        require_environment()
        cls.daemon = Daemon("reload")
        cls.addClassCleanup(cls.daemon.close)
        cls.daemon.wait_ready()
        cls.original = cls.daemon.config.read_text()

    def setUp(self):
        self.daemon.config.write_text(self.original)
        self.ctl("reload", "config", check=0)   # every test starts from the file egwd began with

    def ctl(self, *args, check=None):
        r = subprocess.run([str(EGWCTL), "-p", self.daemon.file_prefix, *args], capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT)
        if check is not None:
            self.assertEqual(r.returncode, check, f"egwctl {' '.join(args)}:\n{r.stdout}{r.stderr}")
        return r

    def edit(self, change):
        cfg = json.loads(self.original)
        change(cfg)
        self.daemon.config.write_text(json.dumps(cfg, indent=1))

    def running(self):
        return json.loads(self.ctl("--json", "show", "config", check=0).stdout)

    def test_unchanged_file_is_no_change(self):
        r = self.ctl("reload", "config", check=0)
        self.assertIn("has no change", r.stdout)

    def test_routes_neighbours_and_default_action_apply_live(self):
        def change(cfg):
            cfg["routes"].append({"prefix": "0.0.0.0/0", "via": REMOTE, "port": "ext1"})
            cfg["neighbors"][0]["mac"] = "02:00:00:00:00:99"
            cfg["neighbors"].pop(1)
            cfg["default_action"] = "drop"
        self.edit(change)
        r = self.ctl("reload", "config", check=0)
        self.assertIn("applied default_action, neighbors, routes", r.stdout)
        self.assertEqual(self.running()["default_action"], "drop")
        routes = self.ctl("show", "routes", "vrf", "default", check=0).stdout
        self.assertIn("0.0.0.0/0", routes)
        neighbors = {r[1]: r for r in rows(self.ctl("show", "neighbors", check=0).stdout)}
        self.assertEqual(neighbors[REMOTE][2:4], ["02:00:00:00:00:99", "static"])
        # The neighbour no longer listed stays known, as an ordinary entry ARP must confirm.
        self.assertNotEqual(neighbors[REMOTE_BLUE][3], "static", neighbors[REMOTE_BLUE])

    def test_a_setting_read_at_start_refuses_the_whole_file(self):
        def change(cfg):
            cfg["ports"][1]["mtu"] = 9000
            cfg["sessions"]["timeouts"]["udp"] = 30
            cfg["default_action"] = "route"
        self.edit(change)
        r = self.ctl("reload", "config")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        out = r.stdout + r.stderr
        self.assertIn("reload refused", out)
        self.assertIn("ports[1].mtu, sessions.timeouts.udp", out)
        self.assertIn("Nothing was applied", out)
        running = self.running()
        self.assertEqual(running["default_action"], "masquerade")
        self.assertEqual(running["ports"][1]["mtu"], 1500)

    def test_a_broken_file_is_refused_with_file_and_path(self):
        self.edit(lambda cfg: cfg.update(default_action="explode"))
        r = self.ctl("reload", "config")
        self.assertNotEqual(r.returncode, 0)
        out = r.stdout + r.stderr
        self.assertIn(f"{self.daemon.config}: $.default_action: expected", out)
        self.assertIn("keeps running", out)
        self.daemon.config.write_text("{ not json")
        r = self.ctl("reload", "config")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(str(self.daemon.config), r.stdout + r.stderr)
        self.assertEqual(self.running()["default_action"], "masquerade")
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.log_tail())

    def test_sighup_reloads_too(self):
        self.edit(lambda cfg: cfg.update(default_action="route"))
        self.daemon.proc.send_signal(signal.SIGHUP)
        harness.wait_for(lambda: self.running()["default_action"] == "route", 5,
                         lambda: f"SIGHUP did not reload:\n{self.daemon.log_tail()}")
        self.assertIn("configuration reloaded from", self.daemon.log_tail())


# --- egwd -i on a pseudo-terminal -------------------------------------------------------------

class ConsoleOnPty(unittest.TestCase):
    daemon = None

    @classmethod
    def setUpClass(cls):
        require_environment()
        cls.daemon = Daemon("pty", interactive=True)
        cls.addClassCleanup(cls.daemon.close)
        cls.pending = ""
        cls.daemon.wait_ready()
        cls.expect_cls("egw> ")

    @classmethod
    def read_more(cls, until, timeout=COMMAND_TIMEOUT):
        """Reads the terminal until `until` (a regex) matches; returns the text up to the match's
        end and keeps the rest for the next call."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(until, cls.pending)
            if m:
                got, cls.pending = cls.pending[:m.end()], cls.pending[m.end():]
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {until!r} on the console within {timeout:g}s; got:\n{cls.pending!r}")
            r, _, _ = select.select([cls.daemon.master], [], [], left)
            if r:
                try:
                    cls.pending += os.read(cls.daemon.master, 65536).decode(errors="replace")
                except OSError:
                    raise AssertionError(f"console closed; got:\n{cls.pending!r}")

    @classmethod
    def expect_cls(cls, text):
        return cls.read_more(re.escape(text))

    def send(self, keys):
        os.write(self.daemon.master, keys.encode())

    def command(self, line):
        """Types a line and Enter; returns its output, up to the next prompt."""
        self.send(line + "\r")
        self.read_more(re.escape(line) + r"\r*\n")
        return self.expect_cls("egw> ")

    def clear_line(self):
        self.send("\x15")                                    # Ctrl-U: the line is dropped and redrawn
        self.expect_cls("egw> \x1b[K")

    def test_completion_of_commands_and_live_names(self):
        self.send("sh\t")
        self.assertIn("show ", self.expect_cls("show "))
        self.send("serv\t")                                 # service or services: common prefix
        self.expect_cls("service")
        self.send(" \t")                                     # live Service names, listed
        listing = self.expect_cls("shop/cart")
        for key in ("default/db", "default/ghost", "default/web"):
            self.assertIn(key, listing)
        self.send("default/w\t")                             # one candidate: completed with a space
        self.expect_cls("default/web ")
        self.send("\r")
        self.expect_cls("status.host     gw-1")
        self.expect_cls("egw> ")
        self.send("show port stats \t")
        listing = self.expect_cls("pods")
        for word in ("all", "ext1", "ext2", "0", "1", "2"):
            self.assertIn(word, listing)
        self.clear_line()
        self.send("show routes vrf b\t")
        self.expect_cls("blue ")
        self.send("\r")
        self.expect_cls("203.0.113.0/24")
        self.expect_cls("egw> ")
        self.send("show sessions saddr \t")                  # a free-form argument: its hint
        self.expect_cls("<IP: an IPv4 or IPv6 address>")
        self.clear_line()

    def test_help_and_errors(self):
        out = self.command("help")
        self.assertIn("help SECTION", out)
        self.assertRegex(out, r"sessions +NAPT sessions")
        out = self.command("help ports")
        self.assertIn("show port xstats PORT", out)
        self.assertIn("PORTS  a port name or DPDK port id, or all", out)
        self.assertIn('unknown word "lcorez" after "show"', self.command("show lcorez"))
        self.assertIn("malformed", self.command("show drops"))
        self.assertIsNone(self.daemon.proc.poll())

    def test_history(self):
        self.command("show vrfs")
        self.send("\x1b[A")                                  # Up: the previous line again
        self.expect_cls("show vrfs")
        self.send("\r")
        self.assertIn("blue", self.expect_cls("egw> "))

    def test_z_quit_stops_egwd(self):
        self.send("quit\r")
        self.expect_cls("stopping egwd")
        self.assertEqual(self.daemon.proc.wait(timeout=STOP_TIMEOUT), 0)
        self.assertFalse(self.daemon.socket.exists())


if __name__ == "__main__":
    unittest.main()
