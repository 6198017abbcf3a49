#!/usr/bin/env bash
# The Ethernet segment the rxe guest shares with isoroced: a tap device in a
# private network namespace, with an address for the namespace's kernel (the
# programs' out-of-band TCP to and from the guest goes through it).
#
#   net.sh up NS TAP [KERNEL_ADDR/N] [MTU]   create NS (if missing) and TAP in it
#   net.sh down NS                           delete NS (and the tap with it)
#
# Defaults: 10.14.0.1/24, MTU 1500. isoroced takes another address on the same
# tap (net_af_packet), the guest a third (boot.sh --ip). Idempotent. Root only.
set -euo pipefail
cmd=${1:-}; ns=${2:-}
[ -n "$cmd" ] && [ -n "$ns" ] || { echo "usage: $0 up NS TAP [ADDR/N] [MTU] | down NS" >&2; exit 2; }
case "$cmd" in
  up)
    tap=${3:?usage: $0 up NS TAP [ADDR/N] [MTU]}
    addr=${4:-10.14.0.1/24}
    mtu=${5:-1500}
    ip netns list | grep -qw "^$ns" || ip netns add "$ns"
    ip -n "$ns" link set lo up
    if ! ip -n "$ns" link show "$tap" >/dev/null 2>&1; then
      ip -n "$ns" tuntap add dev "$tap" mode tap
    fi
    # No IPv6 chatter (router solicitations, MLD) on the segment.
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$tap.disable_ipv6=1"
    ip -n "$ns" link set "$tap" mtu "$mtu"
    ip -n "$ns" addr replace "$addr" dev "$tap"
    ip -n "$ns" link set "$tap" up
    ;;
  down)
    ip netns del "$ns" 2>/dev/null || true
    ;;
  *) echo "usage: $0 up NS TAP [ADDR/N] [MTU] | down NS" >&2; exit 2 ;;
esac
