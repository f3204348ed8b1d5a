# SPDX-License-Identifier: Apache-2.0
"""End to end: an outside network reached as an 802.1Q VLAN of ext1 (issue 34 §8).

scripts/netns.sh's topology with a tag of its own. egwd's staged config gets the sub-port
"ext1-v100" (parent ext1, vlan 100) in a VRF "red" of its own with 100.64.100.1/24, and
default/db's EgressService (sourceIPBy Network) names "red". So db's pod (10.244.1.20) leaves
tagged, masqueraded to the VLAN's address, while web's pod (10.244.1.10) leaves untagged with
web's ingress IP, both through the same device.

The far side of the VLAN is a host on a packet socket in the ext1 namespace (VLAN_HOST below):
kernels without 802.1Q support (no `type vlan` links, as in some CI VMs) can still carry tagged
frames on a veth, and the socket sees each frame's tag (in the frame or, as the kernel usually
gives it, in PACKET_AUXDATA). It answers ARP for its address and UDP datagrams only when they
came tagged 100, tagging its answers, and reports what it saw; at start it asks egwd's VLAN
address by ARP (tagged, and untagged, which must not be answered) and pings it. web's side is
the ext1 namespace's own kernel, untagged, as in the other suites.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_vlan_e2e.py
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
PREFIX = f"egwvln{os.getpid()}"
TAG = harness.iface_tag("v")
FILE_PREFIX = f"egw-vlan-{os.getpid()}"

VID = 100
WEB_POD = "10.244.1.10"        # default/web: LoadBalancerIP 192.0.2.50, default VRF (ext1, untagged)
WEB_INGRESS = "192.0.2.50"
DB_POD = "10.244.1.20"         # default/db: sourceIPBy Network, network "red" (the VLAN)
EXT1 = "192.0.2.100"
VLAN_ADDR = "100.64.100.1"     # egwd's address on the VLAN
VLAN_HOST = "100.64.100.100"   # the host on the VLAN (the packet socket below)
EXT1_MAC = "02:e9:00:00:00:03"  # ext1's, config/demo.json; the VLAN's too
PORT = 9300

# The kernel's UDP server on ext1's eth0 (untagged): answers with the source it saw.
SERVER = textwrap.dedent("""\
    import json, socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"eth0")
    s.bind(("0.0.0.0", int(sys.argv[1])))
    print("ready", flush=True)
    while True:
        data, addr = s.recvfrom(2048)
        s.sendto(json.dumps({"src": addr[0], "vlan": None}).encode(), addr)
""")

# The host on VLAN 100: argv = interface, its IPv4, its MAC, egwd's VLAN address, UDP port, VLAN id.
# Prints one JSON line per event it saw.
VLAN_HOST_SCRIPT = textwrap.dedent("""\
    import json, socket, struct, sys, time
    ifname, me, mac, gw, port, vid = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    my_ip, gw_ip, my_mac = socket.inet_aton(me), socket.inet_aton(gw), bytes.fromhex(mac.replace(":", ""))
    SOL_PACKET, PACKET_AUXDATA, TP_STATUS_VLAN_VALID = 263, 8, 0x10
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((ifname, 0))
    def log(**kw):
        print(json.dumps(kw), flush=True)
    def csum(b):
        if len(b) % 2: b += b"\\0"
        t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        while t >> 16: t = (t & 0xffff) + (t >> 16)
        return ~t & 0xffff
    def send(dst, ethertype, payload, tag):
        head = dst + my_mac + (struct.pack("!HH", 0x8100, tag) if tag is not None else b"")
        s.send(head + struct.pack("!H", ethertype) + payload)
    def ip4(src, dst, proto, l4):
        h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 7, 0, 64, proto, 0, src, dst)
        return h[:10] + struct.pack("!H", csum(h)) + h[12:] + l4
    def arp(op, tha, tpa):
        return struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, my_mac, my_ip, tha, tpa)
    bcast = b"\\xff" * 6
    print("ready", flush=True)
    send(bcast, 0x0806, arp(1, b"\\0" * 6, gw_ip), vid)
    send(bcast, 0x0806, arp(1, b"\\0" * 6, gw_ip), None)
    gw_mac = None
    deadline = time.time() + 600
    pinged = False
    while time.time() < deadline:
        data, anc, _, addr = s.recvmsg(4096, socket.CMSG_SPACE(32))
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        tag = None
        for level, kind, value in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(value) >= 20:
                status, _, _, _, _, tci = struct.unpack("IIIHHH", value[:18])
                if status & TP_STATUS_VLAN_VALID:
                    tag = tci & 0xfff
        if len(data) >= 18 and data[12:14] == b"\\x81\\x00":
            tag = struct.unpack("!H", data[14:16])[0] & 0xfff
            data = data[:12] + data[16:]
        if len(data) < 14:
            continue
        src_mac, ethertype, body = data[6:12], struct.unpack("!H", data[12:14])[0], data[14:]
        if ethertype == 0x0806 and len(body) >= 28:
            op, sha, spa, tpa = struct.unpack("!H", body[6:8])[0], body[8:14], body[14:18], body[24:28]
            if op == 2 and spa == gw_ip:
                log(event="arp-reply", vlan=tag, sha=sha.hex(":"))
                if tag == vid and not pinged:
                    gw_mac, pinged = sha, True
                    icmp = struct.pack("!BBHHH", 8, 0, 0, 0x77, 1) + b"ping"
                    icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
                    send(gw_mac, 0x0800, ip4(my_ip, gw_ip, 1, icmp), vid)
            elif op == 1 and tpa == my_ip:
                log(event="arp-request", vlan=tag, spa=socket.inet_ntoa(spa))
                if tag == vid:
                    send(sha, 0x0806, arp(2, sha, spa), vid)
            continue
        if ethertype != 0x0800 or len(body) < 20 or body[16:20] != my_ip and body[12:16] != gw_ip:
            continue
        ihl, proto, src, dst = (body[0] & 15) * 4, body[9], body[12:16], body[16:20]
        l4 = body[ihl:]
        if proto == 1 and l4[:1] == b"\\0" and src == gw_ip:
            log(event="echo-reply", vlan=tag, src=socket.inet_ntoa(src))
        elif proto == 17 and dst == my_ip and len(l4) >= 8:
            sport, dport = struct.unpack("!HH", l4[:4])
            log(event="udp", vlan=tag, src=socket.inet_ntoa(src), sport=sport, dport=dport)
            if dport == port and tag == vid:
                answer = json.dumps({"src": socket.inet_ntoa(src), "vlan": tag}).encode()
                udp = struct.pack("!HHHH", dport, sport, 8 + len(answer), 0) + answer
                send(src_mac, 0x0800, ip4(my_ip, src, 17, udp), vid)
""")

# One datagram from `bind` to `dst`, the answer printed as JSON.
CLIENT = textwrap.dedent("""\
    import json, socket, sys
    bind, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 0))
    s.settimeout(3)
    try:
        s.sendto(b"hello", (dst, port))
        print(json.dumps(json.loads(s.recv(2048))), flush=True)
    except OSError as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
""")


def ns(role):
    return f"{PREFIX}-{role}"


class VlanE2E(unittest.TestCase):
    rig = None

    @classmethod
    def setUpClass(cls):
        cls.rig = rig = harness.NamespaceRig.for_suite(cls, "vlan", PREFIX, TAG)
        cls.config, manifests = peer.stage_config(DEMO_CONFIG, rig.workdir, FILE_PREFIX, iface_tag=TAG,
                                                  metrics_listen=f"127.0.0.1:{harness.free_port()}")
        cfg = json.loads(cls.config.read_text())
        cfg["vrfs"].append({"name": "red", "table": 300})
        cfg["ports"].append({"name": "ext1-v100", "parent": "ext1", "vlan": VID, "role": "outside", "vrf": "red",
                             "addresses": [f"{VLAN_ADDR}/24"]})
        cls.config.write_text(json.dumps(cfg, indent=1))
        db = manifests / "db.json"
        text = db.read_text()
        if '"network": "blue"' not in text:
            raise RuntimeError(f"the demo's db.json changed: {text}")
        db.write_text(text.replace('"network": "blue"', '"network": "red"'))
        cls.status_file = rig.workdir / "status.json"
        cls.log_path = rig.log_path("egwd")
        (rig.workdir / "server.py").write_text(SERVER)
        (rig.workdir / "vlan_host.py").write_text(VLAN_HOST_SCRIPT)
        (rig.workdir / "client.py").write_text(CLIENT)

        rig.netns.up()
        rig.start_ready_egwd(cls.config, cls.status_file, FILE_PREFIX)
        rig.spawn_in(ns("ext1"), "server", rig.workdir / "server.py", PORT)
        rig.spawn_in(ns("ext1"), "vlan-host", rig.workdir / "vlan_host.py", "eth0", VLAN_HOST, "02:00:00:00:64:64",
                     VLAN_ADDR, PORT, VID)

    def events(self):
        out = []
        for line in self.rig.log_path("vlan-host").read_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def client(self, bind, dst):
        r = run(["ip", "netns", "exec", ns("pods"), sys.executable, str(self.rig.workdir / "client.py"), bind, dst,
                 str(PORT)], 15)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_1_the_vlan_address_answers_arp_and_ping_tagged_only(self):
        def seen(event):
            return [e for e in self.events() if e["event"] == event]
        harness.wait_for(lambda: seen("echo-reply"), 5,
                         lambda: f"no echo reply on the VLAN: {self.events()}\n{tail(self.log_path)}")
        self.assertEqual(seen("arp-reply"), [{"event": "arp-reply", "vlan": VID, "sha": EXT1_MAC}],
                         "answered tagged, once: the untagged request for the VLAN's address is not answered")
        self.assertEqual(seen("echo-reply"), [{"event": "echo-reply", "vlan": VID, "src": VLAN_ADDR}])

    def test_2_service_on_the_vlan_leaves_tagged_with_the_vlan_address(self):
        out = self.client(DB_POD, VLAN_HOST)
        self.assertNotIn("error", out, f"{out}\n{self.events()}\n{tail(self.log_path)}")
        self.assertEqual(out, {"src": VLAN_ADDR, "vlan": VID})
        # egwd asked for the host by ARP on the VLAN, tagged.
        self.assertIn({"event": "arp-request", "vlan": VID, "spa": VLAN_ADDR}, self.events())

    def test_3_service_on_the_parent_leaves_untagged_with_its_ingress_ip(self):
        out = self.client(WEB_POD, EXT1)
        self.assertNotIn("error", out, f"{out}\n{tail(self.log_path)}")
        self.assertEqual(out, {"src": WEB_INGRESS, "vlan": None})
        self.assertFalse([e for e in self.events() if e.get("src") == WEB_INGRESS], "web's egress seen on the VLAN")

    def test_4_status_shows_the_vlan_and_its_frames(self):
        self.client(DB_POD, VLAN_HOST)
        def vlan():
            status = harness.read_status(self.status_file) or {}
            found = [v for v in status.get("vlans", []) if v["name"] == "ext1-v100"]
            return found[0] if found and found[0]["rx_packets"] >= 3 else None
        harness.wait_for(vlan, 5, lambda: f"no VLAN counters in the status file:\n{tail(self.log_path)}")
        v = vlan()
        self.assertEqual((v["parent"], v["vlan"]), ("ext1", VID))
        self.assertGreaterEqual(v["tx_packets"], 3, v)  # ARP reply, echo reply, a datagram, ARP request
        status = harness.read_status(self.status_file)
        self.assertEqual(status["drops"]["unknown_vlan"], 0)
        self.assertIn("VLAN 100 of port ext1", self.log_path.read_text())
        # egwctl show vlans: the same VLAN, its settings and counters at least as far as the file's.
        r = run([str(harness.egwctl_binary()), "-p", FILE_PREFIX, "-j", "show", "vlans"], 10)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout)
        self.assertEqual(len(rows), 1, rows)
        row = rows[0]
        self.assertEqual((row["name"], row["parent"], row["vlan"], row["role"], row["vrf"], row["addresses"]),
                         ("ext1-v100", "ext1", VID, "outside", "red", [f"{VLAN_ADDR}/24"]))
        self.assertGreaterEqual(row["rx_packets"], v["rx_packets"])
        self.assertGreaterEqual(row["tx_packets"], v["tx_packets"])


if __name__ == "__main__":
    unittest.main()
