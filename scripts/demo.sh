#!/bin/sh
# Sets up, builds loom, and records the bundled OpenCL workload (a small
# network evaluated batch by batch on POCL, two queues, host ops marked with
# loom's API) with `loom record`, checks the trace with Perfetto's
# trace_processor, and analyses it with `loom report`.  Writes
# loom-opencl-pipeline.json (open it in https://ui.perfetto.dev or
# chrome://tracing) and loom-opencl-pipeline.html (the report's page).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/deps.sh"
build="$here/build-demo"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
out="$here/loom-opencl-pipeline.json"
echo "== loom record -o $out -- loom-opencl-pipeline 24"
"$build/loom" record -o "$out" -- "$build/examples/loom-opencl-pipeline" 24
echo "== what trace_processor finds in it"
node "$here/tests/tp/tp.mjs" --tp-dir "$LOOM_TP_DIR" "$out" \
  "select category, count(*) as slices, round(sum(dur)/1e6, 3) as ms from slice group by category order by slices desc" \
  "select count(*) as flows from flow" \
  "select count(*) as n from slice where category = 'kernel' and extract_arg(arg_set_id, 'args.External id') is not null" \
  | node -e '
let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s).results;
for (const x of r[0]) console.log(`  ${x.category.padEnd(22)} ${String(x.slices).padStart(6)} slices ${String(x.ms).padStart(9)} ms`);
console.log(`  flows (host call -> device work): ${r[1][0].flows}`);
console.log(`  kernels linked to the framework op that launched them: ${r[2][0].n}`);});'
html="$here/loom-opencl-pipeline.html"
echo "== loom report $out --top 8 --html $html"
"$build/loom" report "$out" --top 8 --html "$html"
