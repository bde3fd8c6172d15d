#!/bin/sh
# `pip install .` of the repository into a fresh venv, as a user does it (ctest python_pip):
# twice, once against the build tree's libloom (LOOM_BUILD_DIR) and once against an
# installed one found by pkg-config (`cmake --install` into a scratch prefix).  Each time the
# installed package records with no PYTHONPATH or LD_LIBRARY_PATH (check.py), and `pip
# uninstall` leaves the venv holding exactly the files it held before.  Offline: no index is
# asked for anything (the build backend requires nothing; pip's build isolation stays on).
# usage: pip.sh BUILD_DIR SOURCE_DIR PYTHON
set -eu
build=$(cd "$1" && pwd -P)
src=$(cd "$2" && pwd -P)
py=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH LD_LIBRARY_PATH LOOM_BUILD_DIR PKG_CONFIG_PATH LOOM_PLUGINS LOOM_PLUGIN_PATH
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
"$py" -m venv "$work/venv"
vpy=$work/venv/bin/python
snapshot() { (cd "$work/venv" && find . | LC_ALL=C sort); }
snapshot >"$work/before"

# route NAME TRACE LIBLOOM PLUGIN_DIR KINETO_BRIDGE|- PIP_OPTION VAR=VALUE: one install
# (PIP_OPTION: "" or --no-build-isolation), what check.py expects, the uninstall
route() {
  name=$1 trace=$2 lib=$3 plugins=$4 kineto=$5 opt=$6; shift 6
  echo "== pip install ${opt:-(build isolation on)} . against $name"
  env "$@" "$vpy" -m pip install -q $opt "$src"
  (cd "$work" && "$vpy" "$src/tests/pip/check.py" "$src" "$lib" "$plugins" "$kineto" \
    "$work/$trace")
  "$vpy" -m pip uninstall -q -y loom
  snapshot >"$work/after"
  diff "$work/before" "$work/after" || { echo "pip uninstall left the files above"; exit 1; }
  if (cd "$work" && "$vpy" -c "import loom" 2>/dev/null); then
    echo "loom still imports after pip uninstall"; exit 1
  fi
}

kin=-; [ -e "$build/libloom-kineto.so" ] && kin=$build/libloom-kineto.so
route build-tree t.json "$build/libloom.so" "$build/plugins" "$kin" "" LOOM_BUILD_DIR="$build"

cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(find "$work/prefix" -name loom.pc)
libdir=$(dirname "$(dirname "$pc")")
kin=-; [ -e "$libdir/libloom-kineto.so" ] && kin=$libdir/libloom-kineto.so
route pkg-config t.pftrace "$libdir/libloom.so" "$libdir/loom" "$kin" --no-build-isolation \
  PKG_CONFIG_PATH="$(dirname "$pc")"
