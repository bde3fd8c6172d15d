#!/bin/sh
# Sets up, builds loom, and records the bundled example workload: a small
# network trained on the CPU whose ops are mirrored on the simulated device of
# the example plug-in.  Writes loom-sim-train.json (open it in
# https://ui.perfetto.dev or chrome://tracing) and shows what trace_processor
# finds in it.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/deps.sh"
build="$here/build-demo"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
out="$here/loom-sim-train.json"
LOOM_PLUGIN_PATH="$build/plugins" "$build/loom" backends
LOOM_PLUGINS= "$build/examples/loom-sim-train" "$out" 50
echo "trace_processor sees:"
node "$here/tests/tp/tp.mjs" --tp-dir "$LOOM_TP_DIR" "$out" \
  "select category, count(*) as slices, round(sum(dur)/1e6, 3) as ms from slice group by category order by slices desc" \
  "select count(*) as flows from flow" | node -e '
let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s).results;
for (const x of r[0]) console.log(`  ${x.category.padEnd(22)} ${String(x.slices).padStart(6)} slices ${String(x.ms).padStart(9)} ms`);
console.log(`  flows (host call -> device work): ${r[1][0].flows}`);});'
