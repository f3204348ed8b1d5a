#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds or removes the end-to-end topology: four network namespaces, each joined to the root
# namespace by a veth pair. egwd runs in the root namespace and drives the root-side ends with
# net_af_packet (config/demo.json names them), so those ends carry no address of their own.
#
#   scripts/netns.sh up      remove what a previous run left, then build the topology
#   scripts/netns.sh down    remove it; never fails on missing pieces
#   scripts/netns.sh show    print the namespaces and their addresses
#
# EGW_NETNS_PREFIX (default "egw") names the namespaces <prefix>-pods, <prefix>-pods2,
# <prefix>-ext1 and <prefix>-ext2. EGW_NETNS_TAG (default "egw", at most 9 characters so that
# <tag>-pods2 fits Linux's 15) names the root-side interfaces <tag>-pods, <tag>-pods2, <tag>-ext1
# and <tag>-ext2; egwd's configuration names them (config/demo.json uses the default tag). Runs
# with different prefixes and tags are independent, so several topologies can exist at once (the
# end-to-end suites give each run its own). `up` and `down` also remove the namespaces at the far
# end of this tag's interfaces, whatever prefix created them. The interface inside every
# namespace is called eth0.
#
# EGW_NETNS_IPV6=1 adds IPv6 beside IPv4 (topology6 below).
#
#   pod side                              egwd (root ns)                     external side
#   <p>-pods  eth0 10.244.1.10,.11,.20,.30 == <t>-pods  | inside  pods
#   <p>-pods2 eth0 10.244.2.10             == <t>-pods2 | inside  pods2
#                                             <t>-ext1  | outside ext1 (default) == eth0 192.0.2.100    <p>-ext1
#                                             <t>-ext2  | outside ext2 (blue)    == eth0 198.51.100.100 <p>-ext2
set -uo pipefail

prefix=${EGW_NETNS_PREFIX:-egw}
case $prefix in
  ""|*[!A-Za-z0-9_.-]*) echo "netns.sh: EGW_NETNS_PREFIX must be letters, digits, '.', '_' or '-'" >&2; exit 2 ;;
esac
tag=${EGW_NETNS_TAG:-egw}
case $tag in
  ""|*[!A-Za-z0-9_-]*) echo "netns.sh: EGW_NETNS_TAG must be letters, digits, '_' or '-'" >&2; exit 2 ;;
esac
if [ ${#tag} -gt 9 ]; then
  echo "netns.sh: EGW_NETNS_TAG '$tag' is longer than 9 characters ('$tag-pods2' must fit in 15)" >&2
  exit 2
fi

# role  root-side interface  addresses (first is the primary)                   default gateway
topology=(
  "pods  $tag-pods  10.244.1.10/24,10.244.1.11/24,10.244.1.20/24,10.244.1.30/24 10.244.1.1"
  "pods2 $tag-pods2 10.244.2.10/24                                              10.244.2.1"
  "ext1  $tag-ext1  192.0.2.100/24                                              -"
  "ext2  $tag-ext2  198.51.100.100/24                                           -"
)
roles=(pods pods2 ext1 ext2)

# With EGW_NETNS_IPV6=1 the namespaces are dual-stack: these IPv6 addresses beside the IPv4 ones
# (config/demo.json gives egwd's ports the ::1 of each prefix). Without it the namespaces have no
# IPv6 at all, as the IPv4 suites expect (no router solicitations or MLD reports on the wire).
# role  addresses                                                                  default gateway
topology6=(
  "pods  fd00:10:244:1::10/64,fd00:10:244:1::11/64,fd00:10:244:1::20/64,fd00:10:244:1::30/64 fd00:10:244:1::1"
  "pods2 fd00:10:244:2::10/64                                                     fd00:10:244:2::1"
  "ext1  2001:db8:2::100/64                                                       -"
  "ext2  2001:db8:100::100/64                                                     -"
)
ipv6=${EGW_NETNS_IPV6:-0}
case $ipv6 in
  0|1) ;;
  *) echo "netns.sh: EGW_NETNS_IPV6 must be 0 or 1, got '$ipv6'" >&2; exit 2 ;;
esac

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$1"; }

# The veth pair of one role: the root-side end with a random interface index. net_af_packet joins
# its sockets to the PACKET_FANOUT group (pid ^ ifindex) & 0xffff, and a group belongs to the whole
# network namespace, so two egwd whose pids and indexes XOR to the same group collide (the second
# fails with "could not set PACKET_FANOUT ... Invalid argument"). Close pids and the kernel's
# consecutive indexes make that likely; random indexes make it rare.
add_veth() { # root-side name, namespace
  local i
  for i in 1 2 3 4 5 6 7 8; do
    ip link add "$1" index $((65536 + SRANDOM % 16711680)) type veth peer name eth0 netns "$2" 2>/dev/null &&
      return 0
  done
  ip link add "$1" type veth peer name eth0 netns "$2"
}

# Writes a sysctl through /proc so that interface names with dots or dashes need no escaping.
# Missing keys (IPv6 compiled out, for instance) are not an error.
set_sysctl() { # [netns] path value
  local ns=$1 path=$2 value=$3
  if [ -n "$ns" ]; then
    ip netns exec "$ns" sh -c "[ -w '/proc/sys/$path' ] && echo '$value' > '/proc/sys/$path'" 2>/dev/null || true
  else
    [ -w "/proc/sys/$path" ] && echo "$value" >"/proc/sys/$path" 2>/dev/null || true
  fi
}

down() {
  local role ifname peer
  for role in "${roles[@]}"; do
    ifname="$tag-$role"
    if ip link show dev "$ifname" >/dev/null 2>&1; then
      # The namespace at the far end of this tag's interface is a leftover of some run, perhaps
      # with another prefix; remove it when its name says it is one of ours.
      peer=$(ip -o link show dev "$ifname" 2>/dev/null | sed -n 's/.* link-netns \([^ ]*\).*/\1/p')
      case $peer in
        *-"$role") ip netns delete "$peer" 2>/dev/null || true ;;
      esac
      ip link delete dev "$ifname" 2>/dev/null || true
    fi
  done
  for role in "${roles[@]}"; do
    ns_exists "$prefix-$role" && { ip netns delete "$prefix-$role" 2>/dev/null || true; }
  done
  return 0
}

up() {
  local line role ifname addrs gw ns a
  down
  for line in "${topology[@]}"; do
    read -r role ifname addrs gw <<<"$line"
    ns="$prefix-$role"
    ip netns add "$ns" || return 1
    if [ "$ipv6" = 1 ]; then
      # IPv6 inside, without what would only be noise or delay: no router solicitations, no
      # duplicate address detection (addresses are usable at once), no autoconfiguration from
      # advertisements, and the kernel's own ICMPv6 errors not rate-limited (tests count them).
      for k in default all; do
        set_sysctl "$ns" "net/ipv6/conf/$k/disable_ipv6" 0
        set_sysctl "$ns" "net/ipv6/conf/$k/accept_dad" 0
        set_sysctl "$ns" "net/ipv6/conf/$k/router_solicitations" 0
        set_sysctl "$ns" "net/ipv6/conf/$k/accept_ra" 0
      done
      set_sysctl "$ns" net/ipv6/icmp/ratelimit 0
    else
      # No IPv6 inside: router solicitations and DAD would only be noise on egwd's ports.
      set_sysctl "$ns" net/ipv6/conf/default/disable_ipv6 1
      set_sysctl "$ns" net/ipv6/conf/all/disable_ipv6 1
    fi
    ip -n "$ns" link set dev lo up || return 1
    add_veth "$ifname" "$ns" || return 1

    # Root side: a bare wire for net_af_packet. No IPv6, no ARP answers from the root kernel,
    # and no GRO/TSO/GSO so that egwd sees every frame as it was on the wire.
    set_sysctl "" "net/ipv6/conf/$ifname/disable_ipv6" 1
    set_sysctl "" "net/ipv4/conf/$ifname/arp_ignore" 8
    ethtool -K "$ifname" gro off tso off gso off >/dev/null 2>&1 ||
      echo "netns.sh: warning: could not turn off GRO/TSO on $ifname" >&2
    ip link set dev "$ifname" up || return 1

    # Namespace side: complete checksums in every frame (af_packet does not fill them in) and
    # no segmentation offload, so that every frame fits the MTU.
    ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off >/dev/null 2>&1 ||
      echo "netns.sh: warning: could not turn off TX checksum offload in $ns" >&2
    for a in ${addrs//,/ }; do
      ip -n "$ns" addr add "$a" dev eth0 || return 1
    done
    ip -n "$ns" link set dev eth0 up || return 1
    if [ "$gw" != "-" ]; then
      ip -n "$ns" route add default via "$gw" dev eth0 || return 1
    fi
  done
  if [ "$ipv6" = 1 ]; then
    for line in "${topology6[@]}"; do
      read -r role addrs gw <<<"$line"
      ns="$prefix-$role"
      for a in ${addrs//,/ }; do
        ip -n "$ns" addr add "$a" dev eth0 nodad || return 1
      done
      if [ "$gw" != "-" ]; then
        ip -n "$ns" -6 route add default via "$gw" dev eth0 || return 1
      fi
    done
  fi
  return 0
}

show() {
  local role
  for role in "${roles[@]}"; do
    if ns_exists "$prefix-$role"; then
      echo "== $prefix-$role"
      ip -n "$prefix-$role" -br addr show dev eth0 2>/dev/null
      ip -n "$prefix-$role" route show 2>/dev/null | sed 's/^/   /'
      ip -n "$prefix-$role" -6 route show 2>/dev/null | grep -v '^fe80' | sed 's/^/   /'
    else
      echo "== $prefix-$role (absent)"
    fi
  done
  ip -br link show 2>/dev/null | grep -E "^$tag-(pods|pods2|ext1|ext2)[@ ]" || true
}

if [ "$(id -u)" -ne 0 ]; then
  echo "netns.sh: must run as root (network namespaces and veth pairs)" >&2
  exit 1
fi

case ${1:-} in
  up)
    if ! up; then
      echo "netns.sh: building the topology failed; removing what was built" >&2
      down
      exit 1
    fi
    ;;
  down) down ;;
  show) show ;;
  *) echo "usage: $0 up|down|show   (EGW_NETNS_PREFIX=${prefix} EGW_NETNS_TAG=${tag} EGW_NETNS_IPV6=${ipv6})" >&2; exit 2 ;;
esac
