#!/bin/sh
# Installs loom into a scratch prefix and runs the Python package from there
# with PYTHONPATH alone (no LD_LIBRARY_PATH, no build tree): the extension
# finds libloom through its RUNPATH and the plug-ins in lib/loom.
# usage: install.sh BUILD_DIR SOURCE_DIR PYTHON
set -eu
build=$1
src=$2
py=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
site=$(ls -d "$work"/prefix/lib*/python3*/site-packages)
test -f "$site/loom/__init__.py" || { echo "package not installed in $site"; exit 1; }
unset LD_LIBRARY_PATH LOOM_PLUGINS LOOM_PLUGIN_PATH
cd "$work"
PYTHONPATH="$site" LOOM_PY_INSTALLED="$work/prefix" LOOM_BIN="$work/prefix/bin/loom" \
  "$py" -m pytest -q -p no:cacheprovider "$src/tests/python" \
  -k "installed or api_records or schedule_gives or report_equals or backends"
