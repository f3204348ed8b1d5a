# SPDX-License-Identifier: Apache-2.0
"""egwd under the confinement docker/k8s/daemonset.yaml asks of the container runtime: the
capabilities it adds after dropping ALL, no_new_privs (allowPrivilegeEscalation: false), and the
runtime's default seccomp filter (seccompProfile: RuntimeDefault). tests/e2e/confine.py applies
all three to a real egwd, on net_null devices, on real 2 MiB hugepages (which the test reserves
and mounts, and gives back) and without them.

The filter is built from the containers/common default profile Debian ships (CRI-O's and
Podman's RuntimeDefault) and, for containerd's RuntimeDefault, the same with NUMA memory-policy
calls allowed only to a holder of CAP_SYS_NICE. That rule is why the DaemonSet keeps SYS_NICE:
DPDK's EAL asks for and sets the memory policy of every hugepage it maps (and once even with
--no-huge), and without those calls it cannot initialise its memory at all. The test without
SYS_NICE pins that, so that the capability can be dropped again the day it is no longer needed.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import confine  # noqa: E402
import harness  # noqa: E402

HUGE = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")
PAGES = 96  # 2 MiB pages: EAL's 128 MiB and some slack


def config(workdir, prefix, port, huge_dir=None):
    (workdir / "manifests").mkdir(exist_ok=True)
    eal = {"lcores": "0-1", "main_lcore": 0, "no_huge": huge_dir is None, "memory_mb": 128, "file_prefix": prefix,
           "vdevs": ["net_null0,no-rx=1", "net_null1,no-rx=1"]}
    if huge_dir:
        eal["extra_args"] = ["--huge-dir", str(huge_dir)]
    cfg = {
        "eal": eal,
        "workers": [1],
        "mempool": {"mbufs": 2047, "cache": 64},
        "ports": [
            {"name": "pods", "device": "net_null0", "role": "inside", "addresses": ["10.244.1.1/24"],
             "mac": "02:e9:00:00:00:01"},
            {"name": "ext1", "device": "net_null1", "role": "outside", "addresses": ["192.0.2.1/24"],
             "mac": "02:e9:00:00:00:02"},
        ],
        "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
        "sessions": {"max": 65536},
        "node": {"name": "gw-1", "labels": {}},
        "state": {"source": "files", "path": "manifests"},
        "metrics": {"enabled": True, "listen": f"127.0.0.1:{port}"},
    }
    path = workdir / f"{prefix}.json"
    path.write_text(json.dumps(cfg, indent=1))
    return path


def http_status(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def proc_status(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        fields[k] = v.strip()
    return fields


class Confinement(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (capabilities, seccomp, hugepages)")
        cls.egwd = harness.egwd_binary()
        cls.egwctl = harness.egwctl_binary()
        harness.require_binaries(cls.egwd, cls.egwctl)
        if not confine.DEFAULT_PROFILE.is_file():
            raise FileNotFoundError(f"{confine.DEFAULT_PROFILE} is missing: run scripts/deps.sh "
                                    "(golang-github-containers-common)")
        cls.caps = confine.daemonset_caps()
        cls.tmp = Path(tempfile.mkdtemp(prefix="egw-confine-"))
        cls.addClassCleanup(harness.remove_workdir, cls.tmp, "confinement")
        # Real hugepages: reserve what is missing, mount a hugetlbfs of our own, give both back.
        before = int((HUGE / "nr_hugepages").read_text())
        free = int((HUGE / "free_hugepages").read_text())
        if free < PAGES:
            (HUGE / "nr_hugepages").write_text(str(before + PAGES - free))
            cls.addClassCleanup(lambda: (HUGE / "nr_hugepages").write_text(str(before)))
            if int((HUGE / "free_hugepages").read_text()) < PAGES:
                raise RuntimeError(f"could not reserve {PAGES} 2 MiB hugepages ({HUGE})")
        cls.huge = cls.tmp / "huge"
        cls.huge.mkdir()
        subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", str(cls.huge)], check=True)
        cls.addClassCleanup(subprocess.run, ["umount", "-l", str(cls.huge)], check=False)

    def run_confined(self, name, caps, containerd, hugepages, expect_running):
        """egwd under confine.py; returns (exit code, log lines, /proc status while it ran or None)."""
        prefix = f"egw-confine-{name}-{os.getpid()}"
        self.addCleanup(harness.remove_dpdk_runtime_dir, prefix)
        port = harness.free_port()
        cfg = config(self.tmp, prefix, port, self.huge if hugepages else None)
        cmd = [sys.executable, str(Path(confine.__file__)), "--caps", ",".join(caps)]
        cmd += ["--mempolicy-needs-sys-nice"] if containerd else []
        cmd += ["--", str(self.egwd), "-c", str(cfg)]
        log = self.tmp / f"{prefix}.log"
        with open(log, "w") as out:
            proc = harness.spawn(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.tmp)
        self.addCleanup(harness.stop_process, proc)
        status = None
        if expect_running:
            harness.wait_for(lambda: proc.poll() is not None or http_status(port, "/startz") == 200, 60,
                             lambda: f"egwd did not start:\n{harness.tail(log)}")
            self.assertIsNone(proc.poll(), f"egwd exited:\n{harness.tail(log)}")
            status = proc_status(proc.pid)
            r = harness.run([str(self.egwctl), "-p", prefix, "--json", "show", "version"], timeout=10)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("egwd", r.stdout)
            self.assertEqual(harness.stop_process(proc, sig=15), 0, harness.tail(log))
        else:
            proc.wait(timeout=60)
        return proc.returncode, log.read_text(errors="replace").splitlines(), status

    def assert_confined(self, status, caps):
        mask = f"{confine.cap_mask(caps):016x}"
        for field in ("CapEff", "CapPrm", "CapBnd"):
            self.assertEqual(status[field], mask, f"{field} of egwd")
        self.assertEqual(status["CapAmb"], "0" * 16)
        self.assertEqual(status["NoNewPrivs"], "1")
        self.assertEqual(status["Seccomp"], "2")  # a filter is in force

    def test_daemonset_capabilities_keep_sys_nice(self):
        self.assertEqual(self.caps, ["IPC_LOCK", "NET_ADMIN", "NET_RAW", "SYS_NICE"])

    def test_hugepages_under_containerds_default_with_the_daemonsets_capabilities(self):
        code, lines, status = self.run_confined("containerd", self.caps, True, True, True)
        self.assert_confined(status, self.caps)
        self.assertFalse([l for l in lines if "mempolicy" in l or "Operation not permitted" in l], "\n".join(lines))

    def test_hugepages_under_crio_default_with_the_daemonsets_capabilities(self):
        code, lines, status = self.run_confined("crio", self.caps, False, True, True)
        self.assert_confined(status, self.caps)

    def test_without_hugepages_under_containerds_default(self):
        code, lines, status = self.run_confined("nohuge", self.caps, True, False, True)
        self.assert_confined(status, self.caps)

    def test_without_sys_nice_eal_cannot_map_hugepages_under_containerds_default(self):
        caps = [c for c in self.caps if c != "SYS_NICE"]
        code, lines, _ = self.run_confined("nonice", caps, True, True, False)
        text = "\n".join(lines)
        self.assertNotEqual(code, 0, text)
        self.assertIn("Failed to get current mempolicy: Operation not permitted", text)
        self.assertIn("EAL initialisation failed", text)


if __name__ == "__main__":
    unittest.main()
