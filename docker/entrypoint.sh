#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The container's entrypoint: renders egwd's configuration for this pod, then becomes egwd.
# The CLI is in the image too, next to egwd; from outside the pod:
#   kubectl -n egw-system exec ds/egwd -- egwctl show services
#
# The template is /etc/egw/<node name>.json when the ConfigMap has a key for this node, else
# /etc/egw/egwd.json. Every ${NAME} in it is replaced by the environment variable NAME; a name
# that is not set is an error. Besides the pod's own variables (NODE_NAME from the downward API,
# PCIDEVICE_* from the SR-IOV device plugin), three describe the CPUs the container may use,
# exclusive ones under the kubelet's static CPU manager:
#   EGW_CPUS         the list as the kernel gives it, e.g. "4-5" (EAL lcores are CPU ids)
#   EGW_CPU_MAIN     the first: the control thread
#   EGW_CPU_WORKERS  the others, comma separated: the data-plane workers
# Arguments are passed on to egwd. EGW_RENDER_ONLY=1 prints the rendered file and exits.
set -eu

config_dir=${EGW_CONFIG_DIR:-/etc/egw}
run_dir=${EGW_RUN_DIR:-/run/egw}

template="$config_dir/egwd.json"
if [ -n "${NODE_NAME:-}" ] && [ -f "$config_dir/$NODE_NAME.json" ]; then
  template="$config_dir/$NODE_NAME.json"
fi

EGW_CPUS=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
cpu_ids=$(echo "$EGW_CPUS" | awk -F, '{
  for (i = 1; i <= NF; i++) {
    n = split($i, r, "-")
    if (n == 1) print r[1]; else for (c = r[1]; c <= r[2]; c++) print c
  }
}')
EGW_CPU_MAIN=$(echo "$cpu_ids" | head -n 1)
EGW_CPU_WORKERS=$(echo "$cpu_ids" | tail -n +2 | paste -sd, - | sed 's/,/, /g')
if [ -z "$EGW_CPU_WORKERS" ]; then
  echo "egw-entrypoint: egwd needs at least two CPUs (a control thread and a worker), got \"$EGW_CPUS\"" >&2
  exit 1
fi
export EGW_CPUS EGW_CPU_MAIN EGW_CPU_WORKERS

mkdir -p "$run_dir"
rendered="$run_dir/egwd.json"
awk '
{
  line = $0; out = ""
  while (match(line, /\$\{[A-Za-z_][A-Za-z0-9_]*\}/)) {
    name = substr(line, RSTART + 2, RLENGTH - 3)
    if (!(name in ENVIRON)) {
      printf "egw-entrypoint: %s:%d: ${%s} is not set\n", FILENAME, FNR, name > "/dev/stderr"
      missing = 1
    }
    out = out substr(line, 1, RSTART - 1) ENVIRON[name]
    line = substr(line, RSTART + RLENGTH)
  }
  print out line
}
END { exit missing }
' "$template" > "$rendered"

if [ "${EGW_RENDER_ONLY:-}" = 1 ]; then
  cat "$rendered"
  exit 0
fi
exec /usr/local/bin/egwd -c "$rendered" --status-file "$run_dir/status.json" "$@"
