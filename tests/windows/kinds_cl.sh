#!/bin/sh
# kinds_cl.sh LOOM STEPAPP DIR: runs STEPAPP (OpenCL, one upload and one
# kernel per step) under `loom record --on-demand --devices cpu,opencl` and
# asks it for three 3-step windows: ACTIVITY_TYPES=kernel into DIR/k.json,
# ACTIVITY_TYPES=cpu_op into DIR/c.json, every kind into DIR/a.json; exit
# status 0 when the triggers and the recording succeeded.
loom=$1 app=$2 dir=$3
"$loom" record --on-demand --devices cpu,opencl -o "$dir/run.json" -- "$app" 100000 5 \
  >"$dir/record.log" 2>&1 &
rec=$!
pid=
for i in $(seq 300); do # the program is loom record's child once it runs
  pid=$(pgrep -P "$rec" -x stepapp)
  [ -n "$pid" ] && "$loom" trigger --list | grep -q "^$pid " && break
  pid=
  sleep 0.1
done
[ -n "$pid" ] || { echo "stepapp did not start under loom record"; kill "$rec"; exit 1; }
rc=0
"$loom" trigger "$pid" --steps 3 --config ACTIVITY_TYPES=kernel -o "$dir/k.json" || rc=1
"$loom" trigger "$pid" --steps 3 --config ACTIVITY_TYPES=cpu_op -o "$dir/c.json" || rc=1
"$loom" trigger "$pid" --steps 3 -o "$dir/a.json" || rc=1
kill -TERM "$pid"
wait "$rec"
exit $rc
