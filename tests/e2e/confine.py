# SPDX-License-Identifier: Apache-2.0
"""Runs a command confined the way a container runtime confines egwd's container: a capability
set (bounding, permitted, effective and inheritable sets all cut to it, ambient cleared),
no_new_privs, and a seccomp filter built from a runtime's default profile for exactly that
capability set. Optionally chrooted first (the image check in scripts/image.sh runs the image's
own binaries this way).

    python3 tests/e2e/confine.py [--caps NET_RAW,...|--caps-from-daemonset] [--profile FILE]
                                 [--mempolicy-needs-sys-nice] [--chroot DIR] -- COMMAND...

The profile is in the format Docker, containerd and the containers/common library (Podman,
CRI-O) share: a default action, then syscall rules, each optionally conditional on capabilities
(`includes.caps`: only when all are held; `excludes.caps`: not when any is held) or
architectures. Debian's golang-github-containers-common ships CRI-O's and Podman's default as
/usr/share/containers/seccomp.json. containerd's default (RuntimeDefault on most clusters)
differs from it where it matters to DPDK: get_mempolicy, mbind, set_mempolicy and
set_mempolicy_home_node are allowed only with CAP_SYS_NICE, and a denied call fails with EPERM
rather than ENOSYS; --mempolicy-needs-sys-nice applies those two rules on top of the file.

The filter is loaded with libseccomp's Python binding (Debian's python3-seccomp); names this
libseccomp does not know are left out, as runc and crun do.
"""
import argparse
import ctypes
import errno
import json
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAEMONSET = REPO / "docker" / "k8s" / "daemonset.yaml"
DEFAULT_PROFILE = Path("/usr/share/containers/seccomp.json")
MEMPOLICY = ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node")

# <linux/capability.h>
CAPS = ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
        "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
        "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
        "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
        "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
        "CHECKPOINT_RESTORE"]
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522

ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}  # the profile's names for the machine


def daemonset_caps(path=DAEMONSET):
    """The capabilities docker/k8s/daemonset.yaml's egwd container keeps: it drops ALL, so these are
    what it adds."""
    sys.path.insert(0, str(REPO / "tests" / "apiserver"))
    from validation import debian_module
    yaml = debian_module("yaml")
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "DaemonSet":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                if c["name"] == "egwd":
                    caps = c["securityContext"]["capabilities"]
                    if caps.get("drop") != ["ALL"]:
                        raise ValueError(f"{path}: egwd's capabilities.drop is {caps.get('drop')}, expected [ALL]")
                    return sorted(caps.get("add", []))
    raise ValueError(f"{path}: no DaemonSet with a container named egwd")


def cap_mask(names):
    mask = 0
    for n in names:
        n = n.upper().removeprefix("CAP_")
        if n not in CAPS:
            raise ValueError(f"unknown capability {n}")
        mask |= 1 << CAPS.index(n)
    return mask


def profile_rules(profile, caps, mempolicy_needs_sys_nice=False):
    """(default errno, [(action, errno or None, name, args)]) of the rules that apply to a process
    holding `caps` ({"CAP_NET_RAW", ...}) on this machine's architecture."""
    arch = ARCHES.get(platform.machine(), platform.machine())
    rules = []
    for r in profile["syscalls"]:
        inc, exc = r.get("includes") or {}, r.get("excludes") or {}
        if inc.get("arches") and arch not in inc["arches"]:
            continue
        if exc.get("arches") and arch in exc["arches"]:
            continue
        if not set(inc.get("caps") or []) <= caps:
            continue
        if set(exc.get("caps") or []) & caps:
            continue
        names = list(r.get("names") or ([r["name"]] if "name" in r else []))
        if mempolicy_needs_sys_nice and "CAP_SYS_NICE" not in caps:
            names = [n for n in names if n not in MEMPOLICY]
        for n in names:
            rules.append((r["action"], r.get("errnoRet"), n, r.get("args") or []))
    default_errno = profile.get("defaultErrnoRet", errno.EPERM)
    if mempolicy_needs_sys_nice:
        default_errno = errno.EPERM
    return default_errno, rules


def build_filter(profile, caps, mempolicy_needs_sys_nice=False):
    import seccomp  # Debian's python3-seccomp
    default_errno, rules = profile_rules(profile, caps, mempolicy_needs_sys_nice)
    actions = {"SCMP_ACT_ALLOW": lambda e: seccomp.ALLOW, "SCMP_ACT_ERRNO": lambda e: seccomp.ERRNO(e),
               "SCMP_ACT_KILL": lambda e: seccomp.KILL, "SCMP_ACT_KILL_PROCESS": lambda e: seccomp.KILL_PROCESS,
               "SCMP_ACT_LOG": lambda e: seccomp.LOG, "SCMP_ACT_TRAP": lambda e: seccomp.TRAP}
    if profile["defaultAction"] != "SCMP_ACT_ERRNO":
        raise ValueError(f"defaultAction {profile['defaultAction']}: only SCMP_ACT_ERRNO profiles are modelled")
    ops = {"SCMP_CMP_EQ": seccomp.EQ, "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT, "SCMP_CMP_LE": seccomp.LE,
           "SCMP_CMP_GT": seccomp.GT, "SCMP_CMP_GE": seccomp.GE, "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ}
    f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(default_errno))
    for action, err, name, args in rules:
        try:
            seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
        except (ValueError, RuntimeError):
            continue  # not a system call this libseccomp knows (other architectures, newer kernels)
        act = actions[action](err if err is not None else default_errno)
        if act == f.get_attr(seccomp.Attr.ACT_DEFAULT):
            continue
        conds = [seccomp.Arg(a["index"], ops[a["op"]], a["value"], a.get("valueTwo", 0)) for a in args]
        f.add_rule(act, name, *conds)
    return f


def confine(caps_names, profile_path, mempolicy_needs_sys_nice, chroot, command):
    libc = ctypes.CDLL(None, use_errno=True)
    mask = cap_mask(caps_names)
    caps = {"CAP_" + n.upper().removeprefix("CAP_") for n in caps_names}
    flt = build_filter(json.loads(Path(profile_path).read_text()), caps, mempolicy_needs_sys_nice)
    if chroot:
        os.chroot(chroot)
        os.chdir("/")
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text()) if Path("/proc/sys/kernel/cap_last_cap").exists() \
        else len(CAPS) - 1
    for c in range(last_cap + 1):
        if not mask >> c & 1 and libc.prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {c}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    for i in range(2):
        word = (mask >> (32 * i)) & 0xFFFFFFFF
        data[i].effective = data[i].permitted = data[i].inheritable = word
    if libc.capset(ctypes.byref(Header(LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    flt.load()
    os.execvp(command[0], command)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--caps", default=None, help="comma-separated capabilities to keep (default: none)")
    p.add_argument("--caps-from-daemonset", action="store_true", help=f"keep what {DAEMONSET.relative_to(REPO)} adds")
    p.add_argument("--profile", default=str(DEFAULT_PROFILE), help="seccomp profile (JSON)")
    p.add_argument("--mempolicy-needs-sys-nice", action="store_true",
                   help="containerd's rules: NUMA memory-policy calls only with CAP_SYS_NICE, EPERM by default")
    p.add_argument("--chroot", default=None)
    p.add_argument("command", nargs="+")
    a = p.parse_args()
    caps = daemonset_caps() if a.caps_from_daemonset else [c for c in (a.caps or "").split(",") if c]
    confine(caps, a.profile, a.mempolicy_needs_sys_nice, a.chroot, a.command)


if __name__ == "__main__":
    main()
