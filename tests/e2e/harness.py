# SPDX-License-Identifier: Apache-2.0
"""What the end-to-end suites share: finding the binaries, running and stopping processes
without ever hanging, waiting for a condition, and the test API server with the Kubernetes
objects the suites seed it with.

Every process a suite starts through `spawn` gets SIGTERM from the kernel if the test process
dies first (PR_SET_PDEATHSIG), so a crashed or killed test run leaves no egwd, API server or
traffic server behind, even when its cleanup never runs.
"""

import atexit
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
APISERVER = REPO / "tests" / "apiserver" / "apiserver.py"
NETNS_SH = REPO / "scripts" / "netns.sh"

STOP_TIMEOUT = 10.0
READY_TIMEOUT = 30.0   # egwd from start to `ready: true` in its status file (EAL, ports, first publication)
_PR_SET_PDEATHSIG = 1

sys.path.insert(0, str(APISERVER.parent))
from validation import debian_module  # noqa: E402,F401  (python3-yaml & co. from Debian's packages)


# --- binaries and processes ---------------------------------------------------------------------

def binary(env, default):
    """The path in $`env`, else `default`; relative paths are taken from the repository root."""
    path = Path(os.environ.get(env, default))
    if not path.is_absolute():
        path = REPO / path
    return path.resolve()


def build_dir():
    """$EGW_BUILD_DIR (e.g. build-asan, the sanitized build scripts/test.sh makes), else build."""
    return os.environ.get("EGW_BUILD_DIR") or "build"


def egwd_binary():
    return binary("EGWD", f"{build_dir()}/control/egwd")


def egwctl_binary():
    return binary("EGWCTL", f"{build_dir()}/control/egwctl")


def require_binaries(*paths):
    for path in paths:
        if not os.access(path, os.X_OK):
            raise FileNotFoundError(f"{path} not found: build with scripts/build.sh, or set EGW_BUILD_DIR or EGWD/EGWCTL")


def _die_with_parent():
    # Runs in the child between fork and exec.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn(cmd, **kw):
    """subprocess.Popen for a process the suite owns: it is terminated if the suite dies."""
    return subprocess.Popen(cmd, preexec_fn=_die_with_parent, **kw)


def run(cmd, timeout=20.0, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def run_bounded(cmd, timeout):
    """run() that reports a timeout as exit code 124 (like timeout(1)) instead of raising."""
    try:
        return run(cmd, timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", f"killed after {timeout}s")


def stop_process(proc, sig=signal.SIGINT, grace=STOP_TIMEOUT):
    """Sends `sig`, waits `grace` seconds, then SIGKILL. Returns the exit code (None for no process)."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass
    return proc.returncode


def describe_exit(code):
    if code is not None and code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def tail(path, lines=40):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} unreadable)"


def wait_for(predicate, timeout, message, interval=0.1):
    """predicate()'s first truthy value within `timeout` seconds, else AssertionError(message)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(interval)


def hold(predicate, duration, message, interval=0.1):
    """Checks that predicate() stays truthy for `duration` seconds ("consistently", as
    OVN-Kubernetes' e2e says it: checked over a period, not at the first success). It is called at
    least twice, first at once and last at the end of the period; the first falsy value raises
    AssertionError(message) (message() when callable). Returns the last value."""
    deadline = time.monotonic() + duration
    while True:
        value = predicate()
        if not value:
            raise AssertionError(message() if callable(message) else message)
        if time.monotonic() >= deadline:
            return value
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))


def eventually_consistently(predicate, timeout, duration, message, interval=0.1):
    """wait_for(predicate, timeout), then hold(predicate, duration): a state that must come and
    then stay. Returns the seconds it took to come."""
    t0 = time.monotonic()
    wait_for(predicate, timeout, message, interval)
    took = time.monotonic() - t0
    hold(predicate, duration, message, interval)
    return took


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dpdk_runtime_dir(file_prefix):
    """Where DPDK keeps the runtime files of a process started with `file_prefix`: its config,
    memory maps and sockets (telemetry, egwd's CLI), several MiB on a tmpfs that DPDK does not
    remove when the process ends."""
    base = Path("/var/run/dpdk") if os.geteuid() == 0 else Path(os.environ.get("XDG_RUNTIME_DIR", "/tmp")) / "dpdk"
    return base / file_prefix


def remove_dpdk_runtime_dir(file_prefix):
    shutil.rmtree(dpdk_runtime_dir(file_prefix), ignore_errors=True)


def remove_workdir(workdir, suite):
    """Deletes a suite's work directory, or keeps it (and says where) with EGW_E2E_KEEP=1."""
    if os.environ.get("EGW_E2E_KEEP"):
        print(f"\n{suite}: work directory kept in {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


# --- the namespace topology of scripts/netns.sh --------------------------------------------------

def iface_tag(suite):
    """This run's EGW_NETNS_TAG: `suite` (one letter per suite) and the process id in hex, at
    most 7 characters, so that <tag>-pods2 fits in an interface name (15) and two runs of the
    same suite, or of different suites, never share a root-side interface."""
    tag = f"{suite}{os.getpid():x}"
    if len(tag) > 9:
        raise ValueError(f"interface tag {tag!r} is too long")
    return tag


def random_ifindex():
    """An interface index for a root-side end egwd drives with net_af_packet (`ip link add NAME
    index N ...`). That PMD joins the PACKET_FANOUT group (pid ^ ifindex) & 0xffff, shared by the
    whole network namespace; with the kernel's consecutive indexes two egwd started close together
    often collide (the PMD then fails with EINVAL). A random index makes that rare."""
    return random.randrange(1 << 16, 1 << 24)


class Netns:
    """scripts/netns.sh's four namespaces <prefix>-{pods,pods2,ext1,ext2} and their root-side
    interfaces <tag>-<role> (dual-stack with `ipv6`): `up()` builds them, `down()` (idempotent)
    removes them."""

    def __init__(self, prefix, tag, ipv6=False):
        self.prefix, self.tag, self.ipv6 = prefix, tag, ipv6
        self.built = False

    def ns(self, role):
        return f"{self.prefix}-{role}"

    def iface(self, role):
        return f"{self.tag}-{role}"

    def _run(self, action):
        return run(["bash", str(NETNS_SH), action], 60,
                   env={**os.environ, "EGW_NETNS_PREFIX": self.prefix, "EGW_NETNS_TAG": self.tag,
                        "EGW_NETNS_IPV6": "1" if self.ipv6 else "0"})

    def up(self):
        self.built = True
        r = self._run("up")
        if r.returncode != 0:
            raise RuntimeError(f"scripts/netns.sh up failed:\n{r.stdout}{r.stderr}")

    def down(self):
        if self.built:
            self._run("down")
            self.built = False


# --- what one suite starts, and its teardown ----------------------------------------------------

def read_status(path):
    """egwd's status file as JSON, None while it does not exist. egwd replaces it by rename, so an
    unreadable moment can only be a race with its first write: tried three times."""
    for _ in range(3):
        try:
            return json.loads(Path(path).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            time.sleep(0.05)
    return None


def wait_rewritten(path, rewrites, timeout, message):
    """Waits until the status file at `path` has been replaced `rewrites` times from now, so that
    what it says next counts everything that happened before this call."""
    def stamp():
        try:
            st = Path(path).stat()
            return st.st_ino, st.st_mtime_ns
        except OSError:
            return None
    seen = [stamp()]

    def rewritten():
        now = stamp()
        if now is not None and now != seen[-1]:
            seen.append(now)
        return len(seen) > rewrites
    wait_for(rewritten, timeout, message)


class NamespaceRig:
    """Everything an end-to-end suite starts in network namespaces: its work directory, the
    namespaces (a `Netns`, or the suite's own through `at_cleanup`), egwd processes with their
    logs and DPDK runtime directories, the test API server and helper scripts run inside the
    namespaces. `cleanup()` tears all of it down in one idempotent place; `for_suite` calls it
    from the test class's cleanup, at interpreter exit and on SIGTERM (run_suite.py's timeout), so
    an interrupted run leaves nothing behind."""

    def __init__(self, suite, netns=None):
        self.suite = suite
        self.netns = netns
        self.workdir = Path(tempfile.mkdtemp(prefix=f"egw-{suite}-"))
        self.egwds = {}           # name -> Popen; its log is <workdir>/<name>.log
        self.procs = {}           # name -> Popen of a helper; its log is <workdir>/<name>.log
        self.api = None
        self._logs = []
        self._file_prefixes = []
        self._before_stop = []    # the suite's threads: stopped before any process
        self._after_stop = []     # the suite's own links and namespaces: removed after them
        self._previous_sigterm = None
        self._lock = threading.Lock()

    @classmethod
    def for_suite(cls, test_class, suite, prefix=None, tag=None, binaries=(), ipv6=False):
        """A rig for `test_class` (call from setUpClass), with scripts/netns.sh's topology under
        `prefix`/`tag` when given (built by `rig.netns.up()`). Raises SkipTest where namespaces
        cannot be made (not root, or no `ip netns`), FileNotFoundError when egwd or one of
        `binaries` is missing (an error, not a skip)."""
        if os.geteuid() != 0:
            raise unittest.SkipTest("end-to-end tests need root (network namespaces, veth, AF_PACKET)")
        if shutil.which("ip") is None or run(["ip", "netns", "list"], 10).returncode != 0:
            raise unittest.SkipTest("`ip netns` is unavailable (iproute2 missing or no netns support)")
        require_binaries(egwd_binary(), *binaries)
        rig = cls(suite, Netns(prefix, tag, ipv6) if prefix else None)
        test_class.addClassCleanup(rig.cleanup)
        atexit.register(rig.cleanup)
        if threading.current_thread() is threading.main_thread():
            rig._previous_sigterm = signal.signal(signal.SIGTERM, _sigterm_interrupts)
        return rig

    @property
    def egwd(self):
        """The suite's egwd when it runs one named "egwd" (None before it starts)."""
        return self.egwds.get("egwd")

    def log_path(self, name):
        return self.workdir / f"{name}.log"

    def at_cleanup(self, fn, before_processes=False):
        """Runs `fn` at cleanup: before any process is stopped (a thread of the suite's), or after
        all of them (links and namespaces the suite made itself)."""
        (self._before_stop if before_processes else self._after_stop).append(fn)

    def start_api(self):
        self.api = ApiServer(self.workdir)
        return self.api

    def start_egwd(self, config, status_file, file_prefix, name="egwd", args=("--log-level", "debug")):
        """egwd ($EGWD, or the build's) on `config`, writing `status_file`, logging to
        <workdir>/<name>.log; its DPDK runtime directory (the config's EAL file prefix) is removed
        at cleanup."""
        log = open(self.log_path(name), "w")
        self._logs.append(log)
        self._file_prefixes.append(file_prefix)
        self.egwds[name] = spawn([str(egwd_binary()), "-c", str(config), "--status-file", str(status_file), *args],
                                 cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        return self.egwds[name]

    def wait_egwd_ready(self, status_file, name="egwd", timeout=READY_TIMEOUT):
        """Waits until egwd `name` writes `ready: true` into `status_file`; raises with its exit
        status and log tail if it exits first or is not ready within `timeout` seconds."""
        proc = self.egwds[name]
        log = self.log_path(name)
        wait_for(lambda: (read_status(status_file) or {}).get("ready") is True or proc.poll() is not None, timeout,
                 lambda: f"{name} not ready within {timeout:g}s (status file "
                 f"{'present' if Path(status_file).exists() else 'absent'}):\n{tail(log)}")
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {describe_exit(proc.returncode)} before it was ready:\n{tail(log)}")
        return proc

    def start_ready_egwd(self, config, status_file, file_prefix, name="egwd", timeout=READY_TIMEOUT, **kw):
        """`start_egwd`, then `wait_egwd_ready`: the set-up every file-source suite repeats."""
        self.start_egwd(config, status_file, file_prefix, name=name, **kw)
        return self.wait_egwd_ready(status_file, name=name, timeout=timeout)

    def spawn_in(self, netns, name, script, *args, wait_ready=True, timeout=10.0):
        """A Python helper (peer.py, stream.py) in namespace `netns`, logging to <workdir>/<name>.log;
        waits until it logs "ready" unless told not to, and fails if it exits first."""
        log = self.log_path(name)
        with open(log, "w") as out:
            proc = spawn(["ip", "netns", "exec", netns, sys.executable, str(script), *map(str, args)],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.procs[name] = proc

        def text():
            try:
                return log.read_text(errors="replace")
            except OSError:
                return ""
        if wait_ready:
            wait_for(lambda: "ready" in text() or proc.poll() is not None, timeout,
                     lambda: f"{name} in {netns} did not start within {timeout:g}s:\n{text()}")
            if "ready" not in text():
                raise AssertionError(f"{name} in {netns} exited with {describe_exit(proc.returncode)}:\n{text()}")
        return proc

    def cleanup(self):
        with self._lock:
            for fn in self._before_stop:
                fn()
            self._before_stop = []
            for proc in self.procs.values():
                stop_process(proc, signal.SIGTERM, grace=3)
            self.procs = {}
            for proc in self.egwds.values():
                stop_process(proc)
            self.egwds = {}
            for log in self._logs:
                log.close()
            self._logs = []
            if self.api:
                self.api.stop()
                self.api = None
            for fn in self._after_stop:
                fn()
            self._after_stop = []
            if self.netns:
                self.netns.down()
            for prefix in self._file_prefixes:
                remove_dpdk_runtime_dir(prefix)
            self._file_prefixes = []
            if self.workdir:
                remove_workdir(self.workdir, self.suite)
                self.workdir = None
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
                self._previous_sigterm = None


def _sigterm_interrupts(signum, frame):
    # unittest then unwinds through the class cleanups, which stop what the suite started.
    raise KeyboardInterrupt("SIGTERM")


# --- the test API server and its objects --------------------------------------------------------

TOKEN = "egw-e2e-token"              # egwd's: the ServiceAccount egw-system/egwd of docker/k8s/rbac.yaml
EGWD_USER = "system:serviceaccount:egw-system:egwd"
ADMIN_TOKEN = "egw-e2e-admin-token"  # the test's own, unrestricted (what kubectl would do as an admin)
RBAC = REPO / "docker" / "k8s" / "rbac.yaml"


class ApiServer:
    """tests/apiserver/apiserver.py on a free port of 127.0.0.1, with its log in `workdir`.

    egwd's token (in the kubeconfig) authenticates as the ServiceAccount egw-system/egwd and is
    authorized by docker/k8s/rbac.yaml, as in a cluster; the test's own requests use an admin token.
    Nodes heartbeat every second, LoadBalancer Services are deleted through their finalizer, and a
    watch resumes only within the server's watch-cache window."""

    def __init__(self, workdir, token=TOKEN):
        self.token = token
        self.admin_token = ADMIN_TOKEN
        self.port_file = Path(workdir) / "apiserver.port"
        self.log_path = Path(workdir) / "apiserver.log"
        self.log = open(self.log_path, "w")
        self.proc = spawn([sys.executable, str(APISERVER), "--port", "0", "--port-file", str(self.port_file),
                           "--token", token, "--token-user", EGWD_USER,
                           "--admin-token", ADMIN_TOKEN, "--rbac", str(RBAC), "--node-heartbeat", "1"],
                          stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not (self.port_file.exists() and self.port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                stop_process(self.proc, signal.SIGTERM, grace=2)
                self.log.close()
                raise RuntimeError(f"the test API server did not start:\n{tail(self.log_path)}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(self.port_file.read_text())}"

    def write_kubeconfig(self, path, namespace=None):
        """A kubeconfig for this server with the bearer token; `namespace` is the context's."""
        context = {"cluster": "e2e", "user": "e2e"}
        if namespace:
            context["namespace"] = namespace
        Path(path).write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url}}],
            "users": [{"name": "e2e", "user": {"token": self.token}}],
            "contexts": [{"name": "e2e", "context": context}]}))
        return path

    def request(self, method, path, body=None, content_type="application/json", auth=True):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        if auth:
            req.add_header("Authorization", f"Bearer {self.admin_token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def control(self, what, body=None):
        """POST /_test/<what>: seed objects, inject faults (see the server's docstring)."""
        code, out = self.request("POST", f"/_test/{what}", body or {}, auth=False)
        if code != 200:
            raise RuntimeError(f"/_test/{what}: HTTP {code} {out}")
        return out

    def upsert(self, obj):
        self.control("upsert", obj)

    def delete(self, kind, name, namespace="default"):
        self.control("delete", {"kind": kind, "namespace": namespace, "name": name})

    def get(self, path):
        code, out = self.request("GET", path)
        return out if code == 200 else None

    def get_requests(self):
        """Every API request the server saw: [{"verb", "path", "code", "user"}]."""
        code, out = self.request("GET", "/_test/requests", auth=False)
        return out["requests"] if code == 200 else []

    def patch_spec(self, name, spec):
        """A JSON merge patch of an EgressService's spec, as `kubectl patch --type merge` sends
        it: status is left alone (None removes a field)."""
        code, out = self.request("PATCH", f"/apis/k8s.ovn.org/v1/namespaces/default/egressservices/{name}",
                                 {"spec": spec}, "application/merge-patch+json")
        if code != 200:
            raise RuntimeError(f"PATCH egressservice {name}: HTTP {code} {out}")

    def stop(self):
        stop_process(self.proc, signal.SIGTERM, grace=5)
        self.log.close()


def micro_time(t=None):
    t = datetime.now(timezone.utc) if t is None else t
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


GATEWAY_LABEL = {"egw.example.com/gateway": "true"}


def node(name, ready=True):
    """A gateway Node (it carries GATEWAY_LABEL)."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **GATEWAY_LABEL}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def lb_service(name, ingress, cluster_ip):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "LoadBalancer", "clusterIPs": [cluster_ip], "externalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {"ingress": [{"ip": ingress}]}}}


def endpoint_slice(name, service, ips, node_name="worker-1"):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "nodeName": node_name, "conditions": {"ready": True}} for ip in ips]}


def egress_service(name, source_ip_by="LoadBalancerIP", host=None, network=None, node_selector=None):
    """An EgressService; `host` pins it to one node by hostname, `node_selector` is matchLabels."""
    spec = {"sourceIPBy": source_ip_by}
    if host:
        spec["nodeSelector"] = {"matchLabels": {"kubernetes.io/hostname": host}}
    elif node_selector:
        spec["nodeSelector"] = {"matchLabels": dict(node_selector)}
    if network:
        spec["network"] = network
    return {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def selector(host):
    """The spec fields that put an EgressService on `host` (None: any node)."""
    return {"nodeSelector": {"matchLabels": {"kubernetes.io/hostname": host}} if host else None}


def liveness_lease(node_name, namespace, seconds=3):
    """The Lease a gateway renews to say it is alive (egw-node-<node>)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": f"egw-node-{node_name}", "namespace": namespace},
            "spec": {"holderIdentity": node_name, "leaseDurationSeconds": seconds, "renewTime": micro_time()}}
