#!/bin/sh
# Runs every libFuzzer program of a build (tests/fuzz, LOOM_FUZZ) for a
# bounded time, JOBS at a time, and prints each target's executions, rate
# and coverage.  Usage: scripts/fuzz.sh BUILD_DIR [SECONDS [JOBS [TARGET...]]]
# Each target's corpus grows in BUILD_DIR/fuzz-work/<target>/ (seeds are
# read, not written); a failing input is left as BUILD_DIR/fuzz-work/
# <target>-crash-* (minimise it with -minimize_crash=1, then keep it in
# tests/data/fuzz/<target>/).  Fails when a target fails.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd); secs=${2:-60}; jobs=${3:-2}
shift; [ $# -gt 0 ] && shift; [ $# -gt 0 ] && shift
list="$build/tests/fuzz/targets.txt"
[ -f "$list" ] || { echo "fuzz.sh: $list missing: configure with clang and LOOM_FUZZ" >&2; exit 2; }
work="$build/fuzz-work"; mkdir -p "$work"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
one() { # target seeds...
  t=$1; shift
  mkdir -p "$work/$t"
  # -timeout: one input taking 10 s is a finding (loom stays near-linear)
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -dict="$here/tests/fuzz/loom.dict" -print_final_stats=1 \
    -artifact_prefix="$work/$t-" "$work/$t" "$@" >"$work/$t.log" 2>&1
}
pids=""; failed=0; names=""
grep -v '^#' "$list" | while read -r t seeds; do
  if [ $# -gt 0 ]; then case " $* " in *" $t "*) ;; *) continue ;; esac; fi
  echo "$t $seeds"
done >"$work/run.txt"
n=0
while read -r t seeds; do
  ( rc=0; one "$t" $seeds || rc=$?; echo $rc >"$work/$t.rc" ) &
  n=$((n + 1))
  if [ "$n" -ge "$jobs" ]; then wait; n=0; fi
done <"$work/run.txt"
wait
printf '%-12s %10s %8s %7s %7s %s\n' target execs exec/s cov ft result
while read -r t seeds; do
  rc=$(cat "$work/$t.rc" 2>/dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$work/$t.log" | tail -1)
  cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  res=ok; [ "$rc" = 0 ] || { res="FAILED (log: $work/$t.log)"; failed=1; }
  printf '%-12s %10s %8s %7s %7s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$res"
  [ "$rc" = 0 ] || grep -E 'ERROR|runtime error|fuzz check failed|SUMMARY' "$work/$t.log" | head -5
done <"$work/run.txt"
exit $failed
