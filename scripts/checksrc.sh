#!/bin/sh
# checksrc.sh [SOURCE_DIR] - the source rules CI checks (ctest `checksrc`), as
# curl's checksrc does for curl: every C and C++ file in src/ tools/ backends/
# bridges/ python/ and include/ is checked for
#   (a) a function longer than 60 lines, from the line of its opening brace to
#       the line of its closing one (not in include/: headers hold no bodies
#       worth the name; see EXCEPTIONS below),
#   (b) a line wider than 100 columns,
#   (c) a tab, or whitespace at the end of a line.
# Each offence is printed as FILE:LINE: what; the exit status is 1 when there
# is any, 0 otherwise.  POSIX sh and awk only.
#
# Functions are found by their braces with comments, strings and character
# constants blanked out and preprocessor lines skipped: a `{` at file level,
# or directly inside a namespace, extern "C" block, class or struct, opens a
# function when the text before it (since the last `;`, `{` or `}`) holds a
# parenthesis and no `=` outside parentheses, so a signature may span lines.
set -u
top=${1:-$(dirname "$0")/..}
cd "$top" || exit 2

MAX_LINES=60
MAX_COLS=100
# file:function, then why it may be longer.  Keep this list short.
EXCEPTIONS='
src/export/json_scan.c:run the JSON tokenizer state machine: one switch over the states, each a few lines, read top to bottom as the grammar (docs/internals.md, fuzzed by fuzz_jscan)
'

files=$(find src tools backends bridges python include -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.hpp' \) 2>/dev/null | LC_ALL=C sort)
[ -n "$files" ] || { echo "checksrc: no sources under $top" >&2; exit 2; }

# shellcheck disable=SC2086 # one word per file name (the tree has no blanks in them)
printf '%s\n' "$EXCEPTIONS" | LC_ALL=C awk -v max_lines="$MAX_LINES" -v max_cols="$MAX_COLS" '
# The exceptions come first on stdin, one "file:function why" a line.
FILENAME == "-" { if (NF) { split($1, x, ":"); allowed[x[1] ":" x[2]] = 1 } next }

FNR == 1 { start_file() }

function start_file() {
  in_comment = 0; continued = 0; depth = 0; head = ""; nstack = 0
  check_bodies = (FILENAME !~ /^include\//)
}

function complain(line, what) {
  printf "%s:%d: %s\n", FILENAME, line, what
  bad++
}

# The line with comments, strings and character constants replaced by
# blanks (in_comment carries a block comment over to the next line).
function code_of(s,    out, i, c, n, q) {
  out = ""; n = length(s)
  for (i = 1; i <= n; i++) {
    c = substr(s, i, 1)
    if (in_comment) {
      if (c == "*" && substr(s, i + 1, 1) == "/") { in_comment = 0; i++ }
      out = out " "
    } else if (c == "/" && substr(s, i + 1, 1) == "*") {
      in_comment = 1; i++; out = out " "
    } else if (c == "/" && substr(s, i + 1, 1) == "/") {
      break
    } else if (c == "\"" || c == "\047") {
      q = c
      for (i++; i <= n && substr(s, i, 1) != q; i++)
        if (substr(s, i, 1) == "\\") i++
      out = out " "
    } else {
      out = out c
    }
  }
  return out
}

# 1 when the text before a `{` is a function signature.
function is_function(h,    i, c, d, paren) {
  gsub(/^[ \t]+|[ \t]+$/, "", h)
  if (h ~ /^(namespace|struct|union|enum|class|typedef)([ \t]|$)/) return 0
  d = 0; paren = 0
  for (i = 1; i <= length(h); i++) {
    c = substr(h, i, 1)
    if (c == "(") { d++; paren = 1 }
    else if (c == ")") d--
    else if (c == "=" && d == 0) return 0
  }
  return paren
}

# The function name in a signature: the identifier before its first `(`.
function name_of(h,    p) {
  p = index(h, "(")
  h = substr(h, 1, p - 1)
  sub(/[ \t]+$/, "", h)
  if (match(h, /[A-Za-z_~][A-Za-z0-9_:~]*$/)) return substr(h, RSTART, RLENGTH)
  return "?"
}

function is_container(h) {
  gsub(/^[ \t]+|[ \t]+$/, "", h)
  return h ~ /^(namespace|extern[ \t]*$|class|struct|union)([ \t]|$)/ || h ~ /^(typedef[ \t]+)?(struct|union|class)([ \t]|$)/
}

function open_brace(line,    kind) {
  # f: a function body; c: a scope functions are defined in; o: other
  if (nstack == 0 || stack[nstack] == "c") {
    if (is_function(head)) {
      kind = "f"; fstart = line; fname = name_of(head)
    } else if (is_container(head)) {
      kind = "c"
    } else {
      kind = "o"
    }
  } else {
    kind = "o"
  }
  stack[++nstack] = kind
  head = ""
}

function close_brace(line,    kind, len) {
  if (nstack == 0) return
  kind = stack[nstack--]
  if (kind == "f" && check_bodies) {
    len = line - fstart + 1
    if (len > max_lines && !((FILENAME ":" fname) in allowed))
      complain(fstart, "function " fname " is " len " lines (at most " max_lines ")")
  }
  head = ""
}

{
  raw = $0
  width = raw
  gsub(/[\200-\277]/, "", width) # UTF-8: one column per character
  if (length(width) > max_cols) complain(FNR, "line is " length(width) " columns (at most " max_cols ")")
  if (index(raw, "\t")) complain(FNR, "tab")
  if (raw ~ /[ \t\r]$/) complain(FNR, "whitespace at the end of the line")

  # preprocessor lines and their continuations hold no braces that count
  was_continued = continued
  continued = raw ~ /\\$/
  if (!in_comment && (was_continued || raw ~ /^[ \t]*#/)) next
  code = code_of(raw)
  n = length(code)
  for (i = 1; i <= n; i++) {
    c = substr(code, i, 1)
    if (c == "{") open_brace(FNR)
    else if (c == "}") close_brace(FNR)
    else if (c == ";") { if (nstack == 0 || stack[nstack] != "f") head = "" }
    else if (nstack == 0 || stack[nstack] == "c") head = head c
  }
  if (nstack == 0 || stack[nstack] == "c") head = head " "
}

END { exit bad ? 1 : 0 }
' - $files
