# SPDX-License-Identifier: Apache-2.0
"""egwd's and egwctl's command lines and egwd's log formats, on the built binaries.

Flags: --version, --flag=value, typed errors that name the flag, --check-config, EAL arguments
before "--". Logs: ISO 8601 timestamps with a zone, --log-format json (one object a line), and
the first sync as one summary line at info. egwd runs on net_null devices without hugepages, so
no network namespace is needed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$")
SERVICES = 12


def manifest(i):
    return f"""apiVersion: v1
kind: Service
metadata: {{name: svc{i}, namespace: flags}}
spec:
  type: LoadBalancer
  selector: {{app: svc{i}}}
status:
  loadBalancer:
    ingress: [{{ip: 192.0.2.{100 + i}}}]
---
apiVersion: k8s.ovn.org/v1
kind: EgressService
metadata: {{name: svc{i}, namespace: flags}}
spec: {{sourceIPBy: LoadBalancerIP}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: svc{i}-1
  namespace: flags
  labels: {{kubernetes.io/service-name: svc{i}}}
addressType: IPv4
endpoints:
- addresses: [10.244.1.{10 + i}]
  conditions: {{ready: true}}
"""


def write_config(workdir, prefix):
    (workdir / "manifests").mkdir()
    for i in range(SERVICES):
        (workdir / "manifests" / f"svc{i}.yaml").write_text(manifest(i))
    config = {
        "eal": {"lcores": "0-1", "main_lcore": 0, "no_huge": True, "memory_mb": 256, "file_prefix": prefix,
                "vdevs": ["net_null0,no-rx=1", "net_null1,no-rx=1"]},
        "workers": [1],
        "mempool": {"mbufs": 2047, "cache": 64},
        "ports": [
            {"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.244.1.1/24"],
             "mac": "02:e9:00:00:00:01"},
            {"name": "ext1", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24"],
             "mac": "02:e9:00:00:00:02"},
        ],
        "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
        "node": {"name": "gw-1", "labels": {}},
        "state": {"source": "files", "path": "manifests"},
    }
    path = workdir / "egwd.json"
    path.write_text(json.dumps(config, indent=1))
    return path


class Flags(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.egwd = harness.egwd_binary()
        cls.egwctl = harness.egwctl_binary()
        harness.require_binaries(cls.egwd, cls.egwctl)
        cls.tmp = Path(tempfile.mkdtemp(prefix="egw-flags-"))
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.config = write_config(cls.tmp, f"egw-flags-{os.getpid()}")
        cls.addClassCleanup(harness.remove_dpdk_runtime_dir, f"egw-flags-{os.getpid()}")

    def run_egwd(self, *args, timeout=60):
        return subprocess.run([str(self.egwd), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.tmp, stdin=subprocess.DEVNULL)

    def test_version(self):
        r = self.run_egwd("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^egwd \d+\.\d+\.\d+ \(DPDK \d+\.\d+")
        r = subprocess.run([str(self.egwctl), "--version"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^egwctl \d+\.\d+\.\d+")

    def test_typed_errors_name_the_flag(self):
        for args, flag in ((["--mbufs", "abc", "-c", "x.json"], "--mbufs"),
                           (["--duration=-1", "-c", "x.json"], "--duration"),
                           (["--log-level", "loud", "-c", "x.json"], "--log-level"),
                           (["--log-format=yaml", "-c", "x.json"], "--log-format"),
                           (["--bogus", "-c", "x.json"], "--bogus"),
                           ([], "--config")):
            r = self.run_egwd(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(flag, r.stderr, args)
            self.assertTrue(r.stderr.startswith("egwd: "), r.stderr)
            self.assertNotIn("stoul", r.stderr)
        r = subprocess.run([str(self.egwctl), "--socket"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--socket", r.stderr)

    def test_check_config(self):
        r = self.run_egwd(f"--check-config={self.config}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{self.config}: ok", r.stdout)
        bad = self.tmp / "bad.json"
        cfg = json.loads(self.config.read_text())
        cfg["eal"]["lcores"] = "0@0,1@"
        bad.write_text(json.dumps(cfg))
        r = self.run_egwd("--check-config", str(bad))
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{bad}: $.eal.lcores: expected", r.stderr)

    def run_daemon(self, *extra, eal=None):
        args = ([*eal, "--"] if eal else []) + [f"--config={self.config}", "--duration", "2", *extra]
        r = self.run_egwd(*args)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r.stderr.splitlines()

    def test_text_log_has_iso_timestamps_with_zone_and_a_first_sync_summary(self):
        lines = self.run_daemon()
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line.split(" ")[0], ISO, line)
        summary = [l for l in lines if "first sync:" in l]
        self.assertEqual(len(summary), 1, "\n".join(lines))
        self.assertIn(f"first sync: {SERVICES} EgressService(s): {SERVICES} programmed here", summary[0])
        # No line per Service at info...
        self.assertFalse([l for l in lines if "flags/svc" in l], "\n".join(lines))
        # ... but at debug.
        debug = self.run_daemon("--log-level", "debug")
        self.assertEqual(len([l for l in debug if "translating" in l and "flags/svc" in l]), SERVICES)

    def test_json_log_format(self):
        lines = self.run_daemon("--log-format", "json")
        self.assertTrue(lines)
        records = [json.loads(line) for line in lines]
        for rec in records:
            self.assertEqual(set(rec), {"time", "level", "msg"}, rec)
            self.assertRegex(rec["time"], ISO)
            self.assertIn(rec["level"], ("trace", "debug", "info", "warning", "error", "critical"))
        self.assertTrue(any(r["msg"].startswith("first sync:") for r in records))

    def test_eal_arguments_before_the_double_dash_still_pass_through(self):
        prefix = f"egw-flags-eal-{os.getpid()}"
        self.addCleanup(harness.remove_dpdk_runtime_dir, prefix)
        lines = self.run_daemon(eal=["-l", "0-1", "--no-huge", "-m", "256", "--file-prefix", prefix,
                                     "--vdev=net_null0,no-rx=1", "--vdev=net_null1,no-rx=1", "--no-pci"])
        self.assertTrue(any("egwd running" in l for l in lines), "\n".join(lines))


if __name__ == "__main__":
    unittest.main()
