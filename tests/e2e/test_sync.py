# SPDX-License-Identifier: Apache-2.0
"""End to end: egwd's session sync sends what its worker creates, signed, to its peer.

egwd runs on virtual devices as in test_cli.py (a net_pcap port replays flows of two
EgressServices and a pod of none; net_null ports swallow what egwd sends) with a "sync" section
whose only peer is this test: a UDP socket that checks every datagram's HMAC-SHA256 with the
shared key and decodes it by the layout in docs/architecture.md ("Session sync"). The test moves
itself into a network namespace of its own first (loopback only), so no sync datagram leaves it.

Run from the repository root, as root:  python3 -m unittest -v tests/e2e/test_sync.py
"""

import ctypes
import hashlib
import hmac
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402
import test_cli  # noqa: E402  (the configuration, flows and capture it replays)

EGWD = harness.egwd_binary()
EGWCTL = harness.egwctl_binary()
KEY = b"k" * 40
HEADER = struct.Struct(">BBHHHIIQIIII")
EVENT = struct.Struct(">BBBBHHIIHHHH16s16s16s")
CLONE_NEWNET = 0x40000000
TIMEOUT = 60.0  # from spawning egwd: its start (EAL, ports) on a loaded machine included


def private_network():
    """This process (and what it starts) in a new network namespace with only loopback, up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def v4(mapped):
    assert mapped[:12] == b"\0" * 10 + b"\xff\xff", mapped.hex()
    return socket.inet_ntoa(mapped[12:])


def decode(datagram):
    """(header fields, [event tuples]); asserts the layout and the tag."""
    body, tag = datagram[:-32], datagram[-32:]
    assert hmac.compare_digest(hmac.new(KEY, body, hashlib.sha256).digest(), tag), "bad tag"
    h = HEADER.unpack_from(body)
    version, flags, count, length = h[0], h[1], h[2], h[3]
    assert version == 1 and length == len(datagram) == 40 + 72 * count + 32, (version, length, len(datagram))
    events = [EVENT.unpack_from(body, 40 + 72 * i) for i in range(count)]
    return h, events


class SyncEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("egwd and the network namespace need root")
        harness.require_binaries(EGWD)
        private_network()

    def setUp(self):
        self.workdir = Path(tempfile.mkdtemp(prefix="egw-sync-e2e-"))
        self.prefix = f"egw-sync-{os.getpid()}"
        self.config = test_cli.write_config(self.workdir, self.prefix)
        self.peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.peer.bind(("127.0.0.1", 0))
        self.peer.settimeout(0.5)
        self.proc = None
        self.log = None

    def tearDown(self):
        if self.proc:
            harness.stop_process(self.proc)
        if self.log:
            self.log.close()
        self.peer.close()
        harness.remove_dpdk_runtime_dir(self.prefix)
        harness.remove_workdir(self.workdir, "sync")

    def start(self, sync):
        cfg = json.loads(self.config.read_text())
        cfg["sync"] = sync
        self.config.write_text(json.dumps(cfg, indent=1))
        self.log_path = self.workdir / "egwd.log"
        self.log = open(self.log_path, "w")
        self.proc = harness.spawn([str(EGWD), "-c", str(self.config)], cwd=self.workdir, stdin=subprocess.DEVNULL,
                                  stdout=self.log, stderr=subprocess.STDOUT)

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def sync_section(self):
        (self.workdir / "sync.key").write_bytes(KEY + b"\n")
        return {"id": 1, "listen": f"127.0.0.1:{harness.free_port()}", "key_file": "sync.key",
                "peers": [{"id": 2, "address": f"127.0.0.1:{self.peer.getsockname()[1]}"}]}

    def test_sessions_it_creates_reach_the_peer_signed(self):
        self.start(self.sync_section())
        want = {(proto, inside) for proto, inside, *_ in (f for _, f in test_cli.FLOWS)}
        got, keepalives, senders = {}, 0, set()
        deadline = time.monotonic() + TIMEOUT
        while (len(got) < len(want) or keepalives == 0) and time.monotonic() < deadline:
            self.assertIsNone(self.proc.poll(), f"egwd exited:\n{self.log_text()}")
            try:
                datagram = self.peer.recv(65536)
            except socket.timeout:
                continue
            h, events = decode(datagram)
            senders.add(h[5])
            if not events:
                keepalives += 1
            for e in events:
                kind, family, proto, _state, _vrf, _r, left, _epoch, in_port, out_port, r_port, _r2, ia, oa, ra = e
                self.assertEqual((kind, family), (1, 4), e)
                name = {6: "tcp", 17: "udp", 1: "icmp"}[proto]
                got[(name, f"{v4(ia)}:{in_port}")] = (f"{v4(oa)}:{out_port}", f"{v4(ra)}:{r_port}", left)
        self.assertEqual(set(got), want, f"log:\n{self.log_text()}")
        self.assertGreaterEqual(keepalives, 1, "no keep-alive within the time")
        self.assertEqual(senders, {1})
        for _, (proto, inside, outside, remote, _svc) in test_cli.FLOWS:
            o, r, left = got[(proto, inside)]
            self.assertEqual((o, r), (outside, remote), inside)
            # The config's timeouts are an hour (TCP: the SYN's transitory one, also an hour).
            self.assertTrue(3_500_000 < left <= 3_600_000, (inside, left))
        self.assertIn("session sync: gateway 1 on 127.0.0.1:", self.log_text())

    def datagram(self, counter, sequence, events, key=KEY, flags=0):
        """A signed datagram from gateway 2 (this test) carrying `events` (tuples in EVENT's order)."""
        length = 40 + 72 * len(events) + 32
        body = HEADER.pack(1, flags, len(events), length, 0, 2, 77, counter, sequence, 0, 0, 0)
        body += b"".join(EVENT.pack(*e) for e in events)
        return body + hmac.new(key, body, hashlib.sha256).digest()

    def show_sync(self):
        r = subprocess.run([str(EGWCTL), "-p", self.prefix, "--json", "show", "sync"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def test_a_peers_sessions_land_on_standby_and_show_sync_reports_them(self):
        section = self.sync_section()
        self.start(section)
        egwd_port = int(section["listen"].rsplit(":", 1)[1])
        mapped = lambda a: b"\0" * 10 + b"\xff\xff" + socket.inet_aton(a)
        # Two TCP sessions of the Service address 198.51.100.7 and one of 198.51.100.8, 60 s left.
        events = [(1, 4, 6, 3, 0, 0, 60000, 5, 40000 + i, 2000 + i, 443, 0, mapped("10.244.9.9"),
                   mapped(addr), mapped("203.0.113.10")) for i, addr in
                  enumerate(["198.51.100.7", "198.51.100.7", "198.51.100.8"])]
        counter = int(time.time() * 1e6)
        deadline = time.monotonic() + TIMEOUT
        view = None
        while time.monotonic() < deadline:
            self.assertIsNone(self.proc.poll(), f"egwd exited:\n{self.log_text()}")
            # Sent again until it is seen: egwd may not be listening yet (a duplicate is harmless).
            counter += 1
            self.peer.sendto(self.datagram(counter, 1, events), ("127.0.0.1", egwd_port))
            view = self.show_sync()
            if view and view["standby"]["sessions"] == 3 and view["peers"][0]["up"]:
                break
            time.sleep(0.2)
        self.assertIsNotNone(view, f"show sync never answered:\n{self.log_text()}")
        self.assertEqual(view["standby"]["sessions"], 3, view)
        self.assertEqual(sorted((s["address"], s["sessions"]) for s in view["standby"]["services"]),
                         [("198.51.100.7", 2), ("198.51.100.8", 1)])
        peer = view["peers"][0]
        self.assertEqual((peer["id"], peer["up"], peer["events_received"]), (2, True, 3), peer)
        self.assertEqual(view["events_in"], 3)
        self.assertEqual(view["standby"]["max"], 1000000)

        # A forged datagram (another key) deleting one of them changes nothing and is counted.
        delete = [(4,) + events[0][1:]]
        counter += 1
        self.peer.sendto(self.datagram(counter, 2, delete, key=b"x" * 40), ("127.0.0.1", egwd_port))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and self.show_sync()["refused"]["bad_tag"] < 1:
            time.sleep(0.1)
        view = self.show_sync()
        self.assertEqual(view["refused"]["bad_tag"], 1)
        self.assertEqual(view["standby"]["sessions"], 3)
        # The genuine one removes it.
        counter += 1
        self.peer.sendto(self.datagram(counter, 2, delete), ("127.0.0.1", egwd_port))
        deadline = time.monotonic() + TIMEOUT
        # The control thread republishes the reserved ports within 100 ms of the change.
        while time.monotonic() < deadline and (self.show_sync()["standby"]["sessions"],
                                                self.show_sync()["standby"]["reserved_ports"]) != (2, 2):
            time.sleep(0.1)
        view = self.show_sync()
        self.assertEqual(view["standby"]["sessions"], 2, view)
        self.assertEqual(view["standby"]["removed"], 1)
        text = subprocess.run([str(EGWCTL), "-p", self.prefix, "show", "sync"], capture_output=True, text=True,
                              timeout=30).stdout
        self.assertRegex(text, r"\n +2 +127\.0\.0\.1:\d+ +up ")
        self.assertIn("standby: 2 of at most 1000000 session(s), 2 port(s) reserved, 0 conflict(s)", text)
        self.assertIn("session sync: peer 2 (127.0.0.1:", self.log_text())
        self.assertIn(") is up", self.log_text())
        self.assertEqual(view["peers"][0]["bulk_complete"], False, "this peer sent no dump")
        self.assertGreaterEqual(view["bulk"]["requests_sent"], 1, "egwd asks a peer it hears for a dump")

        # Bulk sync: asked for a dump, egwd sends every session of its workers (the capture's
        # flows) as creations, then the end marker, whose sequence is the dump's last.
        # What egwd sent so far (its workers' own creations) is read first: only the dump counts.
        try:
            while True:
                self.peer.recv(65536)
        except socket.timeout:
            pass
        counter += 1
        self.peer.sendto(self.datagram(counter, 2, [], flags=0x08), ("127.0.0.1", egwd_port))
        want = {(proto, inside) for proto, inside, *_ in (f for _, f in test_cli.FLOWS)}
        got, end, last_seq = set(), None, 0
        deadline = time.monotonic() + TIMEOUT
        while end is None and time.monotonic() < deadline:
            try:
                h, evs = decode(self.peer.recv(65536))
            except socket.timeout:
                continue
            if evs:
                last_seq = max(last_seq, h[8])
            for e in evs:
                if e[0] == 1:
                    got.add(({6: "tcp", 17: "udp", 1: "icmp"}[e[2]], f"{v4(e[12])}:{e[8]}"))
            if h[1] & 0x10:
                end = h
        self.assertIsNotNone(end, f"no end of the dump:\n{self.log_text()}")
        self.assertEqual(got, want)
        self.assertEqual(end[8], last_seq, "the end's sequence is the dump's last")
        self.assertIn("session sync: a peer asked for a dump: sending", self.log_text())

        # This peer's own (empty) dump ends: egwd has it whole.
        counter += 1
        self.peer.sendto(self.datagram(counter, 2, [], flags=0x10), ("127.0.0.1", egwd_port))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not self.show_sync()["peers"][0]["bulk_complete"]:
            time.sleep(0.1)
        self.assertTrue(self.show_sync()["peers"][0]["bulk_complete"])

    def test_an_unreadable_key_file_stops_egwd_with_its_name(self):
        section = self.sync_section()
        section["key_file"] = "missing.key"
        self.start(section)
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail(f"egwd kept running without its sync key:\n{self.log_text()}")
        self.assertEqual(code, 1)
        self.assertIn(f"{self.workdir / 'missing.key'}: cannot read the sync key file", self.log_text())


if __name__ == "__main__":
    unittest.main()
