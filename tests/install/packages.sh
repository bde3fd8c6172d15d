#!/bin/sh
# loom's Debian packages, used the way a user uses them: builds them with
# scripts/debs.sh, installs them with dpkg (every Depends must already be
# met: nothing is fetched), then with no LD_LIBRARY_PATH, PYTHONPATH or
# PKG_CONFIG_PATH:
#   record  /usr/bin/loom records the bundled OpenCL workload, built from
#           the installed example source against libloom-dev; exact counts
#           checked with trace_processor, no warning from a plug-in whose
#           runtime is missing here
#   dev     the example plug-in and its program built with pkg-config and
#           with CMake's find_package(loom); both run (libloom found through
#           the loader's cache) and their traces hold the plug-in's device
#           work; loom check-backend passes on the plug-in
#   man     the man pages (compressed) and the bash completion, which bash
#           drives
#   python  /usr/bin/python3 -I imports loom from python3-loom and records
#   purge   every file and folder the packages put there is gone after
#           dpkg --purge, and libloom left the loader's cache
# Every check prints ok/FAIL; the exit status is 1 if any failed.  Needs
# root and none of the packages installed; purges them whatever happens.
# usage: packages.sh BUILD_DIR   (a build folder to reuse, e.g. build-release)
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
pkgs="loom libloom-dev python3-loom"
tpdir=${LOOM_TP_DIR:-$HOME/.cache/loom-tp}
start=$(date +%s)
if [ "$(id -u)" != 0 ]; then
  echo "packages.sh: needs root (dpkg -i)" >&2
  exit 1
fi
for p in $pkgs; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
    echo "packages.sh: $p is installed already; purge it first (dpkg --purge $pkgs)" >&2
    exit 1
  fi
done
unset LD_LIBRARY_PATH PYTHONPATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH LOOM_PLUGINS \
  LOOM_PLUGIN_PATH LOOM_LIBEXEC
work=$(mktemp -d)
trap 'dpkg --purge $pkgs >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
expect() { # NAME WANT GOT
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: expected $2, got $3"; fi
}
# tp TRACE SQL...: one line per SQL, the first column of its first row.
tp() {
  trace=$1
  shift
  node "$here/tests/tp/tp.mjs" --tp-dir "$tpdir" "$trace" "$@" |
    python3 -c 'import json,sys
for rows in json.load(sys.stdin)["results"]:
    print(next(iter(rows[0].values())) if rows else "")'
}

# ---- build and install -------------------------------------------------------
echo "== sh scripts/debs.sh $build"
sh "$here/scripts/debs.sh" "$build"
debs=$(ls "$build"/packages/loom_*.deb "$build"/packages/libloom-dev_*.deb \
  "$build"/packages/python3-loom_*.deb)
built=$(date +%s)
# What the packages hold, and which of it was there before (/usr, /usr/lib...).
for d in $debs; do dpkg-deb --fsys-tarfile "$d" | tar -t; done | sed 's,^\./,/,; s,/$,,' |
  grep -v '^$' | sort -u >"$work/contents"
while read -r f; do [ -e "$f" ] && echo "$f"; done <"$work/contents" >"$work/existed" || true
if dpkg -i $debs >"$work/dpkg.log" 2>&1; then ok "dpkg -i: every Depends met"
else bad "dpkg -i: $(tail -n 5 "$work/dpkg.log")"; exit 1; fi
dpkg -L $pkgs | sort -u >"$work/listed"

# ---- record the bundled workload with /usr/bin/loom --------------------------
ex=/usr/share/loom/examples
batches=8
cc -O2 "$ex/opencl-app/pipeline.c" $(pkg-config --cflags --libs loom) -lOpenCL -lm \
  -o "$work/pipeline"
if (cd "$work" && /usr/bin/loom record -o pipeline.json -- ./pipeline $batches) \
  >"$work/rec.out" 2>"$work/rec.err"; then ok "record: /usr/bin/loom record -- pipeline $batches"
else bad "record: $(cat "$work/rec.err")"; fi
if grep -q ' 0 dropped, 0 warnings' "$work/rec.err"; then ok "record: nothing dropped, no warnings"
else bad "record: $(grep 'loom:' "$work/rec.err")"; fi
if grep -v ' 0 warnings$' "$work/rec.err" | grep -iE 'warn|cannot|fail|error|missing|not found' \
  >"$work/noise"; then
  bad "record: plug-ins not quiet: $(cat "$work/noise")"
else ok "record: plug-ins whose runtime is missing stay quiet"; fi
kernels="from slice where category = 'kernel'"
set -- $(tp "$work/pipeline.json" "select count(*) $kernels" \
  "select count(*) $kernels and extract_arg(arg_set_id, 'args.External id') is not null" \
  "select count(*) from slice where category = 'cpu_op'" \
  "select count(*) from flow" \
  "select count(*) from stats where value > 0 and severity in ('error', 'data_loss')")
# per batch: gemm, bias_relu, gemm, softmax, argmax; one op more: model::load
expect "record: kernels" $((5 * batches)) "$1"
expect "record: kernels with their framework op's External id" $((5 * batches)) "$2"
expect "record: framework ops" $((1 + 5 * batches)) "$3"
if [ "$4" -gt 0 ]; then ok "record: $4 flows"; else bad "record: no flows"; fi
expect "record: trace_processor error stats" 0 "$5"
/usr/bin/loom backends --no-probe >"$work/backends" 2>&1
n=0 missing=""
for f in /usr/lib/*/loom/libloom-*.so; do
  grep -qF "    from $f" "$work/backends" || missing="$missing $f"
  n=$((n + 1))
done
if [ -z "$missing" ] && [ $n -gt 0 ]; then ok "loom backends lists the $n installed plug-ins"
else bad "loom backends misses:$missing"; fi

# ---- man pages and bash completion -------------------------------------------
want=$(ls "$build"/man/*.1 2>/dev/null | wc -l)
got=0
for m in $(grep '^/usr/share/man/man1/loom.*\.1\.gz$' "$work/listed"); do
  zcat "$m" | grep -q '^\.TH' && got=$((got + 1))
done
if [ "$want" -gt 0 ] && [ "$got" = "$want" ]; then ok "man: $got man pages, gzip -9n"
else bad "man: $got of $want man pages installed as /usr/share/man/man1/*.1.gz"; fi
comp=$(grep '/bash-completion/completions/loom$' "$work/listed" || true)
if [ -n "$comp" ] && bash -c '. "$1" && COMP_WORDS=(loom rec) COMP_CWORD=1 COMP_LINE="loom rec" &&
    COMP_POINT=8 && _loom loom rec loom && [[ " ${COMPREPLY[*]} " == *" record "* ]]' \
    sh "$comp" >"$work/comp.out" 2>&1; then ok "bash completion: loom rec<TAB> gives record"
else bad "bash completion ($comp): $(cat "$work/comp.out")"; fi

# ---- build the example plug-in against libloom-dev ---------------------------
# sim_checks TAG DIR: the program (linked with the plug-in) records 3 steps.
sim_checks() {
  if (cd "$2" && ./train train.json 3 >train.out 2>&1); then ok "$1: program runs"
  else bad "$1: $(cat "$2/train.out")"; return; fi
  set -- "$1" $(tp "$2/train.json" \
    "select count(*) from slice s join thread_track tt on s.track_id = tt.id join thread
       using(utid) join process p using(upid) where p.name like '%Sim%' and s.category = 'kernel'" \
    "select count(*) from stats where value > 0 and severity in ('error', 'data_loss')")
  # nine framework ops a step, each mirrored by one kernel on the device
  expect "$1: kernels on the plug-in's device" 27 "$2"
  expect "$1: trace_processor error stats" 0 "$3"
}
mkdir -p "$work/pc"
cc -std=c11 -O2 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags loom) \
  "$ex/plugin-sim/sim.c" -o "$work/pc/libloom-sim.so" -lpthread
cc -std=c11 -O2 -I"$ex/plugin-sim" "$ex/sim-app/train.c" -o "$work/pc/train" \
  $(pkg-config --cflags --libs loom) -L"$work/pc" -lloom-sim -Wl,-rpath,"$work/pc" -lm
case "$(readelf -d "$work/pc/libloom-sim.so")" in
*libloom.so*) bad "pkg-config: the plug-in links libloom" ;;
*) ok "pkg-config: plug-in built from the installed headers alone" ;;
esac
sim_checks pkg-config "$work/pc"
if /usr/bin/loom check-backend "$work/pc/libloom-sim.so" >"$work/check" 2>&1; then
  ok "loom check-backend on the plug-in"
else bad "loom check-backend: $(tail -n 3 "$work/check")"; fi
mkdir -p "$work/cm"
cat >"$work/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(sim C)
find_package(loom 0.1 REQUIRED)
add_library(loom-sim SHARED $ex/plugin-sim/sim.c)
target_include_directories(loom-sim PRIVATE
  \$<TARGET_PROPERTY:loom::loom,INTERFACE_INCLUDE_DIRECTORIES>)
add_executable(train $ex/sim-app/train.c)
target_include_directories(train PRIVATE $ex/plugin-sim)
target_link_libraries(train PRIVATE loom::loom loom-sim m)
CM
if cmake -S "$work/cm" -B "$work/cm/b" >"$work/cm.log" 2>&1 &&
   cmake --build "$work/cm/b" >>"$work/cm.log" 2>&1; then ok "find_package(loom): built"
  sim_checks find_package "$work/cm/b"
else bad "find_package(loom): $(tail -n 5 "$work/cm.log")"; fi

# ---- python3-loom ------------------------------------------------------------
if (cd "$work" && /usr/bin/python3 -I -c '
import os, loom
assert loom.__file__ == "/usr/lib/python3/dist-packages/loom/__init__.py", loom.__file__
lib = os.path.realpath(loom._loom.library)
assert lib.startswith("/usr/lib/") and "libloom.so" in lib, lib
with loom.profile() as p:
    with loom.range("installed"):
        pass
assert [e.name for e in p.trace.events()] == ["installed"]
') >"$work/py.out" 2>&1 && [ ! -s "$work/py.out" ]; then
  ok "python: /usr/bin/python3 -I imports loom and records, quietly"
else bad "python: $(cat "$work/py.out")"; fi

# ---- purge: nothing left behind ----------------------------------------------
dpkg --purge $pkgs >"$work/purge.log" 2>&1 || bad "dpkg --purge: $(cat "$work/purge.log")"
if grep -q 'not empty' "$work/purge.log"; then
  bad "purge: $(grep 'not empty' "$work/purge.log")"
fi
cat "$work/listed" "$work/contents" | sort -u | comm -23 - "$work/existed" >"$work/ours"
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$work/ours" || true)
if [ -z "$left" ]; then ok "purge: all $(wc -l <"$work/ours") files and folders gone"
else bad "purge: left behind: $left"; fi
if ldconfig -p | grep -q 'libloom\.so'; then bad "purge: libloom still in the loader's cache"
else ok "purge: libloom left the loader's cache"; fi

end=$(date +%s)
echo "packages: built in $((built - start)) s, checked in $((end - built)) s"
if [ $fails -gt 0 ]; then
  echo "packages: $fails checks failed"
  exit 1
fi
echo "packages: all checks passed"
