#!/bin/sh
# harmless.sh LOOM PROG TP_DIR - loom record never changes what a program does:
# a program that closes every inherited descriptor and opens its own files
# (which get the numbers loom's had) finds them holding only what it wrote;
# `unshare -U` and a program that, as setpriv does, changes its capabilities
# in one thread and then its ids (glibc's set*id asks every thread to
# follow) work; no loom thread runs in a program that did not ask for one.
# Each program's output files are compared, byte for byte, with a run
# without loom.  The trace of the program that closed loom's descriptors
# says so, and holds every range (trace_processor, exact count, no error).
set -u
LOOM=$1 PROG=$2 TP_DIR=$3
HERE=$(cd "$(dirname "$0")" && pwd)
TP="$HERE/../tp/tp.mjs"
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-harmless.XXXXXX")
trap 'rm -rf "$W"' EXIT
chmod 755 "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# run NAME ARGS...: the program without loom into $W/NAME.plain and under
# loom record into $W/NAME.loom; same status and byte-identical files
run() {
  name=$1; shift
  mkdir -p "$W/$name.plain" "$W/$name.loom"
  chmod 1777 "$W/$name.plain" "$W/$name.loom"
  (ulimit -n 1024; "$PROG" "$@" "$W/$name.plain" $EXTRA) >"$W/$name.plain.out" 2>&1
  st_plain=$?
  (ulimit -n 1024; "$LOOM" record -o "$W/$name.json" -- "$PROG" "$@" "$W/$name.loom" $EXTRA) \
    >"$W/$name.loom.out" 2>&1
  st_loom=$?
  [ "$st_plain" -eq "$st_loom" ] || fail "$name: status $st_loom under loom, $st_plain without: $(cat "$W/$name.loom.out")"
  if diff -r "$W/$name.plain" "$W/$name.loom" >"$W/$name.diff"; then
    ok "$name: same status ($st_plain) and the same files as without loom"
  else
    fail "$name: files differ from a run without loom: $(cat "$W/$name.diff")"
  fi
}

EXTRA=200000 run closefds closefds
n=$(cat "$W/closefds.loom/threads"); [ "$n" = 1 ] || fail "closefds: $n threads under loom"
grep -q "closed loom's shared-memory file descriptor" "$W/closefds.json" ||
  fail "closefds: the trace does not say the program closed loom's descriptor"
if command -v node >/dev/null && [ -f "$TP_DIR/trace_processor.wasm" ]; then
  node "$TP" --tp-dir "$TP_DIR" "$W/closefds.json" \
    "select count(*) as n from slice where name = 'closefds'" \
    "select count(*) as e from stats where severity in ('error', 'data_loss') and value > 0" \
    >"$W/tp.out" || fail "trace_processor failed on the closefds trace"
  grep -q '"n":200000' "$W/tp.out" && grep -q '"e":0' "$W/tp.out" ||
    fail "closefds: trace_processor counted $(cat "$W/tp.out"), want 200000 ranges and no error"
elif [ -n "${LOOM_TP_REQUIRED:-}" ]; then
  fail "trace_processor is not set up in '$TP_DIR'"
fi

EXTRA= run unshare unshare

# The pager (src/record/pager.c), loom's one thread that no feature asks
# for: only in a program that already runs a thread of its own, one while it
# records, none a second after; every range kept, also in the trace rebuilt
# after a SIGKILL.  (closefds above, single-threaded, had none.)
N=300000
ranges() { # FILE: "paged" slices and error stats, as trace_processor counts them
  node "$TP" --tp-dir "$TP_DIR" "$1" "select count(*) as n from slice where name = 'paged'" \
    "select count(*) as e from stats where severity in ('error', 'data_loss') and value > 0"
}
mkdir -p "$W/pager" "$W/pagerk"
"$LOOM" record -o "$W/pager.json" -- "$PROG" pager "$W/pager" $N >"$W/pager.out" 2>&1 ||
  fail "pager: $(cat "$W/pager.out")"
[ "$(cat "$W/pager/pagers_recording")" = 1 ] ||
  fail "pager: $(cat "$W/pager/pagers_recording") loom-pager threads while recording, want 1"
[ "$(cat "$W/pager/pagers_idle")" = 0 ] ||
  fail "pager: $(cat "$W/pager/pagers_idle") loom-pager threads a second after, want 0"
"$LOOM" record -o "$W/pagerk.json" -- "$PROG" pager "$W/pagerk" $N kill >"$W/pagerk.out" 2>&1
[ -s "$W/pagerk.json" ] || fail "pager, killed: no trace rebuilt: $(cat "$W/pagerk.out")"
if command -v node >/dev/null && [ -f "$TP_DIR/trace_processor.wasm" ]; then
  for t in pager pagerk; do
    ranges "$W/$t.json" >"$W/$t.tp" || fail "$t: trace_processor failed"
    grep -q "\"n\":$N}" "$W/$t.tp" && grep -q '"e":0' "$W/$t.tp" ||
      fail "$t: trace_processor counted $(cat "$W/$t.tp"), want $N ranges and no error"
  done
  ok "pager: one loom-pager while recording, none after; $N ranges kept, also after SIGKILL"
fi
if [ "$(id -u)" = 0 ]; then
  EXTRA= run ids ids
  # the commands the issue named, as they are
  "$LOOM" record -o "$W/u.json" -- unshare -U /bin/true >"$W/u.out" 2>&1 ||
    fail "loom record -- unshare -U /bin/true: $(cat "$W/u.out")"
  "$LOOM" record -o "$W/s.json" -- setpriv --reuid=65534 --regid=65534 --clear-groups /bin/true \
    >"$W/s.out" 2>&1 || fail "loom record -- setpriv ... /bin/true: $(cat "$W/s.out")"
else
  echo "ids, setpriv: skipped (not root)"
fi
[ "$fails" -eq 0 ] && echo "harmless: all passed"
exit "$fails"
