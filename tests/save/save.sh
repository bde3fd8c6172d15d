#!/bin/sh
# save.sh LOOM BK TP_DIR - a trace that cannot be written loses nothing:
# `loom record` checks -o before the program runs; when the disk is full at
# exit (a small tmpfs) for JSON, .pftrace, -o DIR/, several processes and a
# full $TMPDIR, it exits 74, writes nothing partial at -o, keeps every
# record and prints the `loom salvage DIR -o OUT` command, which then
# writes the complete trace (the same counts as a run with room, in
# Perfetto's trace_processor) and removes what was kept.  Needs root (tmpfs
# mounts); skipped (77) otherwise.
set -u
LOOM=$1 BK=$2 TP_DIR=$3
HERE=$(cd "$(dirname "$0")" && pwd)
TP="$HERE/../tp/tp.mjs"
if ! command -v node >/dev/null || [ ! -f "$TP_DIR/trace_processor.wasm" ]; then
  echo "SKIP: trace_processor is not set up in '$TP_DIR' (tests/tp/setup.sh)"
  [ -n "${LOOM_TP_REQUIRED:-}" ] && exit 1
  exit 77
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-save-test.XXXXXX")
mkdir "$W/shm" "$W/full" "$W/tmp" "$W/run"
chmod 700 "$W/run"
cleanup() {
  umount "$W/full" 2>/dev/null
  umount "$W/shm" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
if ! mount -t tmpfs -o size=1g tmpfs "$W/shm" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs (needs root)"
  exit 77
fi
# a private shared-memory folder, session folder and runtime folder: what
# the test leaves (or not) is counted there
export LOOM_SHM_DIR="$W/shm" TMPDIR="$W/tmp" XDG_RUNTIME_DIR="$W/run"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
# full [SIZE]: an empty tmpfs of 64 KiB (or SIZE) at $W/full (a JSON trace
# of these programs is 70+ KB, a .pftrace 17 KB)
full() {
  umount "$W/full" 2>/dev/null
  mount -t tmpfs -o size=${1:-64k} tmpfs "$W/full"
}
# q TRACE: "name=count ..." of every slice but the steps, the steps on the
# programs' threads (their projections on the device queue, survq, follow
# from timing), then "flows=N"
q() {
  node "$TP" --tp-dir "$TP_DIR" "$1" \
    "select name, count(*) as n from slice where name not in ('Record Window End', 'step') group by name order by name" \
    "select count(*) as s from slice join thread_track on slice.track_id = thread_track.id join thread using (utid) where slice.name = 'step' and thread.name not like '%survq%'" \
    "select count(*) as f from flow" >"$1.tp" || { echo "trace_processor failed"; return; }
  sed -n 's/.*"s":\([0-9]*\).*/step=\1/p' "$1.tp" | tr '\n' ' '
  sed 's/},{/}\n{/g' "$1.tp" | sed -n 's/.*"name":"\([^"]*\)","n":\([0-9]*\).*/\1=\2/p' | tr '\n' ' '
  sed -n 's/.*"f":\([0-9]*\).*/flows=\1/p' "$1.tp"
}
# why: trace_processor's error and data-loss stats of TRACE and the step
# slices per thread (printed when a count differs, to tell a slice it left
# out from a record loom lost)
why() {
  node "$TP" --tp-dir "$TP_DIR" "$1" \
    "select name, idx, value from stats where value > 0 and severity in ('error', 'data_loss')" \
    "select thread.name as t, count(*) as n from slice join thread_track on slice.track_id = thread_track.id join thread using (utid) where slice.name = 'step' group by thread.name" 2>&1 | tr '\n' ' '
  grep -o '"name":"step"' "$1" 2>/dev/null | wc -l | sed 's/^/; step events in the file: /'
}
# the folder named in the printed command, and the command's -o
kept_dir() { sed -n 's/^loom: write them with: loom salvage \([^ ]*\) -o .*/\1/p' "$1"; }
empty() { [ -z "$(ls -A "$1")" ]; }
ONE="step=100 survKernel=100 survLaunch=100 survPending=5 flows=100"
TWO="step=150 survKernel=150 survLaunch=150 survPending=10 flows=150"
two() { sh -c "'$BK' exit 100 5; '$BK' exit 50 5"; }

# 1. -o checked before the program starts: nothing runs, nothing is left
chk() { # WHY -o... : status 2, the message, the program not run, no folder left
  why=$1
  shift
  "$LOOM" record "$@" -- sh -c "touch '$W/ran'" 2>"$W/chk.err"
  rc=$?
  [ $rc -eq 2 ] || fail "-o $why: status $rc, not 2"
  grep -q "^loom record: -o .*$why.*; nothing was run" "$W/chk.err" || fail "-o $why: $(cat "$W/chk.err")"
  [ -e "$W/ran" ] && fail "-o $why: the program ran"
  empty "$W/shm" && empty "$W/tmp" || fail "-o $why: left $(ls "$W/shm" "$W/tmp")"
  rm -f "$W/ran"
}
chk "unknown extension" -o "$W/t.xyz"
chk "folder $W/nope does not exist" -o "$W/nope/t.json"
long=$(printf '%05000d' 0)
chk "name is too long" -o "$W/$long.json"
mkdir "$W/ro" && mount -t tmpfs -o ro tmpfs "$W/ro"
chk "cannot create files in folder $W/ro: Read-only file system" -o "$W/ro/t.json"
chk "cannot create files in folder $W/ro/: Read-only file system" -o "$W/ro/"
umount "$W/ro"
# an option refused after the folders were made leaves none either
"$LOOM" record --option nosuch.key=1 -o "$W/t.json" -- true 2>/dev/null
empty "$W/shm" && empty "$W/tmp" || fail "refused option: left $(ls "$W/shm" "$W/tmp")"
ok "-o checked before the program runs; a refused run leaves nothing"

# 2-3. disk full at exit, one process, JSON and .pftrace
"$LOOM" record --devices cpu,survbk -o "$W/live.json" -- "$BK" exit 100 5 2>/dev/null
"$LOOM" record --devices cpu,survbk -o "$W/live.pftrace" -- "$BK" exit 100 5 2>/dev/null
[ "$(q "$W/live.json")" = "$ONE" ] && [ "$(q "$W/live.pftrace")" = "$ONE" ] ||
  fail "live: '$(q "$W/live.json")' '$(q "$W/live.pftrace")'"
for ext in json pftrace; do
  full 8k
  "$LOOM" record --devices cpu,survbk -o "$W/full/t.$ext" -- "$BK" exit 100 5 2>"$W/f1.err"
  rc=$?
  [ $rc -eq 74 ] || fail "$ext full: status $rc, not 74: $(cat "$W/f1.err")"
  empty "$W/full" || fail "$ext full: left in -o's folder: $(ls -la "$W/full")"
  grep -q "^loom: nothing recorded is lost: the records of 1 process are kept in $W/shm/loom-kept-" "$W/f1.err" &&
    grep -q "^loom: write them with: loom salvage $W/shm/loom-kept-[^ ]* -o $W/full/t.$ext " "$W/f1.err" ||
    fail "$ext full: messages: $(cat "$W/f1.err")"
  d=$(kept_dir "$W/f1.err")
  "$LOOM" salvage "$d" -o "$W/s1.$ext" 2>"$W/s1.err" || fail "$ext salvage: $(cat "$W/s1.err")"
  got=$(q "$W/s1.$ext")
  [ "$got" = "$ONE" ] || fail "$ext salvaged: '$got', want '$ONE': $(why "$W/s1.$ext")"
  grep -q "could not write its trace: cannot write $W/full/t.$ext: No space left on device" "$W/s1.$ext" ||
    [ $ext = pftrace ] || fail "$ext salvaged: the trace does not say why it was rebuilt"
  [ -e "$d" ] && fail "$ext salvage: $d left"
  empty "$W/shm" && empty "$W/tmp" || fail "$ext salvage: left $(ls "$W/shm" "$W/tmp")"
done
ok "disk full, JSON and .pftrace: exit 74, salvaged to the whole trace ($ONE)"

# 3b. no permission at exit: -o's folder was writable when the run began
# (checked) and is read-only when the trace is written
full
"$LOOM" record --devices cpu,survbk -o "$W/full/ro.json" -- \
  sh -c "mount -o remount,ro '$W/full' && exec '$BK' exit 100 5" 2>"$W/ro.err"
rc=$?
[ $rc -eq 74 ] || fail "read-only at exit: status $rc: $(cat "$W/ro.err")"
grep -q "Read-only file system" "$W/ro.err" || fail "read-only at exit: $(cat "$W/ro.err")"
d=$(kept_dir "$W/ro.err")
"$LOOM" salvage "$d" -o "$W/sro.json" 2>"$W/sro.err" || fail "read-only salvage: $(cat "$W/sro.err")"
[ "$(q "$W/sro.json")" = "$ONE" ] || fail "read-only salvaged: '$(q "$W/sro.json")', want '$ONE': $(why "$W/sro.json")"
empty "$W/shm" && empty "$W/tmp" || fail "read-only salvage: left $(ls "$W/shm" "$W/tmp")"
ok "no permission at exit: exit 74, salvaged whole"

# 4. several processes merged into -o FILE on a full disk
"$LOOM" record --devices cpu,survbk -o "$W/live2.json" -- sh -c "'$BK' exit 100 5; '$BK' exit 50 5" 2>/dev/null
[ "$(q "$W/live2.json")" = "$TWO" ] || fail "live2: '$(q "$W/live2.json")'"
full
"$LOOM" record --devices cpu,survbk -o "$W/full/m.json" -- sh -c "'$BK' exit 100 5; '$BK' exit 50 5" 2>"$W/f2.err"
rc=$?
[ $rc -eq 74 ] || fail "merge full: status $rc: $(cat "$W/f2.err")"
empty "$W/full" || fail "merge full: -o holds a part of the run: $(ls "$W/full")"
grep -q "traces of .* merged" "$W/f2.err" && fail "merge full: says merged: $(cat "$W/f2.err")"
grep -q "the records of 3 processes are kept" "$W/f2.err" || fail "merge full: $(cat "$W/f2.err")"
# DIR left out: this user's newest kept folder
"$LOOM" salvage -o "$W/s2.json" 2>"$W/s2.err" || fail "merge salvage: $(cat "$W/s2.err")"
got=$(q "$W/s2.json")
[ "$got" = "$TWO" ] || fail "merge salvaged: '$got', want '$TWO': $(why "$W/s2.json")"
empty "$W/shm" && empty "$W/tmp" || fail "merge salvage: left $(ls "$W/shm" "$W/tmp")"
ok "several processes, -o FILE full: salvaged whole ($TWO)"

# 5. -o DIR/ on a full disk: what fits is written, the rest kept, salvaged
# into another folder: together, every process's records
full
"$LOOM" record --devices cpu,survbk -o "$W/full/d/" -- sh -c "'$BK' exit 100 5; '$BK' exit 50 5" 2>"$W/f3.err"
rc=$?
[ $rc -eq 74 ] || fail "dir full: status $rc: $(cat "$W/f3.err")"
d=$(kept_dir "$W/f3.err")
grep -q "^loom: write them with: loom salvage $d -o $W/full/d/ " "$W/f3.err" || fail "dir full: $(cat "$W/f3.err")"
"$LOOM" salvage "$d" -o "$W/sd/" 2>"$W/s3.err" || fail "dir salvage: $(cat "$W/s3.err")"
k=0 l=0 p=0 n=0
for f in "$W"/full/d/*.json "$W"/sd/*.json; do
  [ -f "$f" ] || continue
  n=$((n + 1))
  got=$(q "$f")
  k=$((k + $(echo "$got" | sed -n 's/.*survKernel=\([0-9]*\).*/\1/p' | grep . || echo 0)))
  l=$((l + $(echo "$got" | sed -n 's/.*survLaunch=\([0-9]*\).*/\1/p' | grep . || echo 0)))
  p=$((p + $(echo "$got" | sed -n 's/.*survPending=\([0-9]*\).*/\1/p' | grep . || echo 0)))
done
[ $n -eq 3 ] && [ $k -eq 150 ] && [ $l -eq 150 ] && [ $p -eq 10 ] ||
  fail "dir: $n traces, $k kernels, $l launches, $p pending (want 3, 150, 150, 10): $(ls "$W/full/d" "$W/sd")"
[ -n "$(ls "$W/sd")" ] || fail "dir: nothing salvaged"
empty "$W/shm" && empty "$W/tmp" || fail "dir salvage: left $(ls "$W/shm" "$W/tmp")"
ok "-o DIR/ full: $n traces, every kernel kept"

# 6. a full $TMPDIR (the session folder, where the other processes' traces
# go before the merge): nothing at -o, the records salvaged whole
full
TMPDIR="$W/full" "$LOOM" record --devices cpu,survbk -o "$W/tf.json" -- sh -c "'$BK' exit 100 5; '$BK' exit 50 5" 2>"$W/f4.err"
rc=$?
[ $rc -eq 74 ] || fail "tmpdir full: status $rc: $(cat "$W/f4.err")"
[ -e "$W/tf.json" ] && fail "tmpdir full: -o holds a part of the run"
d=$(kept_dir "$W/f4.err")
"$LOOM" salvage "$d" -o "$W/s4.json" 2>"$W/s4.err" || fail "tmpdir salvage: $(cat "$W/s4.err")"
got=$(q "$W/s4.json")
[ "$got" = "$TWO" ] || fail "tmpdir salvaged: '$got', want '$TWO': $(why "$W/s4.json") $(cat "$W/f4.err" "$W/s4.err")"
empty "$W/shm" && empty "$W/full" || fail "tmpdir salvage: left $(ls "$W/shm" "$W/full")"
ok "full \$TMPDIR: salvaged whole ($TWO)"

# 7. salvage into a full disk fails and keeps everything; no kept folder: said
full
"$LOOM" record --devices cpu,survbk -o "$W/full/t.json" -- "$BK" exit 100 5 2>"$W/f5.err"
d=$(kept_dir "$W/f5.err")
"$LOOM" salvage "$d" -o "$W/full/t.json" 2>"$W/s5.err"
[ $? -eq 1 ] && grep -q "nothing was removed: the records stay in $d" "$W/s5.err" && [ -d "$d" ] ||
  fail "salvage full: $(cat "$W/s5.err")"
"$LOOM" salvage "$d" -o "$W/s5.json" 2>/dev/null && [ "$(q "$W/s5.json")" = "$ONE" ] ||
  fail "salvage after a failed one: '$(q "$W/s5.json")'"
"$LOOM" salvage -o "$W/s6.json" 2>"$W/s6.err"
[ $? -eq 2 ] && grep -q "no kept records of yours" "$W/s6.err" || fail "nothing kept: $(cat "$W/s6.err")"
ok "a salvage that fails keeps everything"

[ $fails -eq 0 ] && echo "all save tests passed"
exit $((fails > 0))
