#!/bin/sh
# survive.sh LOOM DIE LIB TP_DIR SIM BK - a process killed while `loom record`
# records it still leaves its trace, rebuilt from its shared-memory arena:
# SIGKILL, an out-of-memory death, a followed child killed by SIGKILL, a
# thread that had exited; the records backends had handed to loom, with
# their devices, clocks and flows, the thread names and metadata it gave.
# Traces are counted in Perfetto's trace_processor.
set -u
LOOM=$1 DIE=$2 LIB=$3 TP_DIR=$4 SIM=$5 BK=$6
HERE=$(cd "$(dirname "$0")" && pwd)
TP="$HERE/../tp/tp.mjs"
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-survive-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
fails=0
if ! command -v node >/dev/null || [ ! -f "$TP_DIR/trace_processor.wasm" ]; then
  echo "SKIP: trace_processor is not set up in '$TP_DIR' (tests/tp/setup.sh)"
  [ -n "${LOOM_TP_REQUIRED:-}" ] && exit 1
  exit 77
fi
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# q TRACE: "name=count ..." of every slice name, then "errors=N" (trace
# processor's error and data-loss stats), in one run
q() {
  node "$TP" --tp-dir "$TP_DIR" "$1" \
    "select name, count(*) as n from slice where name != 'Record Window End' group by name order by name" \
    "select count(*) as e from stats where severity in ('error', 'data_loss') and value > 0" \
    "select count(*) as u from slice join args using (arg_set_id) where args.key = 'args.unclosed'" \
    >"$1.tp" || { echo "trace_processor failed"; return; }
  sed 's/},{/}\n{/g' "$1.tp" | sed -n 's/.*"name":"\([^"]*\)","n":\([0-9]*\).*/\1=\2/p' | tr '\n' ' '
  sed -n 's/.*"e":\([0-9]*\).*/errors=\1/p' "$1.tp" | tr '\n' ' '
  sed -n 's/.*"u":\([0-9]*\).*/unclosed=\1/p' "$1.tp"
}
WANT="interned=1000 open=1 step=1000 errors=0 unclosed=1"

# 1. SIGKILL after 2000 ranges (literal and interned names) and one left open
(trap - EXIT; "$LOOM" record -o "$W/kill.json" -- "$DIE" kill 1000 2>"$W/kill.err")
[ $? -eq 137 ] || fail "kill: status not 137 (SIGKILL passed through)"
got=$(q "$W/kill.json"); case "$got" in *"$WANT") ;; *) fail "kill: trace '$got', want '... $WANT'" ;; esac
grep -q "was killed by SIGKILL.*; loom rebuilt its trace from shared memory: 2001 ranges and 0 ops kept, 1 open at death" "$W/kill.err" ||
  fail "kill: summary: $(cat "$W/kill.err")"
grep -q "the process was killed by SIGKILL.* before it could write its trace" "$W/kill.json" ||
  fail "kill: the trace does not say how the process died"
ok "SIGKILL: all 2001 ranges kept"

# 1b. the same in chunks of 32 records: the single-threaded program writes
# staged (hostrec.c: its full tail copied by the kernel into a fresh chunk,
# ~125 times here); nothing lost or doubled across the copies
(trap - EXIT; "$LOOM" record --option buffer_size=1k -o "$W/kill1k.json" -- "$DIE" kill 1000 2>"$W/kill1k.err")
[ $? -eq 137 ] || fail "kill, 1 KiB chunks: status not 137"
got=$(q "$W/kill1k.json"); case "$got" in *"$WANT") ;; *) fail "kill, 1 KiB chunks: trace '$got', want '... $WANT'" ;; esac
grep -q "loom rebuilt its trace from shared memory: 2001 ranges and 0 ops kept" "$W/kill1k.err" ||
  fail "kill, 1 KiB chunks: summary: $(cat "$W/kill1k.err")"
ok "SIGKILL in 1 KiB chunks (staged): all 2001 ranges kept"

# 2. out of memory (RLIMIT_AS): the program aborts when malloc fails, and
# loom's own save in it fails too; the trace is rebuilt
(trap - EXIT; "$LOOM" record -o "$W/oom.json" -- "$DIE" oom 1000 2>"$W/oom.err")
[ $? -eq 134 ] || fail "oom: status not 134 (SIGABRT passed through): $(cat "$W/oom.err")"
got=$(q "$W/oom.json"); case "$got" in *"$WANT") ;; *) fail "oom: trace '$got', want '... $WANT'" ;; esac
grep -q "was killed by SIGABRT; loom rebuilt its trace from shared memory: 2001 ranges" "$W/oom.err" ||
  fail "oom: summary: $(cat "$W/oom.err")"
ok "out of memory: all 2001 ranges kept"

# 3. following processes: a child killed by SIGKILL by its parent, reaped by
# loom record; per-process traces in -o DIR/ and one merged -o FILE
"$LOOM" record -o "$W/child/" -- "$DIE" child 1000 2>"$W/child.err"
[ $? -eq 0 ] || fail "child: exit status: $(cat "$W/child.err")"
n=$(ls "$W/child" | grep -c '\.json$'); [ "$n" -eq 2 ] || fail "child: $n traces, want 2"
found=0
for f in "$W"/child/*.json; do
  got=$(q "$f")
  case "$got" in *"$WANT") found=$((found + 1)) ;; esac
done
[ $found -eq 1 ] || fail "child: $found traces hold the child's records"
grep -q "pid [0-9]* ($DIE child 1000) was killed by SIGKILL.*; loom rebuilt its trace from shared memory: 2001 ranges" "$W/child.err" ||
  fail "child: summary: $(cat "$W/child.err")"
"$LOOM" record -o "$W/child.json" -- "$DIE" child 1000 2>"$W/childm.err"
got=$(q "$W/child.json"); case "$got" in *"$WANT") ;; *) fail "child merged: '$got'" ;; esac
grep -q "traces of 2 processes merged" "$W/childm.err" || fail "child merged: $(cat "$W/childm.err")"
ok "child killed by SIGKILL: its records kept"

# 4. a thread that exited before the kill keeps its records too
(trap - EXIT; "$LOOM" record -o "$W/thread.json" -- "$DIE" thread 1000 2>"$W/thread.err")
got=$(q "$W/thread.json")
case "$got" in *"step=1000 worker=1000 errors=0 unclosed=0") ;; *) fail "thread: '$got'" ;; esac
ok "exited thread's records kept"

# 5. names: literals of a library loaded while recording are read from its
# file; a name in the dead process's heap is a placeholder, counted
(trap - EXIT; "$LOOM" record -o "$W/dl.json" -- "$DIE" dlopen 500 "$LIB" 2>"$W/dl.err")
got=$(q "$W/dl.json")
case "$got" in *"from a library=500 errors=0 unclosed=0") ;; *) fail "dlopen: '$got': $(cat "$W/dl.err")" ;; esac
(trap - EXIT; "$LOOM" record -o "$W/heap.json" -- "$DIE" heap 1000 2>"$W/heap.err")
got=$(q "$W/heap.json")
case "$got" in "<name at 0x"*": not readable after the process died>=1 step=1000 errors=0 unclosed=0") ;;
  *) fail "heap: '$got'" ;; esac
grep -q "1 names unreadable" "$W/heap.err" || fail "heap: summary: $(cat "$W/heap.err")"
grep -q "after the process died: 1 record names could not be read" "$W/heap.json" ||
  fail "heap: no warning in the trace"
ok "names: a library's literals read, a heap name counted"

# 6. killed while 4 threads write as fast as they can: no record half-read
# (each thread's ranges up to its last published record; at most one open)
(trap - EXIT; "$LOOM" record -o "$W/race.json" -- "$DIE" race 300 2>"$W/race.err")
got=$(q "$W/race.json")
case "$got" in "busy="[0-9]*" errors=0 unclosed="[0-4]) ;; *) fail "race: '$got'" ;; esac
ok "killed mid-write: '$got'"

# 7. the records a backend had handed to loom are in shared memory too: the
# runtime calls of libloom-sim are kept; its device work, still in the
# runtime's buffers, is not known to loom (its device is)
(trap - EXIT; "$LOOM" record --devices cpu,sim -o "$W/sim.json" -- "$SIM" 100 2>"$W/sim.err")
got=$(q "$W/sim.json")
case "$got" in "simLaunchKernel=100 step=100 errors=0 unclosed=0") ;; *) fail "sim: '$got'" ;; esac
grep -q "100 ranges and 0 ops kept, backend 'sim' 100 records kept and 0 lost" "$W/sim.err" &&
  grep -q "sim.json: 200 events, 0 flows, 1 device, 0 dropped" "$W/sim.err" ||
  fail "sim: summary: $(cat "$W/sim.err")"
grep -q "backend 'sim': 100 records it had handed to loom were rebuilt from shared memory (0 of device work), 0 lost; device work still in the runtime's buffers" "$W/sim.json" ||
  fail "sim: no warning in the trace"
ok "a backend's runtime calls kept"

# 9. a backend of the program's own (survive_bk): N calls and their device
# work handed to loom, then SIGKILL: all of it, linked by flows, with the
# device clock's sync point (each kernel 2 us after its call, to 0.1 us: the
# clocks' conversion drifts by parts per million), its arguments,
# the device and its queue, the thread's given name and the metadata
qbk() {
  node "$TP" --tp-dir "$TP_DIR" "$1" \
    "select count(*) as f from flow f join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id where a.name = 'survLaunch' and b.ts - a.ts between 1900 and 2100" \
    "select count(distinct int_value) as s from slice join args using (arg_set_id) where slice.name = 'survKernel' and args.key = 'args.seq'" \
    "select count(*) as k from slice join args using (arg_set_id) where slice.name = 'survKernel' and args.key = 'args.note' and string_value = 'k'" \
    "select count(*) as q from slice join thread_track on slice.track_id = thread_track.id join thread using (utid) where slice.name = 'survKernel' and thread.name = 'survq'" \
    "select count(*) as t from thread where name like 'thread % (survivor main)'" \
    >"$1.tpb" || { echo "trace_processor failed"; return; }
  for k in f s k q t; do sed -n "s/.*\"$k\":\([0-9]*\).*/$k=\1/p" "$1.tpb" | tr '\n' ' '; done
  echo
}
meta_ok() { # the program's metadata as it last set it
  grep -q '"survive_key":"kept"' "$1" && grep -q '"survive_over":"new"' "$1" &&
    ! grep -q survive_gone "$1"
}
(trap - EXIT; "$LOOM" record --devices cpu,survbk -o "$W/bk.json" -- "$BK" kill 100 5 2>"$W/bk.err")
[ $? -eq 137 ] || fail "bk: status not 137: $(cat "$W/bk.err")"
got=$(q "$W/bk.json")
# steps: 100 on the thread, 100 as the device's view of them (gpu_user_annotation)
case "$got" in "step=200 survKernel=100 survLaunch=100 errors=0 unclosed=0") ;; *) fail "bk: '$got'" ;; esac
got=$(qbk "$W/bk.json")
[ "$got" = "f=100 s=100 k=100 q=100 t=1 " ] || fail "bk: flows, arguments, queue, thread: '$got'"
grep -q "200 ranges and 0 ops kept, backend 'survbk' 200 records kept and 0 lost" "$W/bk.err" &&
  grep -q "bk.json: 400 events, 100 flows, 1 device, 0 dropped" "$W/bk.err" ||
  fail "bk: summary: $(cat "$W/bk.err")"
grep -q "backend 'survbk': 200 records it had handed to loom were rebuilt from shared memory (100 of device work), 0 lost" "$W/bk.json" ||
  fail "bk: no warning in the trace"
grep -q '"name":"Survivor Device"' "$W/bk.json" && grep -q '"queues":1' "$W/bk.json" ||
  fail "bk: the device and its properties are not in the trace"
meta_ok "$W/bk.json" || fail "bk: metadata not as the program set it"
# the same without a host record of its own: every record the backend's (the
# rebuilt trace ends at its last one, not at the process's last host record)
(trap - EXIT; "$LOOM" record --devices cpu,survbk -o "$W/bkbare.json" -- "$BK" bare 100 5 2>"$W/bkbare.err")
got=$(q "$W/bkbare.json")
case "$got" in "survKernel=100 survLaunch=100 errors=0 unclosed=0") ;; *) fail "bk bare: '$got'" ;; esac
grep -q "bkbare.json: 200 events, 100 flows, 1 device, 0 dropped" "$W/bkbare.err" ||
  fail "bk bare: summary: $(cat "$W/bkbare.err")"
# the same program ending normally: the same, and the 5 kernels its runtime still held
"$LOOM" record --devices cpu,survbk -o "$W/bklive.json" -- "$BK" exit 100 5 2>"$W/bklive.err"
got=$(q "$W/bklive.json")
case "$got" in "step=200 survKernel=100 survLaunch=100 survPending=5 errors=0 unclosed=0") ;;
  *) fail "bk live: '$got'" ;; esac
got=$(qbk "$W/bklive.json")
[ "$got" = "f=100 s=100 k=100 q=100 t=1 " ] || fail "bk live: '$got'"
meta_ok "$W/bklive.json" || fail "bk live: metadata"
# SIGTERM while the program holds its runtime's lock, which the backend's
# flush takes: the stop the signal starts cannot end, so the handler stops
# waiting after LOOM_RECORD_STOP_WAIT; the program ends by the signal and its
# trace is rebuilt from shared memory (it used to hang for ever)
(trap - EXIT; LOOM_RECORD_STOP_WAIT=1 timeout 120 "$LOOM" record --devices cpu,survbk -o "$W/bklock.json" \
  -- "$BK" locked 100 5 2>"$W/bklock.err")
rc=$?
[ $rc -eq 143 ] || fail "bk locked: status $rc, not 143 (SIGTERM): $(cat "$W/bklock.err")"
grep -q "did not stop within LOOM_RECORD_STOP_WAIT" "$W/bklock.err" || fail "bk locked: no message: $(cat "$W/bklock.err")"
got=$(q "$W/bklock.json")
case "$got" in "step=200 survKernel=100 survLaunch=100 errors=0 unclosed=0") ;; *) fail "bk locked: '$got'" ;; esac
ok "a backend's records, devices, flows, thread name and metadata kept"

# 10. the backend cap: records past it are lost while recording, and said so
(trap - EXIT; "$LOOM" record --devices cpu,survbk --option backend_memory_cap=8000 \
  -o "$W/bkcap.json" -- "$BK" kill 100 0 2>"$W/bkcap.err")
got=$(q "$W/bkcap.json")
# a call is 64 bytes, a kernel 96 (64 and two arguments): 50 pairs fit in 8000
case "$got" in "step=150 survKernel=50 survLaunch=50 errors=0 unclosed=0") ;; *) fail "bkcap: '$got'" ;; esac
grep -q "backend 'survbk' 100 records kept and 100 lost" "$W/bkcap.err" ||
  fail "bkcap: summary: $(cat "$W/bkcap.err")"
grep -q "backend 'survbk' lost 100 records (100: backend memory cap (backend_memory_cap) reached)" "$W/bkcap.json" ||
  fail "bkcap: no loss warning in the trace"
ok "backend cap: 100 kept, 100 lost, said so"

# 11. ring mode: the backend's ring is compacted many times before the kill;
# what it held then is rebuilt: kept + overwritten = all, calls with their kernels
(trap - EXIT; "$LOOM" record --devices cpu,survbk --ring 1m --option backend_memory_cap=8000 \
  -o "$W/bkring.json" -- "$BK" kill 1000 0 2>"$W/bkring.err")
kept=$(sed -n "s/.*backend 'survbk' \([0-9]*\) records kept and 0 lost.*/\1/p" "$W/bkring.err")
over=$(sed -n 's/.*"ring_overwritten_records":"\([0-9]*\)".*/\1/p' "$W/bkring.json")
[ -n "$kept" ] && [ -n "$over" ] && [ $((kept + over)) -eq 2000 ] && [ "$kept" -gt 0 ] ||
  fail "bkring: kept '$kept' + overwritten '$over' is not 2000: $(cat "$W/bkring.err")"
half=$((${kept:-0} / 2))
got=$(q "$W/bkring.json")
case "$got" in "step=$((1000 + half)) survKernel=$half survLaunch=$half errors=0 unclosed=0") ;;
  *) fail "bkring: '$got' (kept $kept)" ;; esac
ok "ring mode: the last $kept backend records kept, $over overwritten"

# 12. a child forked without exec records with the parent's backend and is
# killed: its trace is rebuilt with its backend records
"$LOOM" record --devices cpu,survbk -o "$W/bkchild/" -- "$BK" child 100 0 2>"$W/bkchild.err"
[ $? -eq 0 ] || fail "bk child: exit status: $(cat "$W/bkchild.err")"
found=0
for f in "$W"/bkchild/*.json; do
  case "$(q "$f")" in "step=200 survKernel=100 survLaunch=100 errors=0 unclosed=0") found=$((found + 1)) ;; esac
done
[ $found -eq 1 ] || fail "bk child: $found traces hold the child's records: $(cat "$W/bkchild.err")"
grep -q "backend 'survbk' 200 records kept and 0 lost" "$W/bkchild.err" || fail "bk child: summary"
ok "forked child: its backend records kept"

# 13. a device backend that had handed loom nothing when the process was
# killed (CPU sampling emits only at the end) is named, not left out silently
(trap - EXIT; "$LOOM" record --devices cpu,survbk -o "$W/bknone.json" -- "$BK" kill 0 0 2>"$W/bknone.err")
grep -q "was killed by SIGKILL.*, backend 'survbk' nothing kept" "$W/bknone.err" ||
  fail "bk none: summary: $(cat "$W/bknone.err")"
grep -q "backend 'survbk' (device type [a-z]*) had handed no records to loom when the process died" "$W/bknone.json" ||
  fail "bk none: no warning in the trace"
ok "a backend that had handed nothing: said so"

# 8. a process that writes its trace leaves no arena behind, and is not rebuilt
# (the folders are named by the recorded process itself, from its environment)
"$LOOM" record -o "$W/ok/" -- sh -c 'echo "$LOOM_RECORD_DIR"; echo "$LOOM_RECORD_ARENAS"' \
  >"$W/ok.out" 2>"$W/ok.err"
grep -q "rebuilt" "$W/ok.err" && fail "ok: a trace that was written was rebuilt"
sdir=$(sed -n 1p "$W/ok.out"); adir=$(sed -n 2p "$W/ok.out")
[ -n "$sdir" ] && [ -n "$adir" ] || fail "ok: the folders were not named: $(cat "$W/ok.out")"
[ -e "$sdir" ] && fail "ok: session folder $sdir left"
[ -e "$adir" ] && fail "ok: arenas folder $adir left"
ok "normal exit: nothing rebuilt"

# 9. the arenas live in tmpfs (LOOM_SHM_DIR, default /dev/shm), one folder
# per loom record, removed at the end
mkdir "$W/shm"
LOOM_SHM_DIR="$W/shm" "$LOOM" record -o "$W/shm.json" -- \
  sh -c 'echo "$LOOM_RECORD_ARENAS"; ls "$LOOM_RECORD_ARENAS"; echo "pid $$"' >"$W/shm.out" 2>"$W/shm.err"
adir=$(head -n 1 "$W/shm.out")
pid=$(sed -n 's/^pid //p' "$W/shm.out")
case "$adir" in "$W/shm/loom-arenas-"*) ;; *) fail "shm: arenas in '$adir', not in $W/shm" ;; esac
grep -qx "$pid.arena" "$W/shm.out" || fail "shm: no $pid.arena in $adir: $(cat "$W/shm.out")"
[ -e "$adir" ] && fail "shm: $adir left behind"
grep -q "shared-memory buffers go to" "$W/shm.err" && fail "shm: fallback: $(cat "$W/shm.err")"
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  "$LOOM" record -o "$W/dflt.json" -- sh -c 'echo "$LOOM_RECORD_ARENAS"' >"$W/dflt.out" 2>&1
  case "$(head -n 1 "$W/dflt.out")" in /dev/shm/loom-arenas-*) ;; *) fail "shm: default: $(cat "$W/dflt.out")" ;; esac
fi
ok "arenas in tmpfs, removed at the end"

# 10. no usable tmpfs folder: said once, the arenas go to the session folder,
# and a killed program's trace is still rebuilt from there
(trap - EXIT; LOOM_SHM_DIR="$W/none" "$LOOM" record -o "$W/nosh.json" -- "$DIE" kill 1000 2>"$W/nosh.err")
[ $? -eq 137 ] || fail "no shm: status not 137: $(cat "$W/nosh.err")"
grep -q "^loom record: LOOM_SHM_DIR=$W/none: No such file or directory; the shared-memory buffers go to .*/loom-record-.* instead" "$W/nosh.err" ||
  fail "no shm: message: $(cat "$W/nosh.err")"
got=$(q "$W/nosh.json"); case "$got" in *"$WANT") ;; *) fail "no shm: trace '$got', want '... $WANT'" ;; esac
ok "no tmpfs folder: arenas in the session folder, SIGKILL still rebuilt"

[ $fails -eq 0 ] && echo "all survive tests passed"
exit $((fails > 0))
