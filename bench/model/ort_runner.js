// The ONNX Runtime peer of bench/model: times one model on the CPU execution provider.
// Usage: node ort_runner.js MODEL INPUT_RAW DIMS THREADS RUNS [--profile PREFIX] [--overhead]
//   INPUT_RAW: the input as raw little-endian float32 (or int64 when DIMS starts with "i64:")
//   --profile: ONNX Runtime's profiler on (session option enableProfiling, its JSON trace written
//     under PREFIX and removed after reading); adds "nodes": each node's median kernel time over
//     the timed runs, [{"name", "op", "ms"}] in the order the session ran them.
//   --overhead: also times a trivial model (one Add of a 16-float tensor, built here) with the same
//     session options and runs: the binding's fixed cost per call, "overhead_ms" (median) and
//     "overhead_cpu_ms".
// Prints one JSON line: {"median_ms":..., "p90_ms":..., "cpu_ms":..., "runs":N, "threads":T, ...},
// where cpu_ms is the process's CPU time per run (mean over the runs).
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// Protocol-buffer encoding, enough for a one-node ONNX model.
function varint(n) {
  const out = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
const field = (tag, bytes) => [...varint(tag << 3 | 2), ...varint(bytes.length), ...bytes];
const fieldInt = (tag, n) => [...varint(tag << 3), ...varint(n)];
const text = (s) => [...Buffer.from(s, 'utf8')];

// y = x + x, x: float32[16].
function trivialModel() {
  const tensorType = field(1, [...fieldInt(1, 1), ...field(2, field(1, fieldInt(1, 16)))]);
  const valueInfo = (name) => field(1, text(name)).concat(field(2, field(1, tensorType.slice(2))));
  const node = [...field(1, text('x')), ...field(1, text('x')), ...field(2, text('y')), ...field(4, text('Add'))];
  const graph = [...field(1, node), ...field(2, text('trivial')), ...field(11, valueInfo('x')),
                 ...field(12, valueInfo('y'))];
  const opset = [...field(1, []), ...fieldInt(2, 13)];
  return Uint8Array.from([...fieldInt(1, 8), ...field(7, graph), ...field(8, opset)]);
}

function sessionOptions(threads, profilePrefix) {
  const o = {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  };
  if (profilePrefix) {
    o.enableProfiling = true;
    o.profileFilePrefix = profilePrefix;
  }
  return o;
}

// Median wall time, p90 and CPU time per run of `runs` calls, after 3 warm-up calls.
async function timeRuns(session, feeds, runs) {
  for (let i = 0; i < 3; ++i) await session.run(feeds);
  const times = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < runs; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const cpu = process.cpuUsage(cpu0);
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))];
  return {median_ms: q(0.5), p90_ms: q(0.9), cpu_ms: (cpu.user + cpu.system) / 1e3 / runs};
}

// Each node's median kernel time over the last `runs` runs of the trace (the warm-up runs first).
function nodeTimes(traceFile, runs) {
  const events = JSON.parse(fs.readFileSync(traceFile, 'utf8'));
  const byNode = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!byNode.has(name)) byNode.set(name, {op: (e.args && e.args.op_name) || '', us: []});
    byNode.get(name).us.push(e.dur);
  }
  const nodes = [];
  for (const [name, n] of byNode) {
    const us = n.us.slice(-runs).sort((a, b) => a - b);
    nodes.push({name, op: n.op, ms: us[Math.floor(us.length / 2)] / 1e3});
  }
  return nodes;
}

async function main() {
  const args = process.argv.slice(2);
  const [model, inputFile, dimsText, threadsText, runsText] = args;
  const threads = parseInt(threadsText, 10), runs = parseInt(runsText, 10);
  const pi = args.indexOf('--profile');
  const profilePrefix = pi >= 0 ? args[pi + 1] : '';
  const session = await ort.InferenceSession.create(model, sessionOptions(threads, profilePrefix));
  const int64 = dimsText.startsWith('i64:');
  const dims = (int64 ? dimsText.slice(4) : dimsText).split('x').map(Number);
  const buf = fs.readFileSync(inputFile);
  const data = int64 ? new BigInt64Array(buf.buffer, buf.byteOffset, buf.length / 8)
                     : new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const feeds = {};
  feeds[session.inputNames[0]] = new ort.Tensor(int64 ? 'int64' : 'float32', data, dims);
  const result = {...await timeRuns(session, feeds, runs), runs, threads};
  if (profilePrefix) {
    // The binding's endProfiling returns no file name: the trace is the one file named PREFIX_*.
    session.endProfiling();
    const dir = path.dirname(profilePrefix), base = path.basename(profilePrefix) + '_';
    const traces = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'));
    if (traces.length !== 1) throw new Error(`expected one profile trace ${profilePrefix}_*.json, found ${traces.length}`);
    result.nodes = nodeTimes(path.join(dir, traces[0]), runs);
    fs.unlinkSync(path.join(dir, traces[0]));
  }
  if (args.includes('--overhead')) {
    const trivial = await ort.InferenceSession.create(trivialModel(), sessionOptions(threads, ''));
    const x = {x: new ort.Tensor('float32', new Float32Array(16), [16])};
    const t = await timeRuns(trivial, x, runs);
    result.overhead_ms = t.median_ms;
    result.overhead_cpu_ms = t.cpu_ms;
  }
  console.log(JSON.stringify(result));
}
main().catch((e) => { console.error(String(e)); process.exit(1); });
