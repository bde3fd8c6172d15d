#!/bin/sh
# Installs loom into a scratch prefix and builds against it the way users
# do: the installed example plug-in with pkg-config (public headers only, no
# libloom), and a program with CMake's find_package(loom).  Then runs the
# program with the plug-in loaded through LOOM_PLUGINS, and the installed
# `loom` with no LD_LIBRARY_PATH: it finds libloom through its RUNPATH and
# the installed plug-ins in the plug-in folder.
# usage: check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
test "$(pkg-config --modversion loom)" = "0.1.0"
# The backend guide and the example's sources come with the headers.
data="$work/prefix/share"
test -s "$data/doc/loom/writing-a-backend.md" || { echo "guide not installed"; exit 1; }
test -s "$data/loom/examples/plugin-sim/sim.c" || { echo "example not installed"; exit 1; }
# The man pages (`man loom-record` finds them under the prefix) and the bash
# completion, made from the description --help prints (docs/cli.md).
for p in loom loom-record loom-report loom-trigger; do
  test -s "$data/man/man1/$p.1" || { echo "man page $p.1 not installed"; exit 1; }
done
if command -v man >/dev/null; then
  test "$(MANPATH="$data/man" man -w loom-record)" = "$data/man/man1/loom-record.1" ||
    { echo "man loom-record does not find the installed page"; exit 1; }
fi
grep -q '^complete -F _loom loom$' "$data/bash-completion/completions/loom" ||
  { echo "bash completion not installed"; exit 1; }
# The installed example plug-in against the installed headers only.
cc -std=c11 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags loom) \
   "$data/loom/examples/plugin-sim/sim.c" -o "$work/libloom-sim.so" -lpthread
# A program through find_package(loom).
mkdir -p "$work/app"
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(loom 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE loom::loom)
CM
cat > "$work/app/main.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <loom/loom.h>
static void visit(const loom_backend_info *b, void *u) { if (!strcmp(b->name, "sim")) ++*(int *)u; }
int main(int argc, char **argv) {
  int sim = 0;
  loom_backends_list(visit, &sim);
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,sim"};
  loom_session *s;
  if (loom_session_create(&cfg, &s) || loom_session_start(s)) return 1;
  loom_range_push("installed");
  loom_range_pop();
  loom_trace *t;
  if (loom_session_stop(s, &t)) return 1;
  loom_session_destroy(s);
  int rc = loom_trace_save(t, argv[1]) != LOOM_OK;
  loom_trace_free(t);
  printf("sim backends: %d, version %s\n", sim, loom_version_string());
  return rc || sim != 1;
}
C
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" LOOM_PLUGINS="$work/libloom-sim.so" \
  "$work/app/build/consumer" "$work/out.json"
grep -q '"name":"installed"' "$work/out.json"
# The installed `loom` runs without LD_LIBRARY_PATH (RUNPATH), and its
# `loom record` finds its injected parts in <prefix>/lib/loom.
plugindir=$(pkg-config --variable=plugindir loom)
loom() { env -u LD_LIBRARY_PATH -u LOOM_PLUGINS -u LOOM_PLUGIN_PATH -u LOOM_LIBEXEC \
  "$work/prefix/bin/loom" "$@"; }
loom version | grep -q "^loom 0.1.0" || { echo "installed loom does not start"; exit 1; }
loom record -o "$work/rec.json" --devices cpu -- /bin/true >/dev/null 2>&1
test -s "$work/rec.json"
# `loom backends` lists every installed plug-in from the plug-in folder.
loom backends --no-probe > "$work/backends.txt"
n=0
for f in "$plugindir"/libloom-*.so; do
  test -e "$f" || continue
  real=$(cd "$(dirname "$f")" && pwd -P)/$(basename "$f")
  grep -qF "    from $real" "$work/backends.txt" || {
    echo "loom backends does not list $real:"; cat "$work/backends.txt"; exit 1; }
  n=$((n + 1))
done
test "$n" -gt 0 || { echo "no plug-in installed in $plugindir"; exit 1; }
echo "install check passed"
