#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The egw demo, on one machine with no NIC and no cluster (Debian 12, as root):
#
#   scripts/demo.sh [--no-build]
#
# builds egwd and egwctl (scripts/build.sh --demo: only they and the packages they need, in
# build-demo/; scripts/build.sh builds the rest), puts egwd between a pod network and two
# external networks made of dual-stack network namespaces (scripts/netns.sh, EGW_NETNS_IPV6=1),
# sends TCP, UDP and ping from the pods over IPv4 and IPv6, and prints for each flow the source
# address the external server saw and the egwd port it left through: the dual-stack Service
# default/web leaves with its IPv4 ingress IP over IPv4 and its IPv6 one over IPv6 (NAPT66). Then
# it deletes the web EgressService and shows the next connection of each family leave with the
# default action. egwd reads a copy of config/demo-manifests, so the repository is never
# edited. Everything it starts is stopped and removed on exit, error or Ctrl-C.
#
# --no-build skips the build and runs build/control/egwd (scripts/build.sh), or build-demo's when
# there is no build/ (an earlier demo). EGW_NETNS_PREFIX (default egw) names the
# namespaces and EGW_NETNS_TAG (default egw) the root-side interfaces <tag>-pods, ... (see
# scripts/netns.sh); EGWD overrides the binary.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "demo.sh: run as root: it creates network namespaces and runs DPDK" >&2
  exit 1
fi

export EGW_NETNS_PREFIX=${EGW_NETNS_PREFIX:-egw}
export EGW_NETNS_TAG=${EGW_NETNS_TAG:-egw}
export EGW_NETNS_IPV6=1              # the demo is dual-stack (config/demo.json)
PEER=tests/e2e/peer.py
DEMO_TIMEOUT=${DEMO_TIMEOUT:-60}   # seconds after the build; the demo itself needs about 15

work=""
topology=""
egwd_pid=""
watchdog_pid=""
server_pids=()

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [ -n "$watchdog_pid" ] && kill "$watchdog_pid" 2>/dev/null
  for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null; done
  if [ -n "$egwd_pid" ] && kill -0 "$egwd_pid" 2>/dev/null; then
    stop_egwd
  fi
  [ -n "$topology" ] && bash scripts/netns.sh down
  if [ -n "$work" ]; then
    rm -rf "/var/run/dpdk/egw-demo-$$"
    if [ $rc -ne 0 ] && [ -f "$work/egwd.log" ]; then
      echo "--- last lines of egwd's log ---" >&2
      tail -n 20 "$work/egwd.log" >&2
    fi
    rm -rf "$work"
  fi
  [ $rc -ne 0 ] && echo "demo.sh: failed (exit $rc); everything it started has been removed" >&2
  exit $rc
}
trap cleanup EXIT
trap 'echo; echo "demo.sh: interrupted" >&2; exit 130' INT TERM

# SIGINT, then SIGKILL after 10 s; leaves egwd's exit code in egwd_code.
egwd_code=""
stop_egwd() {
  local i
  kill -INT "$egwd_pid" 2>/dev/null || true
  for i in $(seq 100); do
    kill -0 "$egwd_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$egwd_pid" 2>/dev/null; then
    echo "egwd did not stop within 10 s: SIGKILL" >&2
    kill -KILL "$egwd_pid" 2>/dev/null || true
  fi
  egwd_code=0
  wait "$egwd_pid" 2>/dev/null || egwd_code=$?
  egwd_pid=""
}

in_ns() { local role=$1; shift; ip netns exec "$EGW_NETNS_PREFIX-$role" "$@"; }

build=yes
case ${1:-} in
  "") ;;
  --no-build) build=no ;;
  *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac

if [ $build = yes ]; then
  say "building egwd and egwctl (scripts/build.sh --demo)"
  bash scripts/build.sh --demo
  EGWD=${EGWD:-build-demo/control/egwd}
elif [ -z "${EGWD:-}" ]; then
  EGWD=build/control/egwd
  [ -x "$EGWD" ] || EGWD=build-demo/control/egwd
fi
[ -x "$EGWD" ] || { echo "demo.sh: $EGWD was not built" >&2; exit 1; }

# From here on the demo ends by itself: the watchdog interrupts it (and so cleans up) if anything
# hangs.
(
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM   # cleanup stops the watchdog and its sleep
  sleep "$DEMO_TIMEOUT" & sleeper=$!
  wait "$sleeper"
  echo "demo.sh: still running after ${DEMO_TIMEOUT}s, giving up" >&2
  kill -TERM $$
) &
watchdog_pid=$!

say "topology: dual-stack namespaces $EGW_NETNS_PREFIX-{pods,pods2,ext1,ext2} (scripts/netns.sh up)"
topology=yes
bash scripts/netns.sh up
bash scripts/netns.sh show

say "starting egwd on config/demo.json (manifests copied to a temporary directory)"
work=$(mktemp -d -t egw-demo.XXXXXX)
config=$(python3 "$PEER" stage --config config/demo.json --dir "$work" --file-prefix "egw-demo-$$" \
  --iface-tag "$EGW_NETNS_TAG")
status="$work/status.json"
"$EGWD" -c "$config" --status-file "$status" --log-level info 2>"$work/egwd.log" </dev/null &
egwd_pid=$!
ready=""
for _ in $(seq 300); do
  kill -0 "$egwd_pid" 2>/dev/null || { echo "demo.sh: egwd exited early" >&2; exit 1; }
  if [ -f "$status" ] && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("ready") else 1)' "$status" 2>/dev/null; then
    ready=yes
    break
  fi
  sleep 0.1
done
[ -n "$ready" ] || { echo "demo.sh: egwd not ready within 30 s" >&2; exit 1; }
echo "egwd is ready (pid $egwd_pid); log: $work/egwd.log"

say "external servers on 192.0.2.100 and 2001:db8:2::100 (ext1), 198.51.100.100 and 2001:db8:100::100 (ext2), pod 10.244.2.10 and fd00:10:244:2::10 (pods2), port 8080"
for role in ext1 ext2 pods2; do
  ip netns exec "$EGW_NETNS_PREFIX-$role" python3 "$PEER" serve --tcp 8080 --udp 8080 --icmp --ipv6 --lifetime "$DEMO_TIMEOUT" \
    >"$work/server-$role.log" 2>&1 &
  server_pids+=($!)
done
for role in ext1 ext2 pods2; do
  for _ in $(seq 50); do grep -q '^ready' "$work/server-$role.log" && break; sleep 0.1; done
  grep -q '^ready' "$work/server-$role.log" || { echo "demo.sh: server in $role did not start" >&2; exit 1; }
done

# One flow a line: label, protocol, pod address, pod source port (or -), destination, the
# namespace of the server, and the source address the server should see.
flows=(
  "web       tcp  10.244.1.10 40001 192.0.2.100    ext1  192.0.2.50"
  "web       udp  10.244.1.10 40002 192.0.2.100    ext1  192.0.2.50"
  "web       icmp 10.244.1.10 -     192.0.2.100    ext1  192.0.2.50"
  "web       tcp  10.244.1.11 40001 192.0.2.100    ext1  192.0.2.50"
  "db        tcp  10.244.1.20 40001 198.51.100.100 ext2  198.51.100.1"
  "db        udp  10.244.1.20 40002 198.51.100.100 ext2  198.51.100.1"
  "db        icmp 10.244.1.20 -     198.51.100.100 ext2  198.51.100.1"
  "pod-cidr  tcp  10.244.1.10 40003 10.244.2.10    pods2 10.244.1.10"
  "pod-cidr  icmp 10.244.1.10 -     10.244.2.10    pods2 10.244.1.10"
  "no-egress tcp  10.244.1.30 40001 192.0.2.100    ext1  192.0.2.1"
  "no-egress udp  10.244.1.30 40002 192.0.2.100    ext1  192.0.2.1"
  "web       tcp  fd00:10:244:1::10 40011 2001:db8:2::100   ext1  2001:db8:2::50"
  "web       udp  fd00:10:244:1::10 40012 2001:db8:2::100   ext1  2001:db8:2::50"
  "web       icmp fd00:10:244:1::10 -     2001:db8:2::100   ext1  2001:db8:2::50"
  "web       tcp  fd00:10:244:1::11 40011 2001:db8:2::100   ext1  2001:db8:2::50"
  "db        tcp  fd00:10:244:1::20 40011 2001:db8:100::100 ext2  2001:db8:100::1"
  "db        icmp fd00:10:244:1::20 -     2001:db8:100::100 ext2  2001:db8:100::1"
  "pod-cidr  tcp  fd00:10:244:1::10 40013 fd00:10:244:2::10 pods2 fd00:10:244:1::10"
  "no-egress udp  fd00:10:244:1::30 40012 2001:db8:2::100   ext1  2001:db8:2::1"
)

# "[v6]:port" for an IPv6 address, "v4:port" otherwise.
endpoint() { case $1 in *:*) echo "[$1]:$2" ;; *) echo "$1:$2" ;; esac; }

# Runs one flow and prints "<seen>" (the address the server saw) or "FAILED: <why>".
run_flow() {
  local proto=$1 pod=$2 sport=$3 dst=$4 role=$5 out token line
  if [ "$proto" = icmp ]; then
    token="demo-$pod-$dst-$RANDOM"
    if ! out=$(in_ns pods python3 "$PEER" ping "$dst" --bind "$pod" --count 1 --timeout 5 --token "$token" 2>&1); then
      echo "FAILED: $out"; return
    fi
    for _ in $(seq 20); do
      line=$(grep " token=$token\$" "$work/server-$role.log" | head -n 1 || true)
      [ -n "$line" ] && break
      sleep 0.1
    done
    if [ -n "$line" ]; then echo "$line" | awk '{print $2}'; else echo "FAILED: echo request not seen by the server"; fi
  else
    if out=$(in_ns pods python3 "$PEER" "$proto" "$dst" 8080 --bind "$(endpoint "$pod" "$sport")" --timeout 5 2>&1); then
      echo "$out"
    else
      echo "FAILED: $out"
    fi
  fi
}

say "traffic from the pods"
: >"$work/flows.tsv"
for f in "${flows[@]}"; do
  read -r label proto pod sport dst role want <<<"$f"
  seen=$(run_flow "$proto" "$pod" "$sport" "$dst" "$role")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$proto" "$pod" "$sport" "$dst" "$want" "$seen" >>"$work/flows.tsv"
  printf '  %-9s %-4s %-17s -> %-17s seen as %s\n' "$label" "$proto" "$pod" "$dst" "$seen"
done

say "a few malformed frames from the pods (truncated header, IHL < 5, protocol 253)"
for kind in truncated ihl proto253; do
  in_ns pods python3 "$PEER" inject --iface eth0 --dst-mac 02:e9:00:00:00:01 --kind "$kind" --count 2
done

# Let egwd rewrite its status file (every 500 ms) so that it holds the flows above.
sleep 1.2

say "what the servers saw, and the egwd port each flow left through"
python3 - "$work/flows.tsv" "$status" <<'EOF'
import json
import sys

flows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
status = json.load(open(sys.argv[2]))
sessions = status.get("sessions", [])

def endpoint(addr, port):
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"

def host(seen):
    # "[v6]:port", "v4:port", or a bare address of either family (an echo request's source).
    if seen.startswith("["):
        return seen[1:seen.find("]")]
    return seen.split(":")[0] if seen.count(":") == 1 else seen

def egress_port(proto, pod, sport, dst):
    v6 = ":" in dst
    listed = "icmpv6" if v6 and proto == "icmp" else proto
    for s in reversed(sessions):
        if s.get("proto") != listed or not s.get("remote", "").startswith(endpoint(dst, "")):
            continue
        inside = s.get("inside", "")
        if inside == endpoint(pod, sport) or (proto == "icmp" and inside.startswith(endpoint(pod, ""))):
            return s.get("port", "?")
    routed = dst.startswith("10.244.") or dst.startswith("fd00:10:244:")
    return "- (routed, no NAT)" if routed else "- (no session)"

print("  web = default/web (LoadBalancerIP, dual-stack: ingress 192.0.2.50 and 2001:db8:2::50);\n"
      "  db = default/db (Network, VRF blue); pod-cidr = to a pod of another pod subnet;\n"
      "  no-egress = a pod of no EgressService (masqueraded to ext1's address of its family)\n")
rows = [("flow", "proto", "pod", "destination", "server saw", "left via", "check")]
bad = 0
for label, proto, pod, sport, dst, want, seen in flows:
    pod_addr = pod if sport == "-" else endpoint(pod, sport)
    dest = dst if proto == "icmp" else endpoint(dst, 8080)
    ok = host(seen) == want
    bad += not ok
    rows.append((label, proto, pod_addr, dest, seen, egress_port(proto, pod, sport, dst),
                 "ok" if ok else f"UNEXPECTED (want {want})"))
widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
for i, r in enumerate(rows):
    print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if i == 0:
        print("  " + "  ".join("-" * w for w in widths))

print("\nservices (EgressService status.host as egwd would write it):")
for s in status.get("services", []):
    source = (f"ingress={s.get('ingress_ip') or '-'},{s.get('ingress_ipv6') or '-'}"
              if s.get("mode") == "LoadBalancerIP" else f"network={s.get('network') or '-'}")
    print(f"  {s.get('key'):<12} status.host={s.get('status_host')!r:<7} mode={s.get('mode'):<15}"
          f"{source:<34} vrf={s.get('vrf'):<8}"
          f"  endpoints={s.get('endpoints')}+{s.get('endpoints_ipv6', 0)} IPv6"
          f"  programmed={s.get('programmed')}/IPv6 {s.get('programmed_ipv6')}"
          f"  packets out/in={s.get('packets_out')}/{s.get('packets_in')}"
          + (f"  reason={s['reason']}" if s.get("reason") else ""))

print("\nports:")
for p in status.get("ports", []):
    print(f"  {p.get('name'):<6} rx {p.get('rx_packets'):>6} packets  tx {p.get('tx_packets'):>6} packets")

drops = {k: v for k, v in status.get("drops", {}).items() if v}
print("\ndrops:", ", ".join(f"{k}={v}" for k, v in sorted(drops.items())) or "none")
if bad:
    print(f"\n{bad} flow(s) did not arrive as expected")
open(sys.argv[1] + ".bad", "w").write(str(bad))
EOF

say "deleting the EgressService default/web"
python3 "$PEER" delete-egress-service "$work/manifests" default/web
# The next connection of each family leaves with the default action: masquerade to ext1's
# address of that family.
fallback() { # pod, destination, expected source
  local start deadline after took
  start=$(date +%s.%N)
  deadline=$(( $(date +%s) + 3 ))
  after=""
  while [ "$(date +%s)" -le "$deadline" ]; do
    after=$(in_ns pods python3 "$PEER" tcp "$2" 8080 --bind "$1" --timeout 1 2>/dev/null || true)
    case $after in "$3":*|"[$3]":*) break ;; esac
    sleep 0.1
  done
  took=$(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$start")
  echo "  next connection $1 -> $(endpoint "$2" 8080) seen as ${after:-nothing} after ${took}s"
  case $after in
    "$3":*|"[$3]":*) echo "  (the default action, masquerade to ext1's address $3)" ;;
    *) echo "demo.sh: web traffic did not fall back to the default action" >&2; exit 1 ;;
  esac
}
fallback 10.244.1.10 192.0.2.100 192.0.2.1
fallback fd00:10:244:1::10 2001:db8:2::100 2001:db8:2::1

say "stopping egwd"
stop_egwd
echo "egwd exited with $egwd_code"

bad=$(cat "$work/flows.tsv.bad")
if [ "$bad" -ne 0 ] || [ "$egwd_code" -ne 0 ]; then
  exit 1
fi
say "demo finished; removing the topology"
