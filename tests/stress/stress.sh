#!/bin/sh
# stress.sh LOOM STORM TP_DIR - loom record stays exact and leaves nothing
# behind under many processes: a storm of 500 forked children (some exec,
# some are killed, some fork again), 32 children recording at once, 50
# on-demand triggers in a row, and ring mode killed at random points.  The
# shared memory, session and runtime folders are private to the test, and
# must be empty after each run; the storm's own descriptors and resident
# memory must not grow.  Counts are exact, by trace_processor.
set -u
LOOM=$1 STORM=$2 TP_DIR=$3
HERE=$(cd "$(dirname "$0")" && pwd)
TP="$HERE/../tp/tp.mjs"
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-stress.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir "$W/shm" "$W/tmp" "$W/run" "$W/out"
chmod 700 "$W/run"
export LOOM_SHM_DIR="$W/shm" TMPDIR="$W/tmp" XDG_RUNTIME_DIR="$W/run"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
clean() { # the runtime folder $W/run/loom stays, without sockets
  left=$(ls -A "$W/shm" "$W/tmp" "$W/run/loom" 2>/dev/null | grep -v ':$' | grep -v '^$')
  [ -z "$left" ] || fail "$1: left behind: $left"
}
if ! command -v node >/dev/null || [ ! -f "$TP_DIR/trace_processor.wasm" ]; then
  echo "SKIP: trace_processor is not set up in '$TP_DIR' (tests/tp/setup.sh)"
  [ -n "${LOOM_TP_REQUIRED:-}" ] && exit 1
  exit 77
fi
# count TRACE: "name=n ..." for every slice name, then "errors=N"
count() {
  node "$TP" --tp-dir "$TP_DIR" "$1" \
    "select name, count(*) as n from slice where name != 'Record Window End' group by name order by name" \
    "select count(*) as e from stats where severity in ('error', 'data_loss') and value > 0" \
    >"$1.tp" || { echo "trace_processor failed"; return; }
  sed 's/},{/}\n{/g' "$1.tp" | sed -n 's/.*"name":"\([^"]*\)","n":\([0-9]*\).*/\1=\2/p' | tr '\n' ' '
  sed -n 's/.*"e":\([0-9]*\).*/errors=\1/p' "$1.tp"
}

# 1. 500 children, 16 at a time: i%4 0 _exit, 1 SIGKILL, 2 exec, 3 a grandchild
N=500
# (.pftrace: trace_processor's JavaScript wrapper overflows its stack on the
# metadata of 751 merged JSON traces)
"$LOOM" record -o "$W/out/storm.pftrace" -- "$STORM" fork $N "$STORM" >"$W/storm.out" 2>"$W/storm.err"
[ $? -eq 0 ] || fail "storm: loom record failed: $(tail -5 "$W/storm.err")"
child=0 i=0
while [ $i -lt $N ]; do child=$((child + i % 7 + 1)); i=$((i + 1)); done
want="child=$child grandchild=$((N / 4 * 2)) leaf=$((N / 4 * 3)) errors=0"
got=$(count "$W/out/storm.pftrace")
[ "$got" = "$want" ] && ok "storm: $got" || fail "storm: trace '$got', want '$want'"
# the records a child made before it exec'd are merged with its new program's
procs=$((1 + N + N / 4))
grep -q "traces of $procs processes (and $((N / 4)) of images before an exec) merged, $((child + N / 4 * 5)) events" "$W/storm.err" ||
  fail "storm: the summary does not say $procs processes merged: $(tail -1 "$W/storm.err")"
n=$(grep -c "before it exec'd $STORM leaf: [0-9]* events, 0 dropped, 0 warnings" "$W/storm.err")
[ "$n" -eq $((N / 4)) ] || fail "storm: $n images before an exec named, want $((N / 4))"
# the killed children were reaped by their parent, not loom record: "ended
# without writing a trace", rebuilt, each with its instants
dead="ended without writing a trace; loom rebuilt its trace from shared memory"
killed=$(grep -c "$dead" "$W/storm.err")
[ "$killed" -eq $((N / 4)) ] || fail "storm: $killed processes named as rebuilt, want $((N / 4))"
other=$(grep -v "$dead\|processes:\|merged, [0-9]* events\|: [0-9]* events, [0-9]* dropped" "$W/storm.err")
[ -z "$other" ] || fail "storm: unexpected lines: $(echo "$other" | head -3)"
set -- $(sed -n 's/^before fds=\([0-9]*\) rss=\([0-9]*\)/\1 \2/p' "$W/storm.out") \
       $(sed -n 's/^after fds=\([0-9]*\) rss=\([0-9]*\)/\1 \2/p' "$W/storm.out")
[ $# -eq 4 ] && [ "$1" -eq "$3" ] && [ $(($4 - $2)) -lt 2048 ] &&
  ok "storm: descriptors $1 -> $3, resident $2 -> $4 KiB" ||
  fail "storm: descriptors or memory grew: $(cat "$W/storm.out")"
clean storm

# an exec that fails: recording goes on in the same process
"$LOOM" record -o "$W/out/ef.json" -- "$STORM" execfail 2>"$W/ef.err" || fail "execfail: $(cat "$W/ef.err")"
got=$(count "$W/out/ef.json")
[ "$got" = "post=3 pre=2 errors=0" ] && ok "execfail: $got" || fail "execfail: '$got' $(cat "$W/ef.err")"
clean execfail

# 2. 32 children recording at once
"$LOOM" record -o "$W/out/conc.json" -- "$STORM" concurrent 32 2>"$W/conc.err" ||
  fail "concurrent: loom record failed: $(tail -3 "$W/conc.err")"
got=$(count "$W/out/conc.json")
[ "$got" = "busy=32000 errors=0" ] && ok "concurrent: $got" || fail "concurrent: '$got'"
grep -q "traces of 33 processes merged" "$W/conc.err" || fail "concurrent: $(tail -2 "$W/conc.err")"
clean concurrent

# 3. 50 on-demand triggers in a row, one step each
"$LOOM" record --on-demand -o "$W/out/od-{seq}.json" -- "$STORM" steps 2>"$W/od.err" &
rec=$!
pid=""
for k in $(seq 100); do
  pid=$(pgrep -P $rec -f "$STORM steps" | head -1)
  [ -n "$pid" ] && [ -S "$W/run/loom/$pid.sock" ] && break
  sleep 0.1
done
t=0
for k in $(seq 50); do
  "$LOOM" trigger "$pid" --steps 1 >>"$W/trig.out" 2>&1 && t=$((t + 1))
done
kill -TERM "$pid" 2>/dev/null
wait $rec
[ $t -eq 50 ] || fail "triggers: $t of 50 answered with a file: $(tail -3 "$W/trig.out")"
files=$(ls "$W/out" | grep -c '^od-.*\.json$')
[ "$files" -eq 50 ] || fail "triggers: $files window files, want 50"
bad=0
for f in "$W"/out/od-*.json; do
  n=$(grep -o '"name": *"work"' "$f" | wc -l)
  [ "$n" -eq 1 ] || bad=$((bad + 1))
done
[ $bad -eq 0 ] && [ $files -eq 50 ] && ok "triggers: 50 windows of one step each" ||
  fail "triggers: $bad windows without exactly one step's range"
clean triggers

# 4. ring mode killed at random points: each trace rebuilt, no error
for k in 1 2 3 4 5; do
  "$LOOM" record --ring 1m -o "$W/out/ring$k.json" -- "$STORM" steps 2>"$W/ring$k.err" &
  rec=$!
  sleep "0.$(od -An -N1 -tu1 /dev/urandom | tr -d ' ' | cut -c1)"
  pid=""
  while [ -z "$pid" ]; do pid=$(pgrep -P $rec -f "$STORM steps" | head -1); sleep 0.05; done
  kill -KILL "$pid"
  wait $rec
  got=$(count "$W/out/ring$k.json")
  case "$got" in
  *"errors=0") grep -q "was killed by SIGKILL; loom rebuilt its trace" "$W/ring$k.err" ||
                 fail "ring $k: $(cat "$W/ring$k.err")" ;;
  *) fail "ring $k: '$got' $(tail -2 "$W/ring$k.err")" ;;
  esac
  clean "ring $k"
done
ok "ring: 5 kills at random points, each trace rebuilt without error"
[ "$fails" -eq 0 ] && echo "stress: all passed"
exit "$fails"
