#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds egw's container image from docker/Dockerfile without Docker Hub or any registry, then
# checks what it holds. As root, on Debian 12:
#
#   scripts/image.sh            # build/image/egw-<version>.oci.tar, checked
#   scripts/image.sh --clean    # the same, then remove the image store (keeps the base tarball)
#   scripts/image.sh --check    # only the check (4.) and the archive, of the image built last
#
# 1. A Debian 12 base: debootstrap --variant=minbase bookworm from the mirror apt already uses
#    (EGW_DEBIAN_MIRROR overrides it), kept as build/image/base-bookworm.tar for the next run.
# 2. podman import of that base as debian:12 and debian:12-slim (the Dockerfile's two FROMs), in
#    an image store of the script's own under build/image (the machine's store is not touched).
# 3. podman build --isolation=chroot of docker/Dockerfile as it is: its stages run as chroots, so
#    no container is ever started (on machines whose cgroup setup refuses containers too).
# 4. The check: the image is mounted (podman create + podman mount) and its own entrypoint, egwd
#    and egwctl run in it by chroot, inside a network namespace the script makes, confined as
#    docker/k8s/daemonset.yaml asks (its capabilities only, no_new_privs, a RuntimeDefault-like
#    seccomp filter: tests/e2e/confine.py). egwd starts on two af_packet ports (veth pairs in that
#    namespace) without hugepages; the script checks egwd --version and --check-config, egwctl
#    from the image against that egwd, the probes and /metrics, and a clean stop on SIGTERM.
# 5. podman save --format oci-archive: the tarball loads with `podman load` or `skopeo copy
#    oci-archive:... docker://REGISTRY/egw:VERSION`.
#
# It takes a while: the build stage installs the compiler and the -dev packages and compiles
# egwd from nothing (docs/operations.md has the last run's times). Not part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's python3 (tests/e2e/confine.py needs its python3-seccomp and python3-yaml) and tools.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

clean=false
build=true
for a in "$@"; do
  case $a in
    --clean) clean=true ;;
    --check) build=false ;;
    -h | --help) sed -n '3,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
    *) echo "image.sh: unknown argument $a (--clean, --check, --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "image.sh: needs root (debootstrap, podman's store, chroot, namespaces)" >&2; exit 2; }
bash scripts/deps.sh --image

say() { printf '== image: %s\n' "$*"; }
fail() { printf 'image.sh: FAILED: %s\n' "$*" >&2; exit 1; }
started=$SECONDS

version=$(sed -n "s/^ *version: '\([^']*\)',.*/\1/p" meson.build | head -n 1)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || revision="$revision-dirty"
tag=localhost/egw:$version
work=${EGW_IMAGE_WORK:-build/image}
mkdir -p "$work"
work=$(cd "$work" && pwd)
store=${EGW_IMAGE_STORE:-$work/storage}  # podman's image store (layers are cached there between runs)
podman=(podman --root "$store" --runroot "$work/run" --storage-driver overlay --cgroup-manager cgroupfs
        --events-backend none)

build_s=0
if [ "$build" = true ]; then
# --- 1. the base ---------------------------------------------------------------------------------
mirror=${EGW_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
[ -n "$mirror" ] || fail "no Debian mirror in apt's sources; set EGW_DEBIAN_MIRROR"
base=$work/base-bookworm.tar
if [ ! -s "$base" ]; then
  say "debootstrap --variant=minbase bookworm from $mirror"
  rm -rf "$work/rootfs"
  t=$SECONDS
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log"; fail "debootstrap (log: $work/debootstrap.log)"; }
  tar -C "$work/rootfs" --numeric-owner -cf "$base.part" . && mv "$base.part" "$base"
  rm -rf "$work/rootfs"
  say "base made in $((SECONDS - t)) s: $(du -h "$base" | cut -f1)"
fi
# Imported once per store: a new import would be a new image, and podman build's layer cache
# (the build stage's package installation above all) would start again from nothing.
if ! "${podman[@]}" image exists docker.io/library/debian:12; then
  say "podman import of the base as debian:12 and debian:12-slim"
  "${podman[@]}" import --quiet "$base" docker.io/library/debian:12 >/dev/null
  "${podman[@]}" tag docker.io/library/debian:12 docker.io/library/debian:12-slim
fi

# --- 2. the build --------------------------------------------------------------------------------
say "podman build --isolation=chroot -f docker/Dockerfile -t $tag (log: $work/build.log)"
t=$SECONDS
if ! "${podman[@]}" build --isolation=chroot --pull=never --network=host \
      --ignorefile docker/Dockerfile.dockerignore -f docker/Dockerfile \
      --build-arg EGW_VERSION="$version" --build-arg EGW_REVISION="$revision" -t "$tag" . >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log"
  fail "podman build (log: $work/build.log)"
fi
build_s=$((SECONDS - t))
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$tag")
say "built in $build_s s: $tag, $((size / 1024 / 1024)) MiB"
else
  "${podman[@]}" image exists "$tag" || fail "--check: no image $tag in $store; build it first"
fi

# --- 3. the check --------------------------------------------------------------------------------
ns=egw-img-$$
ctr=
mnt=
egwd_pid=
cleanup() {
  set +e
  [ -n "$egwd_pid" ] && kill "$egwd_pid" 2>/dev/null && wait "$egwd_pid" 2>/dev/null
  if [ -n "$mnt" ]; then
    for m in proc sys dev; do umount -l "$mnt/$m" 2>/dev/null; done
  fi
  [ -n "$ctr" ] && { "${podman[@]}" umount "$ctr" >/dev/null; "${podman[@]}" rm -f "$ctr" >/dev/null; }
  ip netns del "$ns" 2>/dev/null
}
trap cleanup EXIT

labels=$("${podman[@]}" image inspect --format '{{json .Labels}}' "$tag")
for k in title description version revision licenses; do
  python3 -c 'import json, sys; l = json.loads(sys.argv[1]); sys.exit(0 if l.get(sys.argv[2]) else 1)' \
    "$labels" "org.opencontainers.image.$k" || fail "label org.opencontainers.image.$k missing: $labels"
done
python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1])["org.opencontainers.image.version"] == sys.argv[2] else 1)' \
  "$labels" "$version" || fail "label org.opencontainers.image.version is not $version: $labels"
entry=$("${podman[@]}" image inspect --format '{{json .Config.Entrypoint}}' "$tag")
[ "$entry" = '["/usr/local/bin/egw-entrypoint"]' ] || fail "entrypoint is $entry"

ctr=$("${podman[@]}" create "$tag")
mnt=$("${podman[@]}" mount "$ctr")
mount -t proc proc "$mnt/proc"
mount --rbind /sys "$mnt/sys" && mount --make-rslave "$mnt/sys"
mount --rbind /dev "$mnt/dev" && mount --make-rslave "$mnt/dev"
in_image() { ip netns exec "$ns" chroot "$mnt" "$@"; }

ip netns add "$ns"
ip -n "$ns" link set lo up
for p in in out; do
  ip -n "$ns" link add "egw-$p" type veth peer name "peer-$p"
  ip -n "$ns" link set "egw-$p" up
  ip -n "$ns" link set "peer-$p" up
done

v=$(in_image /usr/local/bin/egwd --version) || fail "egwd --version"
case $v in "egwd $version (DPDK "*) ;; *) fail "egwd --version says \"$v\", expected egwd $version" ;; esac
c=$(in_image /usr/local/bin/egwctl --version) || fail "egwctl --version"
case $c in "egwctl $version"*) ;; *) fail "egwctl --version says \"$c\"" ;; esac
say "$v; $c"

# The pod's configuration, rendered by the image's entrypoint from the same ${NAME}s as the
# ConfigMap's, with af_packet ports instead of VFs and no hugepages.
mkdir -p "$mnt/etc/egw" "$mnt/etc/egw/manifests"
cat >"$mnt/etc/egw/egwd.json" <<'EOF'
{
  "eal": {"lcores": "${EGW_CPUS}", "main_lcore": ${EGW_CPU_MAIN}, "no_huge": true, "memory_mb": 256,
          "file_prefix": "egw",
          "vdevs": ["net_af_packet0,iface=egw-in,qpairs=1", "net_af_packet1,iface=egw-out,qpairs=1"]},
  "workers": [${EGW_CPU_WORKERS}],
  "mempool": {"mbufs": 4095},
  "ports": [
    {"name": "cluster", "device": "net_af_packet0", "role": "inside", "addresses": ["10.10.0.2/24"]},
    {"name": "uplink", "device": "net_af_packet1", "role": "outside", "addresses": ["203.0.113.10/24"]}
  ],
  "cluster": {"pod_cidrs": ["10.244.0.0/16"]},
  "sessions": {"max": 65536},
  "node": {"name": "${NODE_NAME}"},
  "state": {"source": "files", "path": "/etc/egw/manifests"},
  "metrics": {"enabled": true, "listen": "127.0.0.1:9469"}
}
EOF
env_in_pod=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin NODE_NAME=image-check)
in_image "${env_in_pod[@]}" EGW_RENDER_ONLY=1 /usr/local/bin/egw-entrypoint >"$work/rendered.json" \
  || fail "the entrypoint could not render the configuration"
cp "$work/rendered.json" "$mnt/etc/egw/rendered.json"
r=$(in_image /usr/local/bin/egwd --check-config /etc/egw/rendered.json 2>&1) || fail "egwd --check-config: $r"
say "$r"

say "egwd through the image's entrypoint, confined as the DaemonSet asks"
ip netns exec "$ns" python3 tests/e2e/confine.py --caps-from-daemonset --mempolicy-needs-sys-nice --chroot "$mnt" -- \
  "${env_in_pod[@]}" /usr/local/bin/egw-entrypoint --duration 60 >"$work/egwd.log" 2>&1 &
egwd_pid=$!
probe() { ip netns exec "$ns" curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:9469$1" || true; }
for _ in $(seq 1 150); do
  [ "$(probe /readyz)" = 200 ] && break
  kill -0 "$egwd_pid" 2>/dev/null || { tail -30 "$work/egwd.log"; fail "egwd exited before it was ready"; }
  sleep 0.2
done
for p in /startz /readyz /livez; do
  code=$(probe $p)
  [ "$code" = 200 ] || { tail -30 "$work/egwd.log"; fail "GET $p answered $code"; }
done
ip netns exec "$ns" curl -s --max-time 5 http://127.0.0.1:9469/metrics >"$work/metrics.txt"
grep -q '^egw_build_info{version="'"$version"'"' "$work/metrics.txt" \
  || fail "/metrics has no egw_build_info for $version (saved in $work/metrics.txt)"
ports=$(in_image /usr/local/bin/egwctl --json show port info all) || fail "egwctl show port info all: $ports"
python3 - "$ports" <<'EOF' || fail "egwctl --json show port info all from the image: $ports"
import json, sys
seen = sorted((p["name"], p["driver"], p["link_up"]) for p in json.loads(sys.argv[1]))
want = [("cluster", "net_af_packet", True), ("uplink", "net_af_packet", True)]
sys.exit(0 if seen == want else f"ports {seen}, expected {want}")
EOF
sv=$(in_image /usr/local/bin/egwctl show version) || fail "egwctl show version: $sv"
grep -q "$version" <<<"$sv" || fail "egwctl show version: $sv"
status=$(awk '/^(CapEff|NoNewPrivs|Seccomp):/ {printf " %s %s", $1, $2}' "/proc/$egwd_pid/status")
say "egwd ready, probes 200, egwctl from the image answered;$status"
kill -TERM "$egwd_pid"
rc=0
wait "$egwd_pid" || rc=$?
egwd_pid=
[ "$rc" = 0 ] || { tail -20 "$work/egwd.log"; fail "egwd exited with $rc on SIGTERM"; }
grep -q "stopping" "$work/egwd.log" || fail "egwd did not log its stop"
cleanup
trap - EXIT

# --- 4. the archive ------------------------------------------------------------------------------
out=$work/egw-$version.oci.tar
rm -f "$out"
"${podman[@]}" save --quiet --format oci-archive -o "$out" "$tag"
say "saved $out ($(du -h "$out" | cut -f1)); load it with: podman load -i $out"
if [ "$clean" = true ]; then
  "${podman[@]}" system reset --force >/dev/null 2>&1 || true
  rm -rf "$store" "$work/run"
fi
say "image ok in $((SECONDS - started)) s (build $build_s s)"
