# Sourced by bench/veth/run.sh and tune.sh: the build's binaries, the tools
# and the checks both need before they touch the machine.
#   veth_prelude BUILD_DIR DEFAULT_NAME
# sets root, bin, preload and name (NAME, or DEFAULT_NAME), or exits 2 saying
# what is missing.
veth_prelude() {
  local build=$1 f t
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  bin="$root/$build/bin"
  preload="$root/$build/lib/libisoroce-verbs.so"
  for f in "$bin/isoroced" "$bin/isoroce-ctl" "$preload"; do
    [[ -e $f ]] || { echo "missing $f: ninja -C $build isoroced isoroce-ctl isoroce-verbs" >&2; exit 2; }
  done
  for t in ib_write_lat ib_write_bw qperf; do
    command -v $t >/dev/null || { echo "missing $t: scripts/install-deps.sh installs perftest and qperf" >&2; exit 2; }
  done
  [[ $(id -u) == 0 ]] || { echo "needs root (namespaces, veth, AF_XDP)" >&2; exit 2; }
  name=${NAME:-$2}
  [[ $name =~ ^[a-z0-9]{1,8}$ ]] || { echo "NAME must be 1-8 lowercase letters or digits" >&2; exit 2; }
}
