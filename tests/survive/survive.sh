#!/bin/sh
# survive.sh LOOM DIE LIB TP_DIR SIM - a process killed while `loom record` records
# it still leaves its trace, rebuilt from its shared-memory arena: SIGKILL,
# an out-of-memory death, a followed child killed by SIGKILL, a thread that
# had exited.  Traces are counted in Perfetto's trace_processor.
set -u
LOOM=$1 DIE=$2 LIB=$3 TP_DIR=$4 SIM=$5
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
grep -q "2 processes merged" "$W/childm.err" || fail "child merged: $(cat "$W/childm.err")"
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

# 7. a backend's records are in the process's memory: counted lost, with why
(trap - EXIT; "$LOOM" record --devices cpu,sim -o "$W/sim.json" -- "$SIM" 100 2>"$W/sim.err")
got=$(q "$W/sim.json")
case "$got" in "step=100 errors=0 unclosed=0") ;; *) fail "sim: '$got'" ;; esac
grep -q "100 ranges and 0 ops kept, 100 backend records lost with its memory" "$W/sim.err" &&
  grep -q "sim.json: 100 events, 0 flows, 0 devices, 100 dropped" "$W/sim.err" ||
  fail "sim: summary: $(cat "$W/sim.err")"
grep -q "backend 'sim' lost 100 records (100: they were in the process's memory when it died" "$W/sim.json" ||
  fail "sim: no warning in the trace"
ok "backend records counted lost"

# 8. a process that writes its trace leaves no arena behind, and is not rebuilt
"$LOOM" record -o "$W/ok/" -- sh -c 'true' 2>"$W/ok.err"
grep -q "rebuilt" "$W/ok.err" && fail "ok: a trace that was written was rebuilt"
ls "${TMPDIR:-/tmp}"/loom-record-$$-* >/dev/null 2>&1 && fail "ok: session folder left"
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
