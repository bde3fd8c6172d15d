#!/bin/sh
# selftest.sh LOOM - tests tests/gpu/check.py without a GPU: on a hand-made
# trace shaped like loom's CUPTI output for app.cu (make_trace.py), as JSON
# and converted by loom to .pftrace, every check passes; each fault the
# trace can be given makes check.py fail.  77: trace_processor missing.
set -u
loom=$1
here=$(cd "$(dirname "$0")" && pwd)
tp_dir=${LOOM_TP_DIR:-$HOME/.cache/loom-tp}
if [ ! -f "$tp_dir/trace_processor.wasm" ]; then
  echo "selftest: trace_processor not found in $tp_dir"
  [ -n "${LOOM_TP_REQUIRED:-}" ] && exit 1
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
fail=0
$py "$here/make_trace.py" "$tmp/good.json" || exit 1
"$loom" convert "$tmp/good.json" "$tmp/good.pftrace" || exit 1
for t in "$tmp/good.json" "$tmp/good.pftrace"; do
  if ! $py "$here/check.py" "$t"; then
    echo "selftest: FAIL: check.py rejects the good trace $t"
    fail=1
  fi
done
for fault in lost-kernel lost-flow wrong-external no-graph-id lost-sync one-stream memory; do
  $py "$here/make_trace.py" "$tmp/$fault.json" "$fault" || exit 1
  $py "$here/check.py" "$tmp/$fault.json" > "$tmp/$fault.out"
  rc=$?
  if [ $rc -ne 1 ]; then
    echo "selftest: FAIL: check.py gives $rc (not 1) on the trace with fault $fault"
    cat "$tmp/$fault.out"
    fail=1
  else
    echo "selftest: fault $fault caught: $(grep -c FAIL "$tmp/$fault.out") check(s) fail"
  fi
done
exit $fail
