// The Kiln tuning dashboard: jobs, their tasks and tuning curves, the farm and the tuning log,
// from kilnd's JSON API (/api/v1/, docs/dashboard.md), refreshed by polling.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './style.css';

const TOKEN_KEY = 'kiln-dashboard-token';
const POLL_MS = 2000;
const COLORS = ['#2f6fdf', '#d03c3c', '#1f9d55', '#c98a00', '#8e44ad', '#00838f', '#e67e22', '#546e7a'];

const main = document.getElementById('main');
const state = { view: 'jobs', jobId: null, logScale: true, metric: 'latency', timer: null, chart: null, chartKey: '' };

class Unauthorized extends Error {}

async function api(path, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) throw new Unauthorized('no token');
  const response = await fetch('/api/v1/' + path, {
    ...options,
    headers: { Authorization: 'Bearer ' + token, ...(options.headers || {}) },
  });
  if (response.status === 401) throw new Unauthorized((await response.json()).error);
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}
const getJson = async (path) => (await api(path)).json();

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.className = v;
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function duration(s) {
  if (!s || s <= 0 || !isFinite(s)) return '—';
  if (s < 60) return s.toFixed(0) + ' s';
  if (s < 3600) return (s / 60).toFixed(1) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function latency(s) {
  if (s === null || s === undefined) return '—';
  const p = (x) => String(+x.toPrecision(3));
  if (s < 1e-6) return p(s * 1e9) + ' ns';
  if (s < 1e-3) return p(s * 1e6) + ' µs';
  if (s < 1) return p(s * 1e3) + ' ms';
  return p(s) + ' s';
}
function count(x) {
  if (!x) return '—';
  for (const [unit, scale] of [['G', 1e9], ['M', 1e6], ['k', 1e3]]) if (x >= scale) return (x / scale).toFixed(1) + unit;
  return String(x);
}
const times = (x) => (x === null || x === undefined ? '—' : x.toFixed(2) + '×');
const errorList = (errors) =>
  el('span', { class: 'errors' }, Object.entries(errors || {}).sort((a, b) => b[1] - a[1]).map(([k, n]) => el('span', {}, `${k} ${n}`)));

// --- login ------------------------------------------------------------------------------------
function showLogin(message) {
  stopPolling();
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById('forget').hidden = true;
  const input = el('input', { type: 'password', id: 'token', placeholder: 'token', autocomplete: 'off' });
  const form = el('form', { class: 'login', id: 'login' },
    el('section', {},
      el('h2', {}, 'Token'),
      el('p', { class: 'muted' }, 'The service’s token (its --token-file). It is kept for this browser tab only.'),
      message ? el('p', { class: 'error' }, message) : null,
      input,
      el('button', { type: 'submit' }, 'Open')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  });
  main.replaceChildren(form);
  input.focus();
}

// --- jobs -------------------------------------------------------------------------------------
async function act(job, action) {
  try {
    await api(`jobs/${job.id}/${action}`, { method: 'POST' });
  } catch (e) {
    if (e instanceof Unauthorized) return showLogin(e.message);
    alert(`${action} failed: ${e.message}`);
  }
  refresh();
}

function jobRow(job) {
  const active = ['running', 'pending', 'waiting'].includes(job.state);
  const pct = (100 * job.progress).toFixed(1);
  return el('tr', { class: 'job' + (job.id === state.jobId ? ' selected' : ''), 'data-job': job.id, 'data-state': job.state,
                    onclick: () => { state.jobId = job.id; state.chartKey = ''; refresh(); } },
    el('td', { class: 'num' }, job.id),
    el('td', {}, el('b', {}, job.name), el('div', { class: 'message' }, job.message || job.target)),
    el('td', {}, el('span', { class: 'badge ' + job.state }, job.state)),
    el('td', { class: 'num' }, job.priority),
    el('td', {}, el('span', { class: 'bar' }, el('div', { style: `width:${pct}%` })),
      el('span', { class: 'pct progress', 'data-progress': job.progress }, `${job.trials_done} / ${job.trials_total} (${pct}%)`)),
    el('td', { class: 'num' }, job.trials_per_s > 0 ? job.trials_per_s.toFixed(2) : '—'),
    el('td', { class: 'num' }, active ? duration(job.eta_s) : '—'),
    el('td', { class: 'num' }, times(job.weighted_speedup)),
    el('td', {}, errorList(job.errors)),
    el('td', { onclick: (e) => e.stopPropagation() },
      el('button', { 'data-action': 'pause', disabled: !active, onclick: () => act(job, 'pause') }, 'Pause'), ' ',
      el('button', { 'data-action': 'resume', disabled: !['paused', 'failed', 'pending'].includes(job.state), onclick: () => act(job, 'resume') }, 'Resume'), ' ',
      el('button', { 'data-action': 'cancel', disabled: ['done', 'cancelled'].includes(job.state), onclick: () => act(job, 'cancel') }, 'Cancel')));
}

function tasksTable(job) {
  return el('table', { id: 'tasks' },
    el('thead', {}, el('tr', {}, ['Task', 'Workload', 'Weight', 'Trials', 'Valid', 'Default', 'Best', 'Speedup', 'Errors']
      .map((h, i) => el('th', { class: i >= 2 && i <= 7 ? 'num' : null }, h)))),
    el('tbody', {}, job.tasks.map((t) => el('tr', {},
      el('td', {}, t.name, t.done ? el('div', { class: 'message' }, t.done) : null),
      el('td', {}, el('code', { title: t.workload_key }, t.workload_key.slice(0, 12))),
      el('td', { class: 'num' }, t.weight),
      el('td', { class: 'num' }, t.trials),
      el('td', { class: 'num' }, t.trials ? (100 * t.valid_fraction).toFixed(0) + '%' : '—'),
      el('td', { class: 'num' }, latency(t.default_s)),
      el('td', { class: 'num' }, latency(t.best_s)),
      el('td', { class: 'num' }, times(t.speedup)),
      el('td', {}, errorList(t.errors))))));
}

// Labels that tell tasks of the same name apart by their workload key.
function curveLabels(curves) {
  const seen = {};
  for (const c of curves) seen[c.name] = (seen[c.name] || 0) + 1;
  return curves.map((c) => (seen[c.name] > 1 && c.workload_key ? `${c.name} ${c.workload_key.slice(0, 6)}` : c.name));
}

function drawCurves(container, curves) {
  const latencyMode = state.metric === 'latency';
  const length = Math.max(0, ...curves.map((c) => c.best_gflops.length));
  const xs = Array.from({ length }, (_, i) => i + 1);
  // Latency in the unit that suits the slowest best-so-far.
  const slowest = Math.max(0, ...curves.flatMap((c) => c.best_s.filter((v) => v !== null)));
  const [unit, scale] = slowest >= 1 ? ['s', 1] : slowest >= 1e-3 ? ['ms', 1e3] : ['µs', 1e6];
  const series = curves.map((c) => {
    const values = latencyMode ? c.best_s.map((v) => (v === null ? null : v * scale)) : c.best_gflops.map((v) => (v > 0 ? v : null));
    return xs.map((_, i) => (i < values.length ? values[i] : null));
  });
  const points = series.reduce((n, s) => n + s.filter((v) => v !== null).length, 0);
  container.setAttribute('data-points', points);
  const labels = curveLabels(curves);
  const key = [state.jobId, state.metric, state.logScale, unit, labels.join('|')].join(';');
  const data = [xs, ...series];
  if (state.chart && state.chartKey === key && container.contains(state.chart.root)) {
    state.chart.setData(data);
    return;
  }
  if (state.chart) state.chart.destroy();
  container.replaceChildren();
  state.chartKey = key;
  const width = Math.max(400, container.clientWidth || 900);
  const yUnit = latencyMode ? unit : 'GFLOPS';
  const short = (v) => (v === null || v === undefined ? '' : String(+v.toPrecision(3)));
  state.chart = new uPlot({
    width, height: 320,
    scales: { x: { time: false }, y: { distr: state.logScale ? 3 : 1 } },
    axes: [
      { label: 'trials', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] },
      { label: latencyMode ? `best latency (${unit})` : 'best GFLOPS', size: 70, values: (u, splits) => splits.map(short) },
    ],
    series: [{ label: 'trial' }, ...curves.map((c, i) => ({
      label: labels[i], stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, points: { show: false },
      value: (u, v) => (v === null || v === undefined ? '—' : `${short(v)} ${yUnit}`),
    }))],
  }, data, container);
}

async function renderJobs() {
  const { jobs } = await getJson('jobs');
  if (state.jobId === null || !jobs.some((j) => j.id === state.jobId)) {
    const pick = jobs.find((j) => j.state === 'running') || jobs[jobs.length - 1];
    state.jobId = pick ? pick.id : null;
  }
  const list = el('section', { id: 'jobs' }, el('h2', {}, 'Jobs'),
    jobs.length === 0 ? el('p', { class: 'muted' }, 'No jobs yet: submit one with kiln tune --daemon.') :
      el('table', {},
        el('thead', {}, el('tr', {}, ['#', 'Job', 'State', 'Priority', 'Progress', 'Trials/s', 'ETA', 'Speedup', 'Errors', '']
          .map((h, i) => el('th', { class: [0, 3, 5, 6, 7].includes(i) ? 'num' : null }, h)))),
        el('tbody', {}, [...jobs].reverse().map(jobRow))));
  if (state.jobId === null) return [list];

  const [job, curves] = await Promise.all([getJson(`jobs/${state.jobId}`), getJson(`jobs/${state.jobId}/curves`)]);
  let chartBox = document.getElementById('curves');
  if (!chartBox || chartBox.dataset.job !== String(state.jobId)) {
    chartBox = el('div', { id: 'curves', class: 'chart', 'data-job': state.jobId });
    state.chartKey = '';
  }
  const toggles = el('div', { class: 'toolbar' },
    el('label', {}, el('input', { type: 'checkbox', id: 'logscale', checked: state.logScale,
      onchange: (e) => { state.logScale = e.target.checked; refresh(); } }), ' log scale'),
    el('label', {}, el('select', { id: 'metric', onchange: (e) => { state.metric = e.target.value; refresh(); } },
      el('option', { value: 'latency', selected: state.metric === 'latency' }, 'best latency'),
      el('option', { value: 'gflops', selected: state.metric === 'gflops' }, 'best GFLOPS'))),
    el('span', {}, 'best so far after each trial, one line per task'));
  const detail = el('section', { id: 'job-detail' },
    el('h2', {}, `Job ${job.id}: ${job.name} `, el('span', { class: 'badge ' + job.state }, job.state)),
    el('div', { class: 'cards' },
      [['trials', `${job.trials_done} / ${job.trials_total}`], ['trials/s', job.trials_per_s > 0 ? job.trials_per_s.toFixed(2) : '—'],
       ['ETA', ['running', 'waiting', 'pending'].includes(job.state) ? duration(job.eta_s) : '—'], ['elapsed', duration(job.elapsed_s)],
       ['weighted speedup', times(job.weighted_speedup)], ['target', job.target], ['device', job.device_key]]
        .map(([k, v]) => el('div', { class: 'card' }, el('b', {}, v), el('span', {}, k)))),
    el('h2', {}, 'Tuning curves'), toggles, chartBox,
    el('h2', {}, 'Tasks'), tasksTable(job));
  return [list, detail, () => drawCurves(chartBox, curves.curves)];
}

// --- farm -------------------------------------------------------------------------------------
async function renderFarm() {
  const farm = await getJson('farm');
  const body = [el('h2', {}, 'Farm')];
  if (!farm.farm) {
    body.push(el('p', { class: 'muted' }, `This service measures ${farm.measuring}; it has no farm.`));
  } else if (!farm.reachable) {
    body.push(el('p', { class: 'error' }, `The tracker cannot be reached: ${farm.error}`));
  } else {
    body.push(el('p', { class: 'muted' }, `Measuring ${farm.measuring}.`));
    body.push(el('table', { id: 'devices' },
      el('thead', {}, el('tr', {}, ['Device key', 'Free', 'Busy', 'Quarantined', 'Waiting requests', 'Targets']
        .map((h, i) => el('th', { class: i >= 1 && i <= 4 ? 'num' : null }, h)))),
      el('tbody', {}, farm.devices.map((d) => el('tr', {},
        el('td', {}, el('b', {}, d.device_key)),
        el('td', { class: 'num' }, d.free),
        el('td', { class: 'num' }, d.busy ? el('span', { class: 'badge running' }, d.busy) : 0),
        el('td', { class: 'num' }, d.quarantined ? el('span', { class: 'badge quarantined' }, d.quarantined) : 0),
        el('td', { class: 'num' }, d.queue_length),
        el('td', { class: 'wrap' }, d.targets.map((t) => el('div', {}, el('code', {}, t)))))))));
  }
  const runners = farm.runners || [];
  const runnerSection = el('section', { id: 'runners' }, el('h2', {}, 'Runners'),
    el('p', { class: 'muted' }, 'State, heartbeat and leases from the tracker; trials and failures from the tuning log.'),
    runners.length === 0 ? el('p', { class: 'muted' }, 'No runner is registered and the tuning log holds no measurement with a runner yet.') :
      el('table', {},
        el('thead', {}, el('tr', {}, ['Runner', 'Device key', 'State', 'Last heartbeat', 'Leases', 'Trials measured', 'Failed',
          'Last measurement', 'Failures by class']
          .map((h, i) => el('th', { class: i >= 4 && i <= 6 ? 'num' : null }, h)))),
        el('tbody', {}, runners.map(runnerRow))));
  return [el('section', { id: 'farm' }, body), runnerSection];
}

// A runner's row: what the tracker says of it (null fields when it does not have it) and what the
// tuning log holds of it.
function runnerRow(r) {
  const failed = Object.values(r.failures).reduce((a, b) => a + b, 0);
  const registered = r.state !== null && r.state !== undefined;
  const ago = (s) => `${s < 10 ? s.toFixed(1) : Math.round(s)} s ago`;
  const why = r.state === 'quarantined'
    ? el('div', { class: 'message' }, r.quarantine_reason + (r.quarantine_left_s > 0 ? ` (${duration(r.quarantine_left_s)} left)` : ''))
    : null;
  const leaseNotes = registered && (r.leases_failed || r.leases_expired)
    ? el('div', { class: 'message' }, `${r.leases_failed} failed, ${r.leases_expired} expired`) : null;
  return el('tr', { 'data-runner': r.runner, 'data-state': registered ? r.state : 'unregistered' },
    el('td', {}, el('code', {}, r.runner), registered ? el('div', { class: 'message' }, r.address) : null),
    el('td', {}, registered ? r.device_key : '—'),
    el('td', { class: 'state' }, registered
      ? el('span', { class: `badge ${r.state}`, title: r.quarantine_reason || null }, r.state)
      : el('span', { class: 'badge', title: 'the tracker does not have this runner now' }, 'not registered'), why),
    el('td', { class: 'heartbeat' }, registered ? ago(r.last_heartbeat_s_ago) : '—'),
    el('td', { class: 'num' }, registered ? r.leases_served : '—', leaseNotes),
    el('td', { class: 'num trials' }, r.trials),
    el('td', { class: 'num' }, failed ? el('span', { class: 'badge failed' }, failed) : 0),
    el('td', {}, r.last_measured ? new Date(r.last_measured * 1000).toLocaleString() : '—'),
    el('td', {}, errorList(r.failures)));
}

// --- tuning log -------------------------------------------------------------------------------
async function download(path, filename) {
  try {
    const blob = await (await api(path)).blob();
    const a = el('a', { href: URL.createObjectURL(blob), download: filename });
    document.body.append(a);
    a.click();
    a.remove();
  } catch (e) {
    if (e instanceof Unauthorized) return showLogin(e.message);
    alert(e.message);
  }
}

async function showBest(key, cell) {
  const { best } = await getJson('log/best?workload=' + encodeURIComponent(key));
  cell.replaceChildren(best.length === 0 ? 'no valid record' :
    el('table', {}, best.map((b) => el('tr', {},
      el('td', { class: 'wrap' }, el('code', {}, b.target)), el('td', {}, b.device_key), el('td', { class: 'num' }, latency(b.mean_s)),
      el('td', {}, el('code', {}, JSON.stringify(b.record.config || b.record.knobs || '')))))));
}

async function renderLog() {
  const q = state.search || '';
  const log = await getJson('log' + (q ? '?q=' + encodeURIComponent(q) : ''));
  const search = el('input', { type: 'search', id: 'search', placeholder: 'search workloads (template or key)', value: q });
  search.addEventListener('change', () => { state.search = search.value; refresh(); });
  const rows = log.workloads.map((w) => {
    const bestCell = el('td', { colspan: 7 });
    const bestRow = el('tr', { hidden: true }, bestCell);
    return [el('tr', {},
      el('td', {}, w.template), el('td', {}, el('code', { title: w.args }, w.key.slice(0, 16))),
      el('td', { class: 'num' }, count(w.flop)),
      el('td', { class: 'num' }, w.records), el('td', { class: 'num' }, w.valid), el('td', { class: 'num' }, latency(w.best_s)),
      el('td', {},
        el('a', { href: '#/log', onclick: (e) => { e.preventDefault(); bestRow.hidden = !bestRow.hidden; if (!bestRow.hidden) showBest(w.key, bestCell); } }, 'best per target'), ' · ',
        el('a', { href: '#/log', onclick: (e) => { e.preventDefault(); download('log/export?workload=' + encodeURIComponent(w.key), `kiln-${w.key.slice(0, 16)}.jsonl`); } }, 'export'))),
      bestRow];
  });
  return [el('section', { id: 'log' },
    el('h2', {}, 'Tuning log'),
    el('div', { class: 'cards' }, [['records', log.records], ['valid', log.valid], ['jobs', log.jobs], ['targets', log.targets]]
      .map(([k, v]) => el('div', { class: 'card' }, el('b', {}, v), el('span', {}, k)))),
    el('div', { class: 'toolbar' }, 'Errors: ', errorList(log.errors)),
    el('div', { class: 'toolbar' }, search,
      el('a', { href: '#/log', onclick: (e) => { e.preventDefault(); download('log/export', 'kiln-records.jsonl'); } }, 'export the whole log')),
    el('table', { id: 'workloads' },
      el('thead', {}, el('tr', {}, ['Template', 'Workload', 'FLOP', 'Records', 'Valid', 'Best', ''].map((h, i) => el('th', { class: i >= 2 && i <= 5 ? 'num' : null }, h)))),
      el('tbody', {}, rows.flat())))];
}

// --- routing and polling ----------------------------------------------------------------------
const views = { jobs: renderJobs, farm: renderFarm, log: renderLog };

function stopPolling() {
  if (state.timer) clearTimeout(state.timer);
  state.timer = null;
}

let refreshing = false;
async function refresh() {
  stopPolling();
  if (refreshing) return;
  refreshing = true;
  try {
    const parts = await views[state.view]();
    const nodes = parts.filter((p) => p instanceof Node);
    // Keep what the user is typing in.
    const focused = document.activeElement && document.activeElement.id === 'search';
    if (!focused) main.replaceChildren(...nodes);
    for (const p of parts) if (typeof p === 'function') p();
    document.getElementById('forget').hidden = false;
    const service = document.getElementById('service');
    if (!service.textContent) getJson('service').then((s) => { service.textContent = `measuring ${s.measuring}`; }).catch(() => {});
    main.removeAttribute('data-error');
  } catch (e) {
    refreshing = false;
    if (e instanceof Unauthorized) return showLogin(e.message === 'no token' ? null : e.message);
    main.setAttribute('data-error', e.message);
    main.replaceChildren(el('section', {}, el('p', { class: 'error' }, e.message)));
  }
  refreshing = false;
  // The tuning log is refreshed when asked; jobs and the farm live.
  if (state.view !== 'log') state.timer = setTimeout(refresh, POLL_MS);
}

function route() {
  const view = (location.hash.match(/^#\/(\w+)/) || [])[1];
  state.view = views[view] ? view : 'jobs';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === state.view);
  if (state.chart) { state.chart.destroy(); state.chart = null; state.chartKey = ''; }
  if (!sessionStorage.getItem(TOKEN_KEY)) return showLogin();
  refresh();
}

document.getElementById('forget').addEventListener('click', () => showLogin());
window.addEventListener('hashchange', route);
route();
