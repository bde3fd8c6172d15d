#!/bin/sh
# trigger.sh LOOM STEPAPP TRACE DUMP: runs STEPAPP under `loom record --ring`,
# asks it for a window with `loom trigger PID` (a ring-mode process answers
# with a dump of its ring), waits for the program; exit status: 0 when both
# the trigger and the recording succeeded.
loom=$1 app=$2 trace=$3 dump=$4
"$loom" record --ring 64k --devices cpu -o "$trace" -- "$app" 6000 5 >/dev/null 2>&1 &
rec=$!
pid=
for i in $(seq 200); do # the program is loom record's child once it runs
  pid=$(pgrep -P "$rec" -x stepapp)
  [ -n "$pid" ] && "$loom" trigger --list | grep -q "^$pid " && break
  pid=
  sleep 0.1
done
[ -n "$pid" ] || { echo "stepapp did not start under loom record"; kill "$rec"; exit 1; }
sleep 2 # some steps first
"$loom" trigger "$pid" -o "$dump" || { kill "$rec"; wait "$rec"; exit 1; }
wait "$rec"
