#!/bin/bash
# The bash completion (made by loom-docgen) driven as bash drives it: the
# script is sourced, COMP_WORDS / COMP_CWORD / COMP_LINE / COMP_POINT are set
# for a command line with the cursor at its end, the function `complete`
# registered for loom is called, and COMPREPLY must be exactly the words
# expected (in any order): commands, options, option values, device types
# read from `loom backends` (the sim and vendorx plug-ins only), process ids
# read from `loom trigger --list`, and trace files by their extensions.
# usage: complete.sh LOOM COMPLETION_SCRIPT SIM_PLUGIN VENDORX_PLUGIN
set -u
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
export LC_ALL=C LOOM_PLUGINS=$(abs "$3"):$(abs "$4") LOOM_LIBEXEC=/nonexistent
loom=$(abs "$1")
unset LOOM_PLUGIN_PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=/dev/null
source "$2" || exit 1
bad=0
[[ $(complete -p loom) == 'complete -F _loom loom' ]] || { echo "FAIL: complete -p loom"; bad=1; }
mkdir "$tmp/bin" "$tmp/w"
printf '#!/bin/sh\n' > "$tmp/bin/loom-test-prog"
chmod +x "$tmp/bin/loom-test-prog"
PATH=$tmp/bin:$PATH
cd "$tmp/w" || exit 1
touch a.json b.json.gz c.pftrace d.pftrace.gz e.txt lib.so 'my run.json' x.jsonl
mkdir sub

# expect WANT LINE: WANT the words, '|'-separated, sorted; LINE ends at the cursor.
expect() {
  local want=$1 line=$2 fn got
  COMP_LINE=$line
  COMP_POINT=${#line}
  read -ra COMP_WORDS <<<"$line"
  [[ $line == *' ' ]] && COMP_WORDS+=('')
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_WORDS[0]=${LOOM_AS:-$loom}
  COMPREPLY=()
  fn=$(complete -p loom | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
  "$fn" loom "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
  got=$(printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort | paste -sd '|')
  if [[ $got != "$want" ]]; then
    echo "FAIL: '$line': got '$got', want '$want'"
    bad=1
  fi
}
traces='a.json|b.json.gz|c.pftrace|d.pftrace.gz|my run.json|sub'
expect '--help|--version|-h|backends|check-backend|convert|diff|help|merge|record|report|'\
'salvage|trigger|version' 'loom '
expect 'record|report' 'loom re'
expect '--sort-memory' 'loom report --so'
expect '--step|--steps' 'loom diff --ste'
expect "$traces" 'loom report '
expect "$traces" 'loom report a.json '
expect 'a.json|b.json.gz|c.pftrace|d.pftrace.gz|e.txt|lib.so|my run.json|sub|x.jsonl' \
  'loom report -o '
expect '' 'loom report --top '
expect "$traces" 'loom merge a.json -o '
expect "$traces" 'loom convert a.json '
expect 'all|cpu|sim|vendorx' 'loom record --devices '
expect 'cpu,sim|cpu,vendorx' 'loom record --devices cpu,'
expect 'sim,cpu|sim,vendorx' 'loom record --devices sim,'
expect 'cpu,sim' 'loom record --devices cpu,s'
expect 'sim.fail=|sim.max_pending=|sim.offset_ns=|sim.skew_ppm=' 'loom record --option '
expect 'sim.skew_ppm=' 'loom record --option sim.sk'
expect 'exec' 'loom record --follow e'
expect 'host' 'loom record --memory '
expect 'lib.so|sub' 'loom backends --plugin '
expect 'lib.so|sub' 'loom check-backend '
expect 'sub' 'loom salvage '
expect "$traces" 'loom salvage -o '
expect '' 'loom diff --steps 1 '
expect "$traces" 'loom diff --steps 1 2 '
expect 'record|report' 'loom help re'
expect '--expect-records|--help' 'loom check-backend --'
# record's program: a command; then its own arguments, files; an option
# after the program is the program's
expect 'a.json|b.json.gz|c.pftrace|d.pftrace.gz|e.txt|lib.so|my run.json|sub|x.jsonl' \
  'loom record -o t.json -- ls '
expect 'a.json|b.json.gz|c.pftrace|d.pftrace.gz|e.txt|lib.so|my run.json|sub|x.jsonl' \
  'loom record ls '
expect 'loom-test-prog' 'loom record -- loom-test-pro'
# the processes that accept triggers, as `loom trigger --list` prints them
printf '#!/bin/sh\n[ "$1 $2" = "trigger --list" ] || exit 1\n%s\n' \
  'printf "%-8s %-20s\n%-8s %-20s\n%-8s %-20s\n" PID PROGRAM 4242 train 4250 eval' > "$tmp/bin/fake"
chmod +x "$tmp/bin/fake"
LOOM_AS=$tmp/bin/fake expect '4242|4250' 'loom trigger '
LOOM_AS=$tmp/bin/fake expect '4250' 'loom trigger 425'
[[ $bad == 0 ]] && echo "completion as expected"
exit $bad
