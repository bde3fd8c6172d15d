#!/bin/sh
# leave.sh LOOM BK ONDEMAND_APP UNUSED_PLUGIN - what loom leaves and shows: traces honour
# the umask and never widen the file they replace; a runtime folder another
# user made first is refused, named, and triggers still work; SIGHUP reaches
# the program and loom record still collects and cleans up; a SIGKILLed
# process's control socket is removed; a process that wrote its trace frees
# its shared memory at once; backends the program never used are not named
# for each killed process.  Parts that need root (a private /tmp) are
# skipped without it.
set -u
LOOM=$1 BK=$2 APP=$3 UNUSED=$4
W=$(mktemp -d "${TMPDIR:-/tmp}/loom-leave-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir "$W/shm" "$W/tmp" "$W/run"
chmod 700 "$W/run"
export LOOM_SHM_DIR="$W/shm" TMPDIR="$W/tmp" XDG_RUNTIME_DIR="$W/run"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
mode() { stat -c %a "$1"; }
clean() { [ -z "$(ls -A "$W/shm")$(ls -A "$W/tmp")" ] || fail "$1: left $(ls -A "$W/shm" "$W/tmp")"; }

# 1. modes: the umask's, never wider than the file replaced (one process
# writes -o itself; several are merged into it; -o DIR/)
(umask 077; "$LOOM" record -o "$W/u1.json" -- true 2>/dev/null)
[ "$(mode "$W/u1.json")" = 600 ] || fail "umask 077: mode $(mode "$W/u1.json")"
(umask 022; "$LOOM" record -o "$W/u2.json" -- true 2>/dev/null)
[ "$(mode "$W/u2.json")" = 644 ] || fail "umask 022: mode $(mode "$W/u2.json")"
touch "$W/u3.pftrace" && chmod 600 "$W/u3.pftrace"
(umask 022; "$LOOM" record -o "$W/u3.pftrace" -- true 2>/dev/null)
[ "$(mode "$W/u3.pftrace")" = 600 ] || fail "0600 file replaced: mode $(mode "$W/u3.pftrace")"
touch "$W/u4.json" && chmod 640 "$W/u4.json"
(umask 027; "$LOOM" record -o "$W/u4.json" -- sh -c 'true; sh -c true' 2>/dev/null)
[ "$(mode "$W/u4.json")" = 640 ] || fail "merged into a 0640 file: mode $(mode "$W/u4.json")"
(umask 077; "$LOOM" record -o "$W/ud/" -- true 2>/dev/null)
for f in "$W"/ud/*.json; do [ "$(mode "$f")" = 600 ] || fail "-o DIR/, umask 077: $f $(mode "$f")"; done
clean modes
ok "modes follow the umask and never widen"

# 2. SIGHUP: forwarded to the program (it ends by it, at once), loom record
# still writes its trace and removes its folders
start=$(date +%s)
"$LOOM" record -o "$W/hup.json" -- sleep 60 2>"$W/hup.err" &
lp=$!
sleep 1
kill -HUP $lp
wait $lp
rc=$?
[ $rc -eq 129 ] || fail "SIGHUP: status $rc, not 129: $(cat "$W/hup.err")"
[ $(($(date +%s) - start)) -lt 30 ] || fail "SIGHUP: the program did not end"
[ -s "$W/hup.json" ] || fail "SIGHUP: no trace: $(cat "$W/hup.err")"
pgrep -f "^sleep 60$" >/dev/null && fail "SIGHUP: the program is still running"
clean SIGHUP
ok "SIGHUP forwarded, trace written, nothing left"

# 3. a SIGKILLed process's control socket is removed; a process that wrote
# its trace has freed its arena before its parent ends
"$LOOM" record --on-demand -o "$W/k.json" -- sh -c 'kill -9 $$' 2>"$W/k.err"
[ -z "$(ls -A "$W/run/loom" 2>/dev/null)" ] || fail "socket left: $(ls -A "$W/run/loom")"
# (listed by the shell itself: ls would have an arena of its own)
"$LOOM" record -o "$W/a/" -- sh -c 'sh -c "exit 0"; echo "$$"; cd "$LOOM_RECORD_ARENAS" && echo *.arena' \
  >"$W/a.out" 2>"$W/a.err"
self=$(head -n 1 "$W/a.out")
arenas="$(sed -n 2p "$W/a.out") "
[ "$arenas" = "$self.arena " ] || fail "arenas while the parent runs: '$arenas', want only $self.arena"
clean arenas
ok "no socket of a killed process, no arena of a finished one"

# 4. a backend enabled by default that the program never used (it declares
# a clock at configure, as OpenCL, Vulkan and MPI do: libloom-unused.so) is
# not named for each killed process; asked for with --devices, it is
"$LOOM" record --plugin "$UNUSED" -o "$W/b.json" -- sh -c 'for i in 1 2 3; do sh -c "kill -9 \$\$"; done' 2>"$W/b.err"
[ "$(grep -c 'was killed by SIGKILL\|ended without writing a trace' "$W/b.err")" -eq 3 ] ||
  fail "3 killed processes not named: $(cat "$W/b.err")"
grep -q "nothing kept\|had handed no records" "$W/b.err" "$W/b.json" && fail "unused backends named: $(cat "$W/b.err")"
"$LOOM" record --plugin "$UNUSED" --devices cpu,unused -o "$W/b2.json" -- sh -c 'sh -c "kill -9 \$\$"' 2>"$W/b2.err"
grep -q "backend 'unused' nothing kept" "$W/b2.err" || fail "an asked backend: $(cat "$W/b2.err")"
clean backends
ok "backends the program never used not named"

# 5. the runtime folder: another user made /tmp/loom-<uid> first (in a
# private /tmp): refused and named, triggers work through the fallback
# (the test's files outside the private /tmp)
N=$(mktemp -d /var/tmp/loom-leave-ns.XXXXXX 2>/dev/null)
trap 'rm -rf "$W" "$N"' EXIT
if [ "$(id -u)" -eq 0 ] && [ -n "$N" ] && unshare -m true 2>/dev/null; then
  mkdir "$N/home"
  unshare -m sh -c '
    mount -t tmpfs tmpfs /tmp || exit 3
    mkdir /tmp/loom-0 && chown 65534 /tmp/loom-0
    unset LOOM_SHM_DIR
    export HOME="$1/home" XDG_RUNTIME_DIR= TMPDIR="$1"
    "$2" record --on-demand -o "$1/od.json" -- "$3" 60 50 "$1/pid" 2>"$1/od.err" &
    for i in $(seq 100); do [ -s "$1/pid" ] && break; sleep 0.1; done
    "$2" trigger "$(cat "$1/pid")" --steps 2 -o "$1/win.json" >"$1/trig.out" 2>"$1/trig.err"
    echo "trigger $?" >"$1/trig.rc"
    wait' sh "$N" "$LOOM" "$APP"
  [ "$(cat "$N/trig.rc" 2>/dev/null)" = "trigger 0" ] && [ -s "$N/win.json" ] ||
    fail "runtime folder: the trigger failed: $(cat "$N/trig.err" "$N/od.err")"
  grep -q "/tmp/loom-0 is a folder of uid 65534 (made by another user first): not used; the trigger sockets of uid 0 are in $N/home/.loom-run instead" \
    "$N/od.err" || fail "runtime folder: no message: $(cat "$N/od.err")"
  [ -z "$(ls -A "$N/home/.loom-run")" ] || fail "runtime folder: left $(ls -A "$N/home/.loom-run")"
  ok "a runtime folder of another user refused, named; triggers through the fallback"
else
  echo "skipped: the runtime folder of another user (needs root and unshare -m)"
fi

[ $fails -eq 0 ] && echo "all leave tests passed"
exit $((fails > 0))
