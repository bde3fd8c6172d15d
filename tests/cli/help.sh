#!/bin/sh
# The help of every command against its man page and its parser:
#   (a) `loom CMD --help` exits 0 and says the same words, in the same order,
#       as the man page loom-CMD.1 that `man` shows (headings, NAME and the
#       page's header and footer aside); `loom help CMD` prints the same;
#   (b) every man page renders without a warning (groff -ww; man --warnings -l
#       for loom.1);
#   (c) the options the command's parser compares arguments with (the option
#       literals of its source file) are exactly the options its help lists;
#   (d) every option's text says its default, actions (--help, --version,
#       --list) aside;
#   (e) docs/cli.md's table has every command with its summary, and main.c's
#       table of commands holds the commands described.
# usage: help.sh LOOM MAN_DIR SOURCE_DIR
set -u
loom=$1
man=$2
root=$3
src=$root/tools/loom
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C.UTF-8 MANWIDTH=80
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# The source file whose parser reads each command's options.
files='loom main.c
record record_opts.c
salvage salvage.c
convert convert.c
report report.c
diff diff.c
backends backends.c
merge merge.c
trigger trigger.c
check-backend check.c
version main.c
help main.c'
# Every file with option literals belongs to a command above (a new parser
# must be added here, or its options would escape the check).
for f in "$src"/*.c; do
  b=$(basename "$f")
  case $b in spec.c|help.c) continue ;; esac
  grep -qE '"(-[a-zA-Z]|--[a-z][a-z0-9-]*)"' "$f" || continue
  echo "$files" | grep -q " $b\$" || fail "$b compares option names but maps to no command here"
done

# Words of a text, one a line, in ASCII.
words() {
  sed 's/\xe2\x80\x90/-/g; s/\xe2\x88\x92/-/g; s/\xe2\x80\x99/'"'"'/g; s/\xe2\x80\x98/`/g' |
    tr -s ' \t' '\n\n' | sed '/^$/d'
}

cmds=$("$loom" help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit }
                           on && /^  [a-z]/ { print $1 }')
# main.c's table of commands and the described ones are the same
grep -oE '\{"[a-z-]+", cmd_' "$src/main.c" | cut -d'"' -f2 | sort > "$tmp/table"
echo "$cmds" | sort | diff "$tmp/table" - > "$tmp/diff" ||
  fail "main.c's commands (<) vs the commands loom help describes (>): $(cat "$tmp/diff")"
for c in loom $cmds; do
  if [ "$c" = loom ]; then page=loom; set -- --help; else page=loom-$c; set -- "$c" --help; fi
  "$loom" "$@" > "$tmp/help" 2> "$tmp/err" || fail "loom $* exits $?"
  [ -s "$tmp/err" ] && fail "loom $* writes to stderr: $(cat "$tmp/err")"
  if [ "$c" != loom ]; then
    "$loom" help "$c" | cmp -s - "$tmp/help" || fail "loom help $c differs from loom $c --help"
  fi
  f=$man/$page.1
  [ -s "$f" ] || { fail "no man page $f"; continue; }
  groff -ww -man -Tutf8 -P-cbou "$f" > "$tmp/man" 2> "$tmp/warn"
  [ -s "$tmp/warn" ] && fail "$page.1: groff warns: $(cat "$tmp/warn")"
  # man(1) itself once (it runs groff as above, slowly)
  if [ "$c" = loom ] && command -v man > /dev/null; then
    man --warnings -l "$f" 2>&1 > /dev/null | grep . && fail "$page.1: man warns"
  fi
  # (a) the same words: help without its headings, the page without its
  # header, footer, headings and NAME line
  sed -E '1s/^usage: //; /^(arguments|options|commands|environment|exit status|examples|see also):$/d' \
    "$tmp/help" | words > "$tmp/hw"
  awk 'NF { l[++n] = $0 } END { for (i = 2; i < n; i++) print l[i] }' "$tmp/man" |
    awk '/^NAME$/ { skip = 1; next } /^[A-Z][A-Z ]*$/ { skip = 0; next } !skip' | words > "$tmp/mw"
  diff "$tmp/hw" "$tmp/mw" > "$tmp/diff" || fail "$page.1 and loom $* differ:
$(head -20 "$tmp/diff")"
  [ "$(wc -l < "$tmp/hw")" -gt 10 ] || fail "loom $* says almost nothing"
  # (c) the options listed against the options the parser compares with
  awk '/^options:$/ { on = 1; next } on && /^$/ { exit } on' "$tmp/help" |
    sed -n 's/^  \(-[^ ]*\).*/\1/p' > "$tmp/listed"
  grep -q '^  -h, --help ' "$tmp/help" && printf '%s\n' -h --help >> "$tmp/listed"
  sort -u "$tmp/listed" | grep -vx -- -h, > "$tmp/l"
  file=$(echo "$files" | awk -v c="$c" '$1 == c { print $2 }')
  { grep -oE '"(-[a-zA-Z]|--[a-z][a-z0-9-]*)"' "$src/$file" | tr -d '"'
    printf '%s\n' -h --help; } | sort -u > "$tmp/parsed"
  if [ "$file" = main.c ] && [ "$c" != loom ]; then printf '%s\n' --help -h > "$tmp/parsed"; fi
  diff "$tmp/parsed" "$tmp/l" > "$tmp/diff" ||
    fail "loom $c: options its parser ($file) accepts (<) vs its help lists (>):
$(cat "$tmp/diff")"
  # (d) every option says its default
  awk '/^  -/ { if (t != "") print t; t = $0; next }
       /^                      / && t != "" { t = t " " $0; next }
       { if (t != "") print t; t = "" }' "$tmp/help" |
    grep -vE '^  (-h, --help|--version|--list) ' | grep -v 'default: ' |
    while read -r l; do echo "FAIL: loom $c: no default: $l"; done | grep . && bad=1
done
# docs/cli.md lists every command with its summary.
"$loom" help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit }
                   on && /^  [a-z]/ { if (c) print c "|" t; c = $1; $1 = ""; t = $0; next }
                   on { t = t $0 } END { print c "|" t }' | sed 's/  */ /g; s/| /|/' |
  while IFS='|' read -r c t; do
    grep -qF "| \`$c\` | $t | \`loom-$c(1)\` |" "$root/docs/cli.md" ||
      echo "FAIL: docs/cli.md: no row '| \`$c\` | $t | ...'"
  done | grep . && bad=1
# A wrong command line: the synopsis on stderr, status 2.
"$loom" report > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q '^usage: loom report TRACE' "$tmp/err" &&
  grep -q "run 'loom report --help'" "$tmp/err" || fail "loom report without a trace"
# --help after options and their values, not after record's program or "--".
"$loom" report --top 5 --help | head -1 | grep -q '^usage: loom report' ||
  fail "loom report --top 5 --help"
"$loom" record -o /nonexistent/x.json -- sh -c 'echo prog-ran' --help 2>&1 | grep -q 'usage:' &&
  fail "loom record -- PROGRAM --help printed loom's help"
[ $bad -eq 0 ] && echo "help, man pages and parsers agree"
exit $bad
