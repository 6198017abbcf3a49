#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, -fsanitize=fuzzer,address,undefined)
# into their own build directory and runs each for a number of executions or
# seconds, one after the other on one core (nice 19), keeping a corpus per
# target so that runs add up. Prints, per target: executions, executions per
# second, edge coverage (libFuzzer's "cov"), features ("ft"), corpus size and
# crashes (reproducers are left in BUILD/artifacts/TARGET/). docs/fuzzing.md
# has the results of the long runs.
#
# Usage: scripts/fuzz.sh [--runs N | --seconds T] [--build DIR] [--corpus DIR]
#                        [--no-build] [TARGET...]
# TARGET: parse, engine, ctrl (default: all three). Exit status 1 if any crashed.
# The parser's first seeds include the captures in ISOROCE_CAPTURES_DIR
# (default ../shared/testdata/roce-captures beside the repository).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-fuzz
corpus=
runs= seconds=60 do_build=1
targets=()
while (($#)); do
  case $1 in
    --runs) runs=$2; seconds=; shift 2 ;;
    --seconds) seconds=$2; runs=; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    parse|engine|ctrl) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
((${#targets[@]})) || targets=(parse engine ctrl)
corpus=${corpus:-$build/corpus}

if ((do_build)); then
  command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 is needed (scripts/install-deps.sh)" >&2; exit 2; }
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DISOROCE_BUILD_FUZZ=ON >/dev/null
  ninja -C "$build" -j2 "${targets[@]/#/isoroce-fuzz-}" isoroce-pcap >/dev/null
fi

seed() {  # seed TARGET DIR: first seeds of an empty corpus
  local t=$1 dir=$2
  [ -n "$(ls -A "$dir" 2>/dev/null)" ] && return 0
  case $t in
    parse)
      "$build/bin/isoroce-pcap" gen --seed 1 --out "$dir/.gen4.pcap" 2>/dev/null
      "$build/bin/isoroce-pcap" gen --seed 2 --ipv6 --out "$dir/.gen6.pcap" 2>/dev/null
      local caps=${ISOROCE_CAPTURES_DIR:-$here/../shared/testdata/roce-captures}
      local pcaps=("$dir"/.gen*.pcap)
      compgen -G "$caps/*.pcap" >/dev/null && pcaps+=("$caps"/*.pcap)
      python3 "$here/tests/fuzz/split_pcap.py" "$dir" "${pcaps[@]}" >/dev/null
      rm -f "$dir"/.gen*.pcap ;;
    ctrl) cp "$here"/tests/fuzz/corpus/ctrl/* "$dir"/ ;;
    engine) ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  bin=$build/bin/isoroce-fuzz-$t
  mkdir -p "$corpus/$t" "$build/artifacts/$t"
  seed "$t" "$corpus/$t"
  case $t in parse) max_len=9100 ;; engine) max_len=4096 ;; ctrl) max_len=65536 ;; esac
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  log=$build/fuzz-$t.log
  start=$(date +%s)
  set +e
  nice -n 19 "$bin" "${limit[@]}" -max_len=$max_len -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" "$corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9a-zA-Z]*' | tail -1)
  crashes=$(ls "$build/artifacts/$t" | grep -c -E '^(crash|leak|timeout|oom)-' || true)
  echo "$t: ${execs:-0} executions in ${secs}s ($(( ${execs:-0} / (secs > 0 ? secs : 1) ))/s), ${last:-no coverage line}, crashes: $crashes (exit $rc; log $log)"
  if ((rc != 0)); then status=1; grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5; fi
done
exit $status
