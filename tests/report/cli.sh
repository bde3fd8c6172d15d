#!/bin/sh
# `loom report` from the command line: what it prints, where it writes, and
# how it fails.   cli.sh LOOM_BIN TESTS_DIR
set -u
loom=$1; data=$2/data/report
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$loom" report "$data/synthetic.json" --top 2 >"$tmp/out" 2>"$tmp/err" || fail "text report exited $?"
grep -q "Kernels (4 names; top 2 by total time" "$tmp/out" || fail "no kernel table with --top 2"
grep -q "^  gemm " "$tmp/out" || fail "gemm missing from the text report"
grep -A2 "^Not understood: categories" "$tmp/out" | grep -Eq "^  mystery +1$" || fail "unknown category not listed"

"$loom" report "$data/synthetic.json" --json -o "$tmp/r.json" --html "$tmp/r.html" >"$tmp/out" 2>"$tmp/err" \
  || fail "json + html exited $?"
[ ! -s "$tmp/out" ] || fail "-o still printed to stdout"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema"]=="loom-report/2"' \
  "$tmp/r.json" || fail "-o did not write the JSON report"
grep -q "<svg" "$tmp/r.html" || fail "--html did not write the page"

"$loom" report "$tmp/missing.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "missing trace: exit $rc, wanted 1"
grep -q "cannot open $tmp/missing.json" "$tmp/err" || fail "missing trace: $(cat "$tmp/err")"

"$loom" report >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "usage: loom report" "$tmp/err" || fail "no trace: exit $rc"

"$loom" report "$data/synthetic.json" --html /nonexistent/dir/r.html >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "/nonexistent/dir" "$tmp/err" || fail "unwritable --html: exit $rc: $(cat "$tmp/err")"
# 12000 records overflow a 1 MiB sort budget (two buffers of 10922): the
# sort spills to $TMPDIR, and an unusable TMPDIR is a clear error
awk 'BEGIN { print "{\"traceEvents\":["; for (i = 0; i < 12000; i++)
  printf "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":1,\"ts\":%d,\"dur\":5}%s\n", i * 10, i < 11999 ? "," : "";
  print "]}" }' >"$tmp/big.json"
"$loom" report "$tmp/big.json" --sort-memory 1 >"$tmp/out" 2>"$tmp/err" || fail "spilled sort: $(cat "$tmp/err")"
grep -q "^  k  *12000 " "$tmp/out" || fail "spilled sort lost kernels: $(grep '^  k ' "$tmp/out")"
TMPDIR=/nonexistent/dir "$loom" report "$tmp/big.json" --sort-memory 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "temporary file to sort the trace in /nonexistent/dir" "$tmp/err" \
  || fail "unusable TMPDIR: exit $rc: $(cat "$tmp/err")"
TMPDIR=/nonexistent/dir "$loom" report "$data/synthetic.json" >/dev/null 2>"$tmp/err" \
  || fail "a trace that fits the budget needs no temporary file: $(cat "$tmp/err")"
# several traces: one rank each, compared across ranks
r=$data/ranks
"$loom" report "$r/rank0.json" "$r/rank1.json" "$r/rank2.json" "$r/rank3.json" >"$tmp/out" 2>"$tmp/err" \
  || fail "report of 4 rank traces exited $?: $(cat "$tmp/err")"
grep -q "rank that set the pace (root cause of the most waiting): 2" "$tmp/out" || fail "no pace rank in the text"
grep -q "^Waiting per wait state and call" "$tmp/out" || fail "no call-site table in the text"
# the noise threshold: 45 ms leaves only rank 3's Late Sender (49.98 ms) a wait state
"$loom" report "$r/chain.json" --wait-threshold 45000 >"$tmp/out" 2>"$tmp/err" \
  || fail "--wait-threshold exited $?: $(cat "$tmp/err")"
grep -q "waits under 45.000 ms are noise" "$tmp/out" || fail "--wait-threshold 45000 not applied"
grep -q "^  late_sender MPI_Waitall  *1  *49.980" "$tmp/out" || fail "--wait-threshold: $(grep -A3 '^Waiting' "$tmp/out")"
! grep -q "^  wait_nxn " "$tmp/out" || fail "--wait-threshold: N x N waits under 45 ms still wait states"
"$loom" report "$r/chain.json" --wait-threshold 1ms >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "wait-threshold wants microseconds (a number >= 0), not '1ms'" "$tmp/err" \
  || fail "bad --wait-threshold: exit $rc: $(cat "$tmp/err")"
"$loom" report "$r/rank0.json" "$r/nonexistent.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent.json" "$tmp/err" || fail "a missing rank trace: exit $rc: $(cat "$tmp/err")"
echo "ok"
