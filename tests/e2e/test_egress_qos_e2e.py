# SPDX-License-Identifier: Apache-2.0
"""End to end for EgressQoS (issue 40 item 3): the real egwd marks a matched pod's egress.

scripts/netns.sh's dual-stack topology, config/demo.json staged as the IPv6 suite stages it, and
beside the demo's manifests an EgressQoS in namespace default (EF, DSCP 46, for pods labelled
qos=voice, every destination) with two Pods: web's pod (10.244.1.10, fd00:10:244:1::10; web is
a LoadBalancerIP Service) labelled qos=voice, and a pod of no EgressService (10.244.1.30,
fd00:10:244:1::30; the default action masquerades it) without the label.

Each pod sends UDP datagrams to the host in ext1 with a TOS / traffic class it set itself (AF11,
DSCP 10, with ECT(1) in the ECN bits: 0x29); tcpdump in ext1 reports what arrived. The matched
pod's datagrams must arrive with DSCP 46 and the sender's ECN bits (0xb9), from web's ingress IP;
the unmatched pod's with its own 0x29, masqueraded: through NAT44 and NAT66 both. The status
file and `egwctl show egressqos` give upstream's "EgressQoS Rules applied".

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_egress_qos_e2e.py
"""

import json
import os
import re
import subprocess
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
from harness import run_bounded, tail  # noqa: E402

DEMO_CONFIG = REPO / "config" / "demo.json"
PREFIX = f"egwqos{os.getpid()}"
TAG = harness.iface_tag("q")
FILE_PREFIX = f"egw-qos-{os.getpid()}"

VOICE_POD = ("10.244.1.10", "fd00:10:244:1::10")    # default/web's endpoint, labelled qos=voice
OTHER_POD = ("10.244.1.30", "fd00:10:244:1::30")    # endpoint of no EgressService, no label
WEB_INGRESS = ("192.0.2.50", "2001:db8:2::50")
EXT1_GW = ("192.0.2.1", "2001:db8:2::1")            # ext1's masquerade addresses
EXT1 = ("192.0.2.100", "2001:db8:2::100")
SENT_TOS = 0x29      # AF11 (DSCP 10) with ECT(1)
MARKED_TOS = 0xb9    # EF (DSCP 46) with the same ECT(1)
PORT = 9177
COUNT = 3

QOS_MANIFESTS = """apiVersion: k8s.ovn.org/v1
kind: EgressQoS
metadata: {name: default, namespace: default}
spec:
  egress:
  - dscp: 46
    podSelector: {matchLabels: {qos: voice}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web, qos: voice}}
spec: {nodeName: worker-1}
status: {phase: Running, podIPs: [{ip: 10.244.1.10}, {ip: "fd00:10:244:1::10"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: other-0, namespace: default, labels: {app: other}}
spec: {nodeName: worker-1}
status: {phase: Running, podIPs: [{ip: 10.244.1.30}, {ip: "fd00:10:244:1::30"}]}
"""

# Sends COUNT datagrams from `src` to `dst`:`port` with the TOS / traffic class given (the kernel
# keeps the ECN bits a UDP socket sets).
SENDER = textwrap.dedent("""\
    import socket, sys, time
    src, dst, port, tos, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    v6 = ":" in dst
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    if v6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
    else:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    s.bind((src, 0))
    for _ in range(count):
        s.sendto(b"qos", (dst, port))
        time.sleep(0.1)
""")


def ns(role):
    return f"{PREFIX}-{role}"


class EgressQosE2E(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "qos", PREFIX, TAG, ipv6=True)
        cls.metrics_port = harness.free_port()
        cls.config, manifests = peer.stage_config(DEMO_CONFIG, rig.workdir, FILE_PREFIX, iface_tag=TAG,
                                                  metrics_listen=f"127.0.0.1:{cls.metrics_port}")
        (manifests / "egress-qos.yaml").write_text(QOS_MANIFESTS)
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")
        cls.sender = rig.workdir / "send_tos.py"
        cls.sender.write_text(SENDER)
        rig.netns.up()
        rig.start_ready_egwd(cls.config, cls.status_file, FILE_PREFIX)

    def arrived(self, src, dst):
        """The (source, TOS or traffic class) of each datagram tcpdump in ext1 saw from `src`."""
        v6 = ":" in dst
        cap = subprocess.Popen(["timeout", "20", "ip", "netns", "exec", ns("ext1"), "tcpdump", "-i", "eth0", "-n",
                                "-v", "-l", "-c", str(COUNT), f"{'ip6' if v6 else 'ip'} and udp dst port {PORT}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # tcpdump says "listening on" once it captures; datagrams sent before would be missed.
        seen = ""
        deadline = time.monotonic() + 10
        while "listening on" not in seen and time.monotonic() < deadline and cap.poll() is None:
            seen += cap.stderr.readline()
        r = run_bounded(["ip", "netns", "exec", ns("pods"), sys.executable, str(self.sender), src, dst, str(PORT),
                         str(SENT_TOS), str(COUNT)], 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            out, err = cap.communicate(timeout=25)
        except subprocess.TimeoutExpired:
            cap.kill()
            out, err = cap.communicate()
        text = out.replace("\n    ", " ")
        pattern = (r"IP6 \(class (0x[0-9a-f]+),.*?\) ([0-9a-f:]+)\.\d+ > " if v6
                   else r"IP \(tos (0x[0-9a-f]+),.*?\) ([0-9.]+)\.\d+ > ")
        found = [(m.group(2), int(m.group(1), 16)) for m in re.finditer(pattern, text)]
        if len(found) != COUNT:
            self.fail(f"tcpdump saw {found} of {COUNT} datagrams from {src}:\n{out}\n{err}\n"
                      f"--- egwd log (tail) ---\n{tail(self.log_path, 30)}")
        return found

    def test_00_egwd_applied_the_egress_qos(self):
        harness.wait_for(lambda: "EgressQoS default/default: 1 rule(s) applied" in self.log_path.read_text(), 5,
                         lambda: f"no applied line in the log:\n{tail(self.log_path, 30)}")

    def test_01_status_file_and_cli_say_rules_applied(self):
        # egw owns policy with the files source: upstream's status string, in the status file and
        # in `show egressqos`.
        want = {"key": "default/default", "status": "EgressQoS Rules applied",
                "rules": ["dscp 46 to any pods qos=voice"], "pods": 1}
        harness.wait_for(lambda: (harness.read_status(self.status_file) or {}).get("egress_qos") == [want], 5,
                         lambda: f"status file: {(harness.read_status(self.status_file) or {}).get('egress_qos')}")
        r = harness.run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "--json", "show", "egressqos"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [want])
        r = harness.run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "show", "egressqos", "namespace", "other"],
                        10)
        self.assertEqual((r.returncode, r.stdout), (0, "no EgressQoS in namespace other\n"), r.stderr)

    def test_02_metrics_give_the_rules_and_pods(self):
        def scrape():
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                return r.read().decode()
        text = harness.wait_for(lambda: (lambda t: t if 'egw_egress_qos_pods{namespace="default"} 1' in t else None)(
            scrape()), 5, lambda: "no egw_egress_qos_pods series")
        self.assertIn('egw_egress_qos_rules{namespace="default"} 1\n', text)
        self.assertIn("egw_egress_qos_ignored 0\n", text)

    def test_10_a_matched_pod_leaves_with_the_rules_dscp_and_its_own_ecn_nat44(self):
        self.assertEqual(self.arrived(VOICE_POD[0], EXT1[0]), [(WEB_INGRESS[0], MARKED_TOS)] * COUNT)

    def test_11_the_same_through_nat66(self):
        self.assertEqual(self.arrived(VOICE_POD[1], EXT1[1]), [(WEB_INGRESS[1], MARKED_TOS)] * COUNT)

    def test_20_an_unmatched_pods_own_marks_pass_nat44_unchanged(self):
        self.assertEqual(self.arrived(OTHER_POD[0], EXT1[0]), [(EXT1_GW[0], SENT_TOS)] * COUNT)

    def test_21_an_unmatched_pods_own_marks_pass_nat66_unchanged(self):
        self.assertEqual(self.arrived(OTHER_POD[1], EXT1[1]), [(EXT1_GW[1], SENT_TOS)] * COUNT)


if __name__ == "__main__":
    unittest.main()
