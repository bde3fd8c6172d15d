#!/bin/sh
# kill.sh LOOM STEPAPP TRACE: runs STEPAPP under `loom record --ring 32k`
# and SIGKILLs it once its ring has wrapped (a dump through `loom trigger
# PID` reports overwritten records), not after a fixed time: however slow
# the machine (a sanitizer build, a loaded CI runner), the program is killed
# with a full ring, which loom record then rebuilds into TRACE.  Exit
# status: 0 when the program was killed so and loom record finished.
loom=$1 app=$2 trace=$3
dump=$trace.dump.json
"$loom" record --ring 32k --devices cpu -o "$trace" -- "$app" 100000000 >/dev/null 2>&1 &
rec=$!
pid=
for i in $(seq 300); do # the program is loom record's child once it runs
  pid=$(pgrep -P "$rec" -x stepapp)
  [ -n "$pid" ] && "$loom" trigger --list | grep -q "^$pid " && break
  pid=
  sleep 0.1
done
[ -n "$pid" ] || { echo "stepapp did not start under loom record"; kill "$rec"; exit 1; }
wrapped=
for i in $(seq 300); do
  rm -f "$dump"
  "$loom" trigger "$pid" -o "$dump" >/dev/null 2>&1 &&
    grep -q 'records overwritten (host ' "$dump" && { wrapped=1; break; }
  sleep 0.1
done
rm -f "$dump"
kill -KILL "$pid"
wait "$rec"
[ -n "$wrapped" ] || { echo "the ring of stepapp (pid $pid) never wrapped"; exit 1; }
exit 0
