#!/bin/sh
# A vendor's own plug-in gets everything a built-in backend gets.
#
# Installs loom into a scratch prefix, builds examples/fakert (a fake
# runtime, its loom plug-in, a program) against it with pkg-config only,
# installs the plug-in into `pkg-config --variable=plugindir loom`, records
# the program with the installed `loom record` and checks the traces with
# Perfetto's trace_processor and `loom report --json`:
#   base  LOOM_PLUGINS + --devices cpu,fakert: exact counts, flows, and
#         (iii)-(v) below on that trace too
#   (i)   found in the plug-in folder, no LOOM_PLUGINS, no --devices
#   (ii)  the runtime (which loads the plug-in) dlopen()ed 200 ms late:
#         its device joins the running session, and the trace says so
#   (iii) loom report: copies by direction, launches
#   (iv)  the runtime's counter: one series, exact values
#   (v)   its us device clock converted within 1 us of the runtime's truth
#   (vi)  `loom check-backend` passes on it
# Every check runs and prints ok/FAIL; the exit status is 1 if any failed.
# Without trace_processor (tests/tp/setup.sh) it exits 77 (a skip ctest
# shows), or fails when LOOM_TP_REQUIRED is set.
# usage: fakert.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tpdir=${LOOM_TP_DIR:-$HOME/.cache/loom-tp}
if [ ! -f "$tpdir/trace_processor.wasm" ]; then
  echo "fakert.sh: trace_processor not found in $tpdir (run tests/tp/setup.sh)" >&2
  [ -n "${LOOM_TP_REQUIRED:-}" ] && exit 1
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LOOM_PLUGINS LOOM_PLUGIN_PATH FRT_TOOLS FRT_TRUTH LOOM_LIBEXEC
steps=3
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
expect() { # NAME WANT GOT
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: expected $2, got $3"; fi
}

# ---- install loom, build the example the way a vendor does ----------------
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
plugindir=$(pkg-config --variable=plugindir loom)
cmake -S "$src/examples/fakert" -B "$work/build" -DCMAKE_INSTALL_PREFIX="$work/fakert" >/dev/null
cmake --build "$work/build" >/dev/null
cmake --install "$work/build" >/dev/null
plugin="$plugindir/libloom-fakert.so"
app="$work/fakert/bin/fakert-app"
test -f "$plugin"
needed=$(readelf -d "$plugin" | grep NEEDED || true)
case "$needed" in
*libloom* | *libfakert*) bad "plug-in links neither libloom nor its runtime: $needed" ;;
*) ok "plug-in built with pkg-config only, links neither libloom nor its runtime" ;;
esac
loom="$work/prefix/bin/loom"
if "$loom" version >/dev/null 2>&1; then ok "installed loom runs without LD_LIBRARY_PATH"
else bad "installed loom runs without LD_LIBRARY_PATH (no RUNPATH)"; fi
# The rest finds libloom either way, so that each check fails for its own reason.
export LD_LIBRARY_PATH="$work/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- helpers ---------------------------------------------------------------
# tp TRACE SQL...: one line per SQL, the first column of its first row.
tp() {
  trace=$1
  shift
  node "$src/tests/tp/tp.mjs" --tp-dir "$tpdir" "$trace" "$@" |
    python3 -c 'import json,sys
for rows in json.load(sys.stdin)["results"]:
    print(next(iter(rows[0].values())) if rows else "")'
}
# Slices of the fakert device process (named "fakert <index>").
DEV="from slice s join thread_track tt on s.track_id = tt.id join thread using(utid)
     join process p using(upid) where p.name like 'fakert %'"
corr="(select int_value from args a where a.arg_set_id = s.arg_set_id and a.key = 'args.correlation')"
dir="(select string_value from args a where a.arg_set_id = s.arg_set_id and a.key = 'args.direction')"
# The counter tracks of the device process (process-scoped in Chrome JSON).
ctr="from process_counter_track t join process p using(upid) where p.name like 'fakert %'"

# counts TAG TRACE N: the exact counts a run of N steps gives.
counts() {
  tag=$1 trace=$2 n=$3
  set -- $(tp "$trace" \
    "select count(*) $DEV and s.category = 'kernel' and thread.name = 'compute'" \
    "select count(*) $DEV and s.category = 'gpu_memcpy' and thread.name = 'copy'" \
    "select count(*) $DEV" \
    "select count(*) from slice s where s.name = 'frtEnqueueKernel'" \
    "select count(*) from slice s where s.name = 'frtEnqueueCopy'" \
    "select count(*) from slice s where s.name = 'frtFinish'" \
    "select count(*) from slice s where s.category = 'fakert_runtime'" \
    "select count(*) from flow f join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id
       where a.name = 'frtEnqueueKernel' and b.category = 'kernel'" \
    "select count(*) from flow f join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id
       where a.name = 'frtEnqueueCopy' and b.category = 'gpu_memcpy'" \
    "select count(*) from flow" \
    "select count(*) from stats where value > 0 and severity in ('error', 'data_loss')")
  expect "$tag: kernels on the fakert 'compute' queue" $((3 * n)) "$1"
  expect "$tag: copies on the fakert 'copy' queue" $((3 * n)) "$2"
  expect "$tag: slices on the fakert device" $((6 * n)) "$3"
  expect "$tag: frtEnqueueKernel calls" $((3 * n)) "$4"
  expect "$tag: frtEnqueueCopy calls" $((3 * n)) "$5"
  expect "$tag: frtFinish calls" $((3 * n)) "$6"
  expect "$tag: fakert runtime calls (init, 2 queues, 9 a step)" $((3 + 9 * n)) "$7"
  expect "$tag: flows launch call -> kernel" $((3 * n)) "$8"
  expect "$tag: flows copy call -> copy" $((3 * n)) "$9"
  shift 9
  expect "$tag: flows in all" $((6 * n)) "$1"
  expect "$tag: trace_processor error stats" 0 "$2"
}

# record TAG OUT ARGS...: the installed loom record; keeps its summary line.
record() {
  tag=$1 out=$2
  shift 2
  if "$loom" record -o "$out" "$@" >"$out.stdout" 2>"$out.stderr" && [ -s "$out" ]; then
    ok "$tag: recorded"
  else
    bad "$tag: loom record $*: $(cat "$out.stderr")"
    return 1
  fi
  if grep -q ', 0 dropped' "$out.stderr"; then ok "$tag: nothing dropped"
  else bad "$tag: dropped records: $(grep 'loom:' "$out.stderr")"; fi
}

# ---- base: loaded through LOOM_PLUGINS, device type named ------------------
if LOOM_PLUGINS="$plugin" FRT_TRUTH="$work/base-truth.txt" record base "$work/base.json" --devices cpu,fakert -- "$app" $steps; then
  counts base "$work/base.json" $steps
fi

# ---- (i) found in the plug-in folder by the installed loom record ----------
if FRT_TRUTH="$work/truth.txt" record "(i)" "$work/rec.json" -- "$app" $steps; then
  counts "(i)" "$work/rec.json" $steps
fi

# ---- (ii) the runtime and its plug-in loaded late --------------------------
if record "(ii)" "$work/late.json" -- "$app" --late 2; then
  counts "(ii)" "$work/late.json" 2
  loaded=$(sed -n 's/^fakert-app: runtime loaded at \([0-9]*\)$/\1/p' "$work/late.json.stdout")
  base_ns=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["baseTimeNanoseconds"])' "$work/late.json")
  # All device work ran after the load.
  expect "(ii): device work after the load" 12 \
    "$(tp "$work/late.json" "select count(*) $DEV and s.ts + $base_ns >= $loaded")"
  if grep -Eiq '"[^"]*(fakert[^"]*join|join[^"]*fakert)[^"]*"' "$work/late.json"; then
    ok "(ii): the trace notes that backend fakert joined"
  else bad "(ii): no note in the trace that backend fakert joined the session"; fi
fi

# ---- (iii) loom report: copies by direction, launches ----------------------
report_checks() { # TAG TRACE
  if "$loom" report --json "$2" >"$2.report"; then
    set -- "$1" $(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
t = {x["direction"]: "%d/%d" % (x["count"], x["bytes"]) for x in r["transfers"]}
print(" ".join("%s=%s" % (d, t.get(d, "none")) for d in ("HtoD", "DtoH", "DtoD")),
      r["hta"]["launch_stats"]["launches"],
      sum(d["launch_latency"]["count"] for d in r["devices"]))' "$2.report")
    expect "$1 (iii): report transfers by direction (count/bytes)" \
      "HtoD=$steps/$((steps << 20)) DtoH=$steps/$((steps * 65536)) DtoD=$steps/$((steps * 262144))" \
      "$2 $3 $4"
    expect "$1 (iii): report launch statistics (kernel and copy launches)" $((6 * steps)) "$5"
    expect "$1 (iii): report launch latency samples" $((6 * steps)) "$6"
  else
    bad "$1 (iii): loom report --json $2"
  fi
}

# ---- (iv) the counter ------------------------------------------------------
counter_checks() { # TAG TRACE
  one="1,0,1,2,3,2,1,0,1,2,1,0" want=""
  for i in $(seq $steps); do want="$want${want:+,}$one"; done
  tag=$1
  set -- $(tp "$2" "select count(*) $ctr" \
    "select count(*) $ctr and t.name like 'queue depth%'" \
    "select count(*) $ctr and (t.name like '%device%' or t.name like '%stream%')" \
    "select group_concat(v, ',') from (select cast(c.value as int) v from counter c
       join process_counter_track t on c.track_id = t.id join process p using(upid)
       where p.name like 'fakert %' order by c.ts, c.id)")
  expect "$tag (iv): counter series of the fakert device" 1 "$1"
  expect "$tag (iv): series named like the counter ('queue depth')" 1 "$2"
  expect "$tag (iv): 'device'/'stream' series" 0 "$3"
  expect "$tag (iv): queue depth values" "$want" "$4"
}

# ---- (v) the device clock against the runtime's truth ----------------------
clock_checks() { # TAG TRACE TRUTH
  if [ ! -s "$3" ]; then
    bad "$1 (v): the runtime wrote no truth ($3)"
    return
  fi
  node "$src/tests/tp/tp.mjs" --tp-dir "$tpdir" "$2" "select s.ts, $corr as c $DEV" >"$2.ts"
  tag=$1
  set -- $(python3 -c 'import json,sys
base = json.load(open(sys.argv[1]))["baseTimeNanoseconds"]
rows = json.load(open(sys.argv[2]))["results"][0]
truth = {int(l.split()[0]): int(l.split()[2]) for l in open(sys.argv[3])}
err = [abs(base + r["ts"] - truth[r["c"]]) for r in rows if r["c"] in truth]
print(len(err), max(err) if err else -1)' "$2" "$2.ts" "$3")
  expect "$tag (v): device slices with a truth" $((6 * steps)) "$1"
  if [ "$2" -ge 0 ] && [ "$2" -le 1000 ]; then ok "$tag (v): clock converted within 1 us (max error $2 ns)"
  else bad "$tag (v): clock converted within 1 us: max error $2 ns"; fi
}

# Both ways of loading the plug-in give the same report, counter and times.
for run in base "(i)"; do
  trace=$work/rec.json truth=$work/truth.txt
  [ "$run" = base ] && trace=$work/base.json truth=$work/base-truth.txt
  if [ -s "$trace" ]; then
    report_checks "$run" "$trace"
    counter_checks "$run" "$trace"
    clock_checks "$run" "$trace" "$truth"
  fi
done

# ---- (vi) loom check-backend -----------------------------------------------
if "$loom" check-backend "$plugin" >"$work/check.out" 2>&1; then ok "(vi): loom check-backend"
else bad "(vi): loom check-backend $plugin: $(tail -n 3 "$work/check.out")"; fi

if [ $fails -gt 0 ]; then
  echo "fakert: $fails checks failed"
  exit 1
fi
echo "fakert: all checks passed"
