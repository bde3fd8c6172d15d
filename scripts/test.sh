#!/bin/sh
# Sets up and runs loom's whole test suite: a normal build with every test,
# then clang's AddressSanitizer + UndefinedBehaviorSanitizer with the fuzz
# targets run for a bounded time, then ThreadSanitizer
# on the concurrent tests.  Traces are checked by Perfetto's trace_processor,
# which is required here (LOOM_TP_REQUIRED), as are pandas and Chromium for
# the report checks (tests/hta, tests/report).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/deps.sh"
export LOOM_TP_REQUIRED=1
jobs=$(nproc)
# "undefined" in clang 14 has the signed-overflow, float-cast-overflow,
# pointer-overflow, shift, bounds, alignment and null checks; division by
# zero of floats is added.  Not the "integer" group: unsigned wrap-around
# and implicit conversions are defined behaviour that the hashes rely on.
clang_sanitize=address,undefined,float-divide-by-zero
run() { # name, cmake args..., then ctest args after --
  name=$1; shift
  dir="$here/build-$name"
  cargs=""; while [ $# -gt 0 ] && [ "$1" != "--" ]; do cargs="$cargs $1"; shift; done
  [ $# -gt 0 ] && shift
  echo "== $name: configure and build"
  cmake -S "$here" -B "$dir" $cargs >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  echo "== $name: ctest $*"
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@")
}
# The Kineto bridge (bridges/kineto) and its tests run against a real
# libkineto, built CPU-only from Kineto's pinned source once and kept in the
# release build folder (scripts/kineto.sh; a minute or so the first time).
kineto=$(sh "$here/scripts/kineto.sh" "$here/build-release")
run release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_KINETO_DIR="$kineto" --
# The Debian packages from the release build (scripts/debs.sh): installed
# here, used with /usr/bin/loom, /usr/bin/python3 and libloom-dev, purged.
echo "== packages: build, install, use, purge"
sh "$here/tests/install/packages.sh" "$here/build-release"
# clang: AddressSanitizer and the complete UndefinedBehaviorSanitizer (no
# recovery), the whole suite, then each fuzz target for FUZZ_SECONDS (45),
# two at a time.  It replaced GCC's ASan build (the time); GCC still builds
# and replays every fuzz input in the release build above.
run clang-asan -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE="$clang_sanitize" \
  -DLOOM_BUILD_BENCH=OFF -DLOOM_FUZZ=ON --
echo "== clang-asan: fuzz targets, ${FUZZ_SECONDS:-45} s each"
sh "$here/scripts/fuzz.sh" "$here/build-clang-asan" "${FUZZ_SECONDS:-45}" 2
# The concurrent tests (not heap: ThreadSanitizer owns malloc, so the heap
# backend's malloc interposer cannot run in a TSan program).
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  run tsan -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=thread -DLOOM_BUILD_BENCH=OFF -- -R "^session_|^hostrec$|^memory$|^ring$|plugins_late|^report$|^windows$|windows_ondemand_lib|read_tape|read_pipe|^esort$|^arena$|^json_par$"
