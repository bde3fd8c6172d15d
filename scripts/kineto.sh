#!/bin/sh
# Builds libkineto (the library under torch.profiler) CPU-only as a shared
# library from Kineto's pinned source tarball and installs it into
# OUT/kineto-prefix (include/kineto, lib/libkineto.so: the layout a PyTorch
# install has), for the Kineto bridge and its tests (bridges/kineto,
# tests/kineto).  Built once: a later run with the same tarball finds the
# prefix and only prints it.  Needs cmake, g++, python3 and Debian's
# libfmt-dev (scripts/deps.sh installs them); about a minute on 2 cores.
#
#   sh scripts/kineto.sh OUT      prints the prefix (OUT/kineto-prefix) on stdout
#
# The tarball: $LOOM_KINETO_TARBALL, else ../shared/third_party/kineto/
# kineto-*.tar.gz beside the repository.  Without one it fails, saying so.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: sh scripts/kineto.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tarball=${LOOM_KINETO_TARBALL:-}
if [ -z "$tarball" ]; then
  for f in "$here"/../shared/third_party/kineto/kineto-*.tar.gz; do
    [ -f "$f" ] && tarball=$f
  done
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
  echo "kineto.sh: no Kineto source tarball${tarball:+ at $tarball} (set LOOM_KINETO_TARBALL," \
       "or put kineto-*.tar.gz in $here/../shared/third_party/kineto)" >&2
  exit 1
fi
prefix=$out/kineto-prefix
stamp=$prefix/loom-kineto.stamp
id="$(basename "$tarball") $(cksum < "$tarball")"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$id" ] && [ -f "$prefix/lib/libkineto.so" ]; then
  echo "$prefix"
  exit 0
fi
log=$out/kineto-build.log
echo "kineto.sh: building libkineto from $(basename "$tarball") into $prefix (log: $log)" >&2
rm -rf "$out/kineto-src" "$out/kineto-build" "$prefix"
mkdir -p "$out/kineto-src"
tar xzf "$tarball" -C "$out/kineto-src"
# Kineto uses its fmt submodule (not in the tarball) unless fmt's target
# exists: this file, run inside its project(), finds Debian's.
echo 'find_package(fmt REQUIRED)' > "$out/kineto-fmt.cmake"
if ! { cmake -S "$out/kineto-src/kineto/libkineto" -B "$out/kineto-build" \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKINETO_BACKEND=cpu \
         -DKINETO_BUILD_TESTS=OFF -DKINETO_LIBRARY_TYPE=shared \
         -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
         -DCMAKE_PROJECT_kineto_INCLUDE="$out/kineto-fmt.cmake" &&
       cmake --build "$out/kineto-build" -j"$(nproc)" --target kineto &&
       cmake --install "$out/kineto-build"; } > "$log" 2>&1; then
  tail -20 "$log" >&2
  echo "kineto.sh: building libkineto failed (whole log: $log)" >&2
  exit 1
fi
echo "$id" > "$stamp"
echo "$prefix"
