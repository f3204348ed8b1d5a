# SPDX-License-Identifier: Apache-2.0
"""End to end: EgressFirewall enforced by egwd on real kernels' traffic (docs/kubernetes.md,
"EgressFirewall").

scripts/netns.sh's topology with a tag of its own and the demo configuration (the `files` source,
so enforcement is on by default). The staged manifests gain Pods for web's endpoint 10.244.1.10
(namespace default) and 10.244.1.11 (namespace shop), and an EgressFirewall for namespace default.
A UDP echo server in ext1 (192.0.2.100) answers on two ports with the source it saw.

- A denied port is dropped and counted while another port of the same server passes, translated;
  a pod of a namespace without a firewall reaches the denied port.
- A rule change (the manifest rewritten: the server's address denied) cuts a flow that was
  exchanging datagrams: its answers stop without any new connection, and a new flow is dropped.
- A dnsName rule follows DNS: dnsmasq on the loopback of the namespace egwd runs in (its
  `policy.dns_servers`) serves a name from a hosts file with a TTL of 5 s. `Allow dnsName` then
  `Deny 0.0.0.0/0` lets flows to the name's address pass and denies (and counts) another address
  of ext1; when the hosts file (and SIGHUP) moves the name to that other address, new flows follow
  within the TTL and some slack, and `show egressfirewall` shows the rule's new address.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_firewall_e2e.py
"""

import json
import os
import signal
import subprocess
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
from harness import run  # noqa: E402

DEMO_CONFIG = REPO / "config" / "demo.json"
PREFIX = f"egwfw{os.getpid()}"
TAG = harness.iface_tag("f")
FILE_PREFIX = f"egw-fw-{os.getpid()}"

FIREWALLED_POD = "10.244.1.10"  # default/web-0: web's endpoint in namespace default
OTHER_POD = "10.244.1.11"       # shop/web-1: web's endpoint in namespace shop (no firewall)
WEB_INGRESS = "192.0.2.50"
SERVER = "192.0.2.100"
ALLOWED_PORT = 9201
DENIED_PORT = 9202
# The dnsName case: the name moves from SERVER to DNS_SECOND (a second address of ext1), both
# answered on DNS_PORT by an echo server bound to each address (so answers leave from it).
DNS_NAME = "api.fw.test"
DNS_SECOND = "192.0.2.101"
DNS_PORT = 9203
DNS_TTL = 5  # seconds, dnsmasq's --local-ttl: the resolver's floor

PODS = textwrap.dedent("""\
    apiVersion: v1
    kind: Pod
    metadata: {name: web-0, namespace: default, labels: {app: web}}
    spec: {nodeName: worker-1}
    status: {phase: Running, podIPs: [{ip: 10.244.1.10}]}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: web-1, namespace: shop, labels: {app: web}}
    spec: {nodeName: worker-1}
    status: {phase: Running, podIPs: [{ip: 10.244.1.11}]}
""")

DENY_PORT = textwrap.dedent(f"""\
    apiVersion: k8s.ovn.org/v1
    kind: EgressFirewall
    metadata: {{name: default, namespace: default}}
    spec:
      egress:
      - type: Deny
        to: {{cidrSelector: 0.0.0.0/0}}
        ports: [{{protocol: UDP, port: {DENIED_PORT}}}]
""")

DENY_SERVER = textwrap.dedent(f"""\
    apiVersion: k8s.ovn.org/v1
    kind: EgressFirewall
    metadata: {{name: default, namespace: default}}
    spec:
      egress:
      - type: Deny
        to: {{cidrSelector: {SERVER}/32}}
""")

ALLOW_NAME = textwrap.dedent(f"""\
    apiVersion: k8s.ovn.org/v1
    kind: EgressFirewall
    metadata: {{name: default, namespace: default}}
    spec:
      egress:
      - type: Allow
        to: {{dnsName: {DNS_NAME}}}
      - type: Deny
        to: {{cidrSelector: 0.0.0.0/0}}
""")

# ECHO bound to each address given (port first), so each answer leaves from the address its
# datagram was sent to, as egwd's session expects.
ECHO_AT = textwrap.dedent("""\
    import json, selectors, socket, sys
    sel = selectors.DefaultSelector()
    for addr in sys.argv[2:]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((addr, int(sys.argv[1])))
        sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            data, addr = key.fileobj.recvfrom(2048)
            key.fileobj.sendto(json.dumps({"src": addr[0], "seq": data.decode()}).encode(), addr)
""")

# The echo server in ext1: answers each datagram on either port with the source it saw.
ECHO = textwrap.dedent("""\
    import json, selectors, socket, sys
    sel = selectors.DefaultSelector()
    for port in sys.argv[1:]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", int(port)))
        sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            data, addr = key.fileobj.recvfrom(2048)
            key.fileobj.sendto(json.dumps({"src": addr[0], "seq": data.decode()}).encode(), addr)
""")

# One datagram from `bind` to dst:port, one answer (or none within 2 s), as JSON.
ONCE = textwrap.dedent("""\
    import json, socket, sys
    bind, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 0))
    s.settimeout(2)
    s.sendto(b"once", (dst, port))
    try:
        print(json.dumps({"answer": json.loads(s.recv(2048))}), flush=True)
    except OSError as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
""")

# One flow (one socket, so one 5-tuple) sending a datagram every 100 ms for at most `seconds`,
# printing a line per answer.
STREAM = textwrap.dedent("""\
    import socket, sys, time
    bind, dst, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 0))
    s.settimeout(0.1)
    print("ready", flush=True)
    end, seq = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        seq += 1
        s.sendto(str(seq).encode(), (dst, port))
        try:
            while True:
                s.recv(2048)
                print("answer", flush=True)
        except OSError:
            pass
""")


def ns(role):
    return f"{PREFIX}-{role}"


class FirewallE2E(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "firewall", PREFIX, TAG)
        cls.config, cls.manifests = peer.stage_config(DEMO_CONFIG, rig.workdir, FILE_PREFIX, iface_tag=TAG,
                                                      metrics_listen=f"127.0.0.1:{harness.free_port()}")
        (cls.manifests / "pods.yaml").write_text(PODS)
        cls.firewall = cls.manifests / "firewall.yaml"
        cls.firewall.write_text(DENY_PORT)
        cls.status_file = rig.workdir / "status.json"
        for name, text in (("echo.py", ECHO), ("once.py", ONCE), ("stream.py", STREAM), ("echo_at.py", ECHO_AT)):
            (rig.workdir / name).write_text(text)
        # egwd's control thread runs in this (the suite's) namespace: its resolver asks dnsmasq on
        # this namespace's loopback, at a port of its own.
        cls.dns_hosts = rig.workdir / "hosts"
        cls.write_hosts(SERVER)
        dns_port = harness.free_port()
        doc = json.loads(Path(cls.config).read_text())
        doc.setdefault("policy", {})["dns_servers"] = [f"127.0.0.1:{dns_port}"]
        Path(cls.config).write_text(json.dumps(doc, indent=2))
        cls.start_dnsmasq(dns_port)
        rig.netns.up()
        r = run(["ip", "-n", ns("ext1"), "addr", "add", f"{DNS_SECOND}/24", "dev", "eth0"], 10)
        if r.returncode != 0:
            raise RuntimeError(f"cannot add {DNS_SECOND} to ext1: {r.stderr}")
        rig.start_ready_egwd(cls.config, cls.status_file, FILE_PREFIX)
        rig.spawn_in(ns("ext1"), "echo", rig.workdir / "echo.py", ALLOWED_PORT, DENIED_PORT)
        rig.spawn_in(ns("ext1"), "echo_at", rig.workdir / "echo_at.py", DNS_PORT, SERVER, DNS_SECOND)

    @classmethod
    def write_hosts(cls, address):
        tmp = cls.dns_hosts.with_suffix(".tmp")
        tmp.write_text(f"{address} {DNS_NAME}\n")
        tmp.replace(cls.dns_hosts)

    @classmethod
    def start_dnsmasq(cls, port):
        rig = cls.rig
        log = rig.log_path("dnsmasq")
        with open(log, "w") as out:
            # In rig.procs, so the rig's cleanup stops it whatever happens to the suite.
            proc = rig.procs["dnsmasq"] = harness.spawn(
                ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
                 f"--addn-hosts={cls.dns_hosts}", f"--local-ttl={DNS_TTL}", "--listen-address=127.0.0.1",
                 "--bind-interfaces", f"--port={port}", "--local=/test/", "--user=root",
                 f"--pid-file={rig.workdir / 'dnsmasq.pid'}", "--log-queries", f"--log-facility={log}.queries"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        harness.wait_for(lambda: proc.poll() is not None or "started" in cls.read(Path(f"{log}.queries")), 10,
                         lambda: f"dnsmasq did not start:\n{cls.read(log)}")
        if proc.poll() is not None:
            raise AssertionError(f"dnsmasq exited (dnsmasq-base installed?):\n{cls.read(log)}")

    @staticmethod
    def read(path):
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""

    def status(self):
        return harness.read_status(self.status_file) or {}

    def denied_drops(self):
        return (self.status().get("drops") or {}).get("egress_firewall_denied", 0)

    def namespace(self, name):
        for n in (self.status().get("egress_firewall") or {}).get("namespaces", []):
            if n["namespace"] == name:
                return n
        return {}

    def diag(self):
        return f"status egress_firewall: {json.dumps(self.status().get('egress_firewall'))}\n" + \
            harness.tail(self.rig.log_path("egwd"))

    def once(self, pod, port, dst=SERVER):
        r = run(["ip", "netns", "exec", ns("pods"), sys.executable, str(self.rig.workdir / "once.py"), pod, dst,
                 str(port)], 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def wait_rules(self, to):
        harness.wait_for(lambda: [r["to"] for r in self.namespace("default").get("rules", [])] == [to], 15,
                         lambda: f"egwd did not apply the rules ({to})\n{self.diag()}")

    def test_1_denied_port_dropped_and_counted_another_port_passes(self):
        self.wait_rules("cidrSelector 0.0.0.0/0")
        self.assertEqual(self.namespace("default")["status"], "EgressFirewall Rules applied")
        before = self.denied_drops()
        out = self.once(FIREWALLED_POD, ALLOWED_PORT)
        self.assertEqual(out.get("answer", {}).get("src"), WEB_INGRESS, f"{out}\n{self.diag()}")
        out = self.once(FIREWALLED_POD, DENIED_PORT)
        self.assertIn("error", out, f"the denied port answered: {out}")
        harness.wait_for(lambda: self.denied_drops() >= before + 1, 10,
                         lambda: f"egress_firewall_denied drops did not rise\n{self.diag()}")
        harness.wait_for(lambda: self.namespace("default").get("denied", 0) >= 1
                         and self.namespace("default").get("allowed", 0) >= 1, 10,
                         lambda: f"namespace default's denied/allowed counts\n{self.diag()}")
        self.assertGreaterEqual(self.namespace("default")["rules"][0]["hits"], 1)
        # A pod of a namespace without an EgressFirewall is not filtered.
        out = self.once(OTHER_POD, DENIED_PORT)
        self.assertEqual(out.get("answer", {}).get("src"), WEB_INGRESS, f"{out}\n{self.diag()}")

    def test_2_rule_change_cuts_an_established_flow(self):
        self.wait_rules("cidrSelector 0.0.0.0/0")
        log = self.rig.log_path("stream")
        self.rig.spawn_in(ns("pods"), "stream", self.rig.workdir / "stream.py", FIREWALLED_POD, SERVER,
                          ALLOWED_PORT, 60)

        def answers():
            try:
                return log.read_text().count("answer")
            except OSError:
                return 0
        harness.wait_for(lambda: answers() >= 5, 15, lambda: f"the flow was not answered\n{self.diag()}")
        before = self.denied_drops()
        self.firewall.write_text(DENY_SERVER)
        self.wait_rules(f"cidrSelector {SERVER}/32")
        # The flow's answers stop (its session cut by the workers' sweep, its next datagram a new
        # flow that is denied) and stay stopped.
        seen = [answers()]

        def quiet():
            now = answers()
            still = now == seen[-1]
            seen.append(now)
            return still
        harness.eventually_consistently(quiet, 10, 2, lambda: f"the flow is still answered\n{self.diag()}",
                                        interval=0.5)
        harness.wait_for(lambda: self.denied_drops() > before, 10,
                         lambda: f"the flow's datagrams were not denied\n{self.diag()}")
        out = self.once(FIREWALLED_POD, ALLOWED_PORT)
        self.assertIn("error", out, f"a new flow to the denied address answered: {out}")

    def test_3_dns_name_rule_follows_dns(self):
        # test_2's flow would hit this test's rules: it ends first.
        harness.stop_process(self.rig.procs.pop("stream", None), signal.SIGTERM, grace=3)
        self.firewall.write_text(ALLOW_NAME)
        name_rule = f"dnsName {DNS_NAME}"

        def rules():
            return self.namespace("default").get("rules", [])

        def name_addresses():
            return [r.get("addresses") for r in rules() if r["to"] == name_rule]

        def shown():
            r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "show", "egressfirewall", "default"], 10)
            return r.stdout if r.returncode == 0 else f"egwctl failed: {r.stderr}"

        def deny_hits():
            return sum(r["hits"] for r in rules() if r["to"] == "cidrSelector 0.0.0.0/0")

        def passes(dst):
            return self.once(FIREWALLED_POD, DNS_PORT, dst).get("answer", {}).get("src") == WEB_INGRESS

        # The first answer comes from the resolver's first look (dnsmasq already serves the name).
        harness.wait_for(lambda: name_addresses() == [[f"{SERVER}/32"]], 20,
                         lambda: f"the dnsName rule did not get {SERVER}\n{self.diag()}")
        self.assertEqual([r["to"] for r in rules()], [name_rule, "cidrSelector 0.0.0.0/0"])
        self.assertIn(SERVER, shown())
        out = self.once(FIREWALLED_POD, DNS_PORT, SERVER)
        self.assertEqual(out.get("answer", {}).get("src"), WEB_INGRESS,
                         f"the name's address did not pass: {out}\n{self.diag()}")
        before, hits_before = self.denied_drops(), deny_hits()
        out = self.once(FIREWALLED_POD, DNS_PORT, DNS_SECOND)
        self.assertIn("error", out, f"another address passed: {out}")
        harness.wait_for(lambda: self.denied_drops() > before and deny_hits() > hits_before, 10,
                         lambda: f"the denied flow was not counted\n{self.diag()}")

        # The name moves: the resolver asks again when the TTL runs out, and egwd recompiles.
        self.write_hosts(DNS_SECOND)
        self.rig.procs["dnsmasq"].send_signal(signal.SIGHUP)
        harness.eventually_consistently(lambda: name_addresses() == [[f"{DNS_SECOND}/32"]], DNS_TTL + 10, 3,
                                        lambda: f"the dnsName rule did not move to {DNS_SECOND}\n{self.diag()}",
                                        interval=0.5)
        text = shown()
        self.assertIn(DNS_SECOND, text, text)
        self.assertNotIn(SERVER, text, text)
        # New flows follow the name, and keep following it (each probe a new socket, a new flow).
        harness.hold(lambda: passes(DNS_SECOND) and not passes(SERVER), 4,
                     lambda: f"new flows did not follow the name to {DNS_SECOND}\n{self.diag()}", interval=0.5)
        out = self.once(FIREWALLED_POD, DNS_PORT, SERVER)
        self.assertIn("error", out, f"the name's old address still passes: {out}")


if __name__ == "__main__":
    unittest.main()
