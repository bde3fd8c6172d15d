#!/bin/sh
# layers.sh - checks that every include points down the layers
# (docs/internals.md, "Layers").  Usage: sh scripts/layers.sh [REPO_ROOT]
#
# In src/, each folder has a rank; a file may include headers of its own
# folder, of folders of the same or a lower rank, and public headers
# (include/loom/*.h).  A backend (backends/<name>/) may include public
# headers, its own folder and backends/common/ only.  tools/, python/ and
# bridges/ may include public headers and src/util only.  Each offence is
# printed as FILE:LINE with the two folders; the exit status is 1 when there
# is any not in the allowlist below.  Includes that resolve to no file here
# (system and vendor headers, generated ones) are not checked.
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2

# The layers of src/, lowest first: folder and rank.
ranks='util 0
base 1
record 2
trace 3
core 4
export 5
window 6
salvage 6
ctl 7
session 8
merge 9
analysis 9'

# Private includes outside src/ that are known and being removed: FILE INCLUDE
# per line.  Delete a line when its include is gone; the check fails on a
# line that no longer matches anything, so the list only shrinks.
allow=''

echo "layers of src/ (a folder may include its own rank and below):"
echo "$ranks" | awk '{ printf "  %d %s\n", $2, $1 }' | sort -n

dirs="src backends tools python bridges"
srcs() {
  find $dirs -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.cc' \
    -o -name '*.in' \) 2>/dev/null | sort
}
# Every file here (to resolve includes), then every quoted include as
# "FILE:LINE:TEXT"; awk does the rest.
{
  find $dirs -type f | sed 's/^/F /'
  srcs | xargs grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' /dev/null | sed 's/^/I /'
} | awk -v ranks="$ranks" -v allow="$allow" '
function norm(path,   a, n, i, k, out) {
  n = split(path, a, "/"); k = 0
  for (i = 1; i <= n; i++) {
    if (a[i] == "." || a[i] == "") continue
    if (a[i] == ".." && k > 0 && p[k] != "..") { k--; continue }
    p[++k] = a[i]
  }
  out = p[1]; for (i = 2; i <= k; i++) out = out "/" p[i]
  return out
}
function dir(path) { sub(/\/[^\/]*$/, "", path); return path }
function offence(f, line, inc, msg,   key) {
  key = f " " inc
  if (key in allowed) { used[key] = 1; printf "  allowed for now: %s:%s: %s\n", f, line, msg }
  else { bad[++nbad] = f ":" line ": " msg }
}
BEGIN {
  n = split(ranks, r, "\n")
  for (i = 1; i <= n; i++) { split(r[i], kv, " "); rank[kv[1]] = kv[2] }
  n = split(allow, r, "\n")
  for (i = 1; i <= n; i++) if (r[i] != "") allowed[r[i]] = 1
}
$1 == "F" { have[$2] = 1; next }
{
  rest = substr($0, 3)
  f = rest; sub(/:.*/, "", f)
  line = rest; sub(/^[^:]*:/, "", line); sub(/:.*/, "", line)
  inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
  local = norm(dir(f) "/" inc)
  split(f, parts, "/")
  top = parts[1]
  if (top == "src") {
    from = parts[2]
    if (local in have) { split(local, q, "/"); to = q[2] }
    else if (("src/" inc) in have) { split(inc, q, "/"); to = q[1] }
    else next
    if (from == to) next
    if (!(from in rank) || !(to in rank))
      offence(f, line, inc, "src/" from " includes src/" to \
              ": a folder with no rank in scripts/layers.sh")
    else if (rank[to] + 0 > rank[from] + 0)
      offence(f, line, inc, sprintf("src/%s (rank %d) includes \"%s\" of src/%s (rank %d), " \
              "a higher layer", from, rank[from], inc, to, rank[to]))
  } else if (top == "backends") {
    own = "backends/" parts[2]
    if (local in have) {
      if (index(local, own "/") == 1 || index(local, "backends/common/") == 1) next
      offence(f, line, inc, own " includes \"" inc "\" of " dir(local) \
              ": a backend includes public headers, its own folder and backends/common only")
    } else if (("src/" inc) in have)
      offence(f, line, inc, own " includes \"" inc "\" of src/" dir(inc) \
              ": a backend is built against include/ only")
  } else {
    if (local in have) next
    if (!(("src/" inc) in have) || index(inc, "util/") == 1) next
    offence(f, line, inc, top "/" parts[2] " includes \"" inc "\" of src/" dir(inc) \
            ": only include/loom and src/util are theirs")
  }
}
END {
  status = 0
  if (nbad) {
    print "includes that point up or across:"
    for (i = 1; i <= nbad; i++) print "  " bad[i]
    status = 1
  }
  for (k in allowed) if (!(k in used)) {
    print "  allowlist line matches nothing (delete it): " k
    status = 1
  }
  if (!status) print "layers: every include points down"
  exit status
}'
