#!/bin/sh
# Builds loom's Debian packages with CPack from the install rules
# (cmake/packaging.cmake): loom (the CLI, libloom, the plug-ins and preload
# libraries), libloom-dev (headers, pkg-config and CMake files, the backend
# guide, the examples' sources) and python3-loom (the Python module, in
# /usr/lib/python3/dist-packages), each with Depends from dpkg-shlibdeps.
# Installs what it needs first (scripts/deps.sh), as root.
#
#   sh scripts/debs.sh [BUILD_DIR]     writes BUILD_DIR/packages/*.deb
#
# BUILD_DIR defaults to build-deb, configured as a release build without
# tests.  An existing build folder (build-release) is reused: configured
# for /usr while the packages are made, then set back to its own prefix.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-deb}
. "$here/scripts/deps.sh"
cache="$build/CMakeCache.txt"
cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
reused=""
if [ -f "$cache" ]; then
  reused=1
  old_prefix=$(cached CMAKE_INSTALL_PREFIX)
  old_pydir=$(cached LOOM_PYTHON_INSTALL_DIR)
  set --
else
  set -- -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_BENCH=OFF \
    -DLOOM_BUILD_EXAMPLES=OFF
fi
# Under /usr: libdir is Debian's multiarch folder (GNUInstallDirs), the
# Python module goes where Debian's python3 looks (python/CMakeLists.txt).
cmake -S "$here" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr -DLOOM_PYTHON_INSTALL_DIR= "$@" >/dev/null
out="$build/packages"
rm -rf "$out"
rc=0
# cpack builds what is out of date first (the preinstall target), with make's
# -j from MAKEFLAGS.
(cd "$build" && MAKEFLAGS="-j$(nproc)" cpack -G DEB -B "$out" --config CPackConfig.cmake) \
  >"$build/cpack.log" 2>&1 || rc=$?
if [ -n "$reused" ]; then
  cmake -S "$here" -B "$build" -DCMAKE_INSTALL_PREFIX="$old_prefix" \
    -DLOOM_PYTHON_INSTALL_DIR="$old_pydir" >/dev/null
fi
if [ $rc -ne 0 ] || grep -q 'CPack Error' "$build/cpack.log"; then
  cat "$build/cpack.log"
  find "$out" -name PreinstallOutput.log -exec tail -n 30 {} \;
  exit 1
fi
grep 'debdeps:' "$build/cpack.log" | sed 's/^-- //'
rm -rf "$out/_CPack_Packages"
for f in "$out"/*.deb; do
  echo "$(du -k "$f" | cut -f1) KiB  $f"
done
