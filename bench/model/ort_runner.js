// The ONNX Runtime peer of bench/model: times one model on the CPU execution provider.
// Usage: node ort_runner.js MODEL INPUT_RAW DIMS THREADS RUNS
//   INPUT_RAW: the input as raw little-endian float32 (or int64 when DIMS starts with "i64:")
// Prints one JSON line: {"median_ms":..., "p90_ms":..., "cpu_ms":..., "runs":N, "threads":T}, where
// cpu_ms is the process's CPU time per run (mean over the runs).
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, inputFile, dimsText, threadsText, runsText] = process.argv.slice(2);
  const threads = parseInt(threadsText, 10), runs = parseInt(runsText, 10);
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const int64 = dimsText.startsWith('i64:');
  const dims = (int64 ? dimsText.slice(4) : dimsText).split('x').map(Number);
  const buf = fs.readFileSync(inputFile);
  const data = int64 ? new BigInt64Array(buf.buffer, buf.byteOffset, buf.length / 8)
                     : new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const feeds = {};
  feeds[session.inputNames[0]] = new ort.Tensor(int64 ? 'int64' : 'float32', data, dims);
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
  console.log(JSON.stringify({median_ms: q(0.5), p90_ms: q(0.9), cpu_ms: (cpu.user + cpu.system) / 1e3 / runs, runs, threads}));
}
main().catch((e) => { console.error(String(e)); process.exit(1); });
