#!/bin/sh
# follow.sh LOOM POOL LIBLOOM TP_DIR - `loom record` follows every process.
# Per-process traces (-o DIR/) are counted in Perfetto's trace_processor.
# -o FILE gives one merged trace of every process.
set -u
LOOM=$1 POOL=$2 LIBLOOM=$3 TP_DIR=$4
HERE=$(cd "$(dirname "$0")" && pwd)
TP="$HERE/../tp/tp.mjs"
PY=$(python3 -c 'import sys; print(sys.executable)') # not a pyenv shell shim
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-follow-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
fails=0
if ! command -v node >/dev/null || [ ! -f "$TP_DIR/trace_processor.wasm" ]; then
  echo "SKIP: trace_processor is not set up in '$TP_DIR' (tests/tp/setup.sh)"
  [ -n "${LOOM_TP_REQUIRED:-}" ] && exit 1
  exit 77
fi
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# count TRACE NAME: slices (instants included) named NAME, by trace_processor
# (one run per trace, all names at once, kept next to the trace)
count() {
  [ -f "$1.tp" ] || node "$TP" --tp-dir "$TP_DIR" "$1" \
    "select name, count(*) as n from slice group by name" >"$1.tp"
  n=$(sed 's/},{/}\n{/g' "$1.tp" | sed -n "s/.*\"name\":\"$2\",\"n\":\([0-9]*\).*/\1/p")
  echo "${n:-0}"
}
# counts DIR NAME: the per-trace counts of NAME in DIR's traces, sorted, space-separated
counts() {
  for f in "$1"/*.json; do count "$f" "$2"; done | sort -n | tr '\n' ' ' | sed 's/ $//'
}
ntraces() { ls "$1" 2>/dev/null | grep -c '\.json$'; }

# 1. worker pool forked without exec: each worker's exact count in its own trace
"$LOOM" record -o "$W/pool/" -- "$POOL" fork 3 2>"$W/pool.err"
[ $? -eq 0 ] || fail "pool: exit status"
[ "$(ntraces "$W/pool")" -eq 4 ] || fail "pool: $(ntraces "$W/pool") traces, want 4"
c=$(counts "$W/pool" work); [ "$c" = "0 10 20 30" ] || fail "pool: work counts '$c'"
c=$(counts "$W/pool" parent); [ "$c" = "0 0 0 5" ] || fail "pool: parent counts '$c'"
for f in "$W"/pool/*.json; do # each trace labelled with its own pid
  pid=$(basename "$f" .json | sed 's/.*-//')
  grep -q "\"pid\": *\"$pid\"" "$f" || fail "pool: $f lacks metadata pid $pid"
  grep -q "\"command_line\": *\"$POOL fork 3\"" "$f" || fail "pool: $f lacks command_line"
done
[ "$(grep -c ': [0-9]* events, ' "$W/pool.err")" -eq 4 ] || fail "pool: summary: $(cat "$W/pool.err")"
ok pool

# 2. a worker killed by SIGKILL (its parent reaps it): named in the summary;
# its records rebuilt from shared memory (tests/survive), the others' kept
"$LOOM" record -o "$W/kill/" -- "$POOL" kill 2>"$W/kill.err"
[ $? -eq 0 ] || fail "kill: exit status"
[ "$(ntraces "$W/kill")" -eq 4 ] || fail "kill: $(ntraces "$W/kill") traces, want 4"
c=$(counts "$W/kill" work); [ "$c" = "0 10 20 30" ] || fail "kill: work counts '$c'"
grep -q "pid [0-9]* ($POOL kill) ended without writing a trace; loom rebuilt its trace from shared memory: 1 range and 0 ops kept" "$W/kill.err" ||
  fail "kill: summary does not name the killed worker: $(cat "$W/kill.err")"
ok kill

# 3. a shell-script wrapper, and posix_spawn under it
printf '#!/bin/sh\n"%s" leaf 7\n"%s" spawn "%s" leaf 3\nexit 0\n' "$POOL" "$POOL" "$POOL" >"$W/wrap.sh"
chmod +x "$W/wrap.sh"
"$LOOM" record -o "$W/sh/" -- "$W/wrap.sh" 2>"$W/sh.err"
[ $? -eq 0 ] || fail "sh: exit status"
c=$(counts "$W/sh" leaf); case "$c" in *" 3 7") ;; *) fail "sh: leaf counts '$c'" ;; esac
c=$(counts "$W/sh" spawner); case "$c" in *" 0 4") ;; *) fail "sh: spawner counts '$c'" ;; esac
ok "shell wrapper + posix_spawn"

# 4. --follow none: only the first process; --follow exec: not forks without exec
"$LOOM" record --follow none -o "$W/none/" -- "$W/wrap.sh" 2>/dev/null
[ "$(ntraces "$W/none")" -eq 1 ] || fail "follow none: $(ntraces "$W/none") traces, want 1"
"$LOOM" record --follow exec -o "$W/exec/" -- "$POOL" fork 3 2>/dev/null
[ "$(ntraces "$W/exec")" -eq 1 ] || fail "follow exec: $(ntraces "$W/exec") traces, want 1"
"$LOOM" record --follow exec -o "$W/exec2/" -- "$POOL" spawn "$POOL" leaf 3 2>/dev/null
c=$(counts "$W/exec2" leaf); [ "$c" = "0 3" ] || fail "follow exec: spawned leaf counts '$c'"
"$LOOM" record --follow bogus -o "$W/x/" -- "$POOL" leaf 1 2>"$W/bogus.err"
[ $? -eq 2 ] && grep -q "not 'bogus'" "$W/bogus.err" || fail "follow bogus accepted"
ok "follow none/exec"

# 5. exit status passthrough
"$LOOM" record -o "$W/e.json" -- "$POOL" exit 3 2>/dev/null
[ $? -eq 3 ] || fail "exit 3 not passed through"
[ "$(count "$W/e.json" exit)" = 1 ] || fail "single process -o FILE: no trace"
(trap - EXIT; "$LOOM" record -o "$W/s.json" -- "$POOL" signal 2>"$W/sig.err")
[ $? -eq 137 ] || fail "SIGKILL: status not 137"
grep -q "was killed by SIGKILL" "$W/sig.err" || fail "SIGKILL not named: $(cat "$W/sig.err")"
ok "exit status"

# 6. Python multiprocessing, each start method: each child's records
for m in spawn forkserver fork; do
  "$LOOM" record -o "$W/py-$m/" -- "$PY" "$HERE/mp.py" $m "$LIBLOOM" 2>"$W/py-$m.err"
  [ $? -eq 0 ] || fail "python $m: exit status: $(cat "$W/py-$m.err")"
  c=$(counts "$W/py-$m" child); case "$c" in *" 3 6") ;; *) fail "python $m: child counts '$c'" ;; esac
  c=$(counts "$W/py-$m" parent); case "$c" in *" 0 2") ;; *) fail "python $m: parent counts '$c'" ;; esac
done
ok "python multiprocessing"

# 7. the rank from the launcher's environment: in the file name and the labels
RANK=1 WORLD_SIZE=2 "$LOOM" record -o "$W/rank/" -- "$POOL" leaf 2 2>/dev/null
f=$(ls "$W"/rank/*-rank1.json 2>/dev/null)
if [ -z "$f" ]; then fail "rank: no *-rank1.json in $(ls "$W/rank")"; else
  grep -q '"rank": *"1"' "$f" && grep -q '"world_size": *"2"' "$f" || fail "rank: metadata"
  grep -q "\"name\": *\"rank 1: $POOL leaf 2\"" "$f" || fail "rank: process name"
  [ "$(count "$f" leaf)" = 2 ] || fail "rank: leaf count"
fi
ok rank

# 8. -o FILE with several processes: one merged trace, the session folder removed
TMPDIR="$W" "$LOOM" record -o "$W/m.json" -- "$POOL" fork 3 2>"$W/m.err"
[ $? -eq 0 ] || fail "merge: exit status"
[ "$(count "$W/m.json" work)" = 60 ] || fail "merge: work count in merged trace: $(cat "$W/m.err")"
[ "$(count "$W/m.json" parent)" = 5 ] || fail "merge: parent count in merged trace"
[ "$(grep -o '"process_name"' "$W/m.json" | wc -l)" -ge 4 ] || fail "merge: 4 processes"
ls -d "$W"/loom-record-* >/dev/null 2>&1 && fail "merge: session folder left behind"
ok merge

# 9. helper processes that recorded nothing (a runtime's compiler, a shell's
# commands) are one summary line by program name, the program's own trace
# its own line, and the merge counts every process's trace
"$LOOM" record -o "$W/q.json" -- sh -c "/bin/true; /bin/true; /bin/ls / >/dev/null; $POOL fork 1" 2>"$W/q.err"
[ $? -eq 0 ] || fail "quiet: exit status"
grep -q "^loom:   3 other processes recorded nothing: true x2, ls x1$" "$W/q.err" || fail "quiet: $(cat "$W/q.err")"
grep -q "^loom:   pid [0-9]* ($POOL fork 1): [1-9][0-9]* events" "$W/q.err" || fail "quiet: pool line: $(cat "$W/q.err")"
grep -q "(/bin/true): 0 events" "$W/q.err" && fail "quiet: a line of its own for true: $(cat "$W/q.err")"
grep -q "traces of 6 processes merged" "$W/q.err" || fail "quiet: merged: $(cat "$W/q.err")"
ok quiet

[ $fails -eq 0 ] && echo "all follow tests passed"
exit $((fails > 0))
