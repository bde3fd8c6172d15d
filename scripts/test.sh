#!/bin/sh
# Sets up and runs loom's whole test suite: a normal build with every test,
# then AddressSanitizer + UndefinedBehaviorSanitizer, then ThreadSanitizer
# on the concurrent tests.  Traces are checked by Perfetto's trace_processor,
# which is required here (LOOM_TP_REQUIRED), as are pandas and Chromium for
# the report checks (tests/hta, tests/report).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/deps.sh"
export LOOM_TP_REQUIRED=1
jobs=$(nproc)
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
run release -DCMAKE_BUILD_TYPE=RelWithDebInfo --
run asan -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=address,undefined -DLOOM_BUILD_BENCH=OFF --
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  run tsan -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=thread -DLOOM_BUILD_BENCH=OFF -- -R "session|hostrec|plugins_late|^report$|^triggers$|ondemand_lib"
