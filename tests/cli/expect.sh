#!/bin/sh
# Runs a command and checks its exit status and that its output (stdout and
# stderr) holds each expected line, as a fixed string; a line given as
# '!TEXT' must not be there.
# usage: expect.sh RC 'LINE'... -- COMMAND ARGS...
set -u
want_rc=$1
shift
n=0
while [ "$1" != "--" ]; do
  n=$((n + 1))
  eval "line_$n=\$1"
  shift
done
shift
out=$("$@" 2>&1)
rc=$?
echo "$out"
fail=0
if [ "$rc" != "$want_rc" ]; then
  echo "expect.sh: exit status $rc, expected $want_rc"
  fail=1
fi
i=1
while [ $i -le $n ]; do
  eval "l=\$line_$i"
  case $l in
  !*)
    if printf '%s\n' "$out" | grep -qF -- "${l#!}"; then
      echo "expect.sh: unexpected: ${l#!}"
      fail=1
    fi ;;
  *)
    if ! printf '%s\n' "$out" | grep -qF -- "$l"; then
      echo "expect.sh: missing: $l"
      fail=1
    fi ;;
  esac
  i=$((i + 1))
done
exit $fail
