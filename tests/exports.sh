#!/bin/sh
# exports.sh LIB [NM] - libloom's dynamic symbols are its public API and
# nothing else: every defined one must match ^loom_[a-z] (loom.h, plugin.h,
# and loom_tools_get, the one way in for loom's own programs: loom/tools.h).
# Fails naming each symbol that does not, such as a loom__ internal left
# exported.  The linker's own (_init, _fini, _edata, _end, __bss_start) are
# not loom's and are skipped.
lib=$1
nm=${2:-nm}
[ -r "$lib" ] || { echo "exports: cannot read '$lib'"; exit 1; }
syms=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }') || exit 1
[ -n "$syms" ] || { echo "exports: $lib defines no dynamic symbol"; exit 1; }
bad=0
for s in $syms; do
  case $s in
  _init | _fini | _edata | _end | __bss_start) continue ;;
  esac
  if ! printf '%s\n' "$s" | grep -q '^loom_[a-z]'; then
    echo "exports: $lib exports '$s', which is not public API (^loom_[a-z])"
    bad=$((bad + 1))
  fi
done
n=$(printf '%s\n' "$syms" | grep -c '^loom_[a-z]')
[ "$bad" -eq 0 ] || { echo "exports: $bad symbol(s) outside the public API"; exit 1; }
echo "exports: $n symbols, all public API"
