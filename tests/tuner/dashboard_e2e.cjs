// Drives kilnd's dashboard in headless Chromium (playwright-core over the DevTools protocol), as
// dashboard_e2e_test.cpp asks: enters the token, waits for the job's row, its progress and a
// tuning curve with points, saves a screenshot, and presses the job's Pause button. Prints one
// JSON line of what it saw; exits 1 with the reason when something never appeared.
//   node dashboard_e2e.cjs URL TOKEN JOB_ID SCREENSHOT.png
const { chromium } = require('playwright-core');

const [url, token, jobId, screenshot] = process.argv.slice(2);

(async () => {
  const userDataDir = require('fs').mkdtempSync(require('path').join(require('os').tmpdir(), 'kiln-chromium-'));
  const browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.KILN_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1360, height: 1000 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const seen = {};
  const failures = [];
  // Every request the page makes: none may leave the service, and none may carry the token in its URL.
  const urls = [];
  browser.on('request', (r) => urls.push(r.url()));
  try {
    const page = browser.pages()[0] || (await browser.newPage());
    page.on('pageerror', (e) => failures.push('page error: ' + e.message));
    await page.goto(url);
    await page.waitForSelector('#token', { timeout: 15000 });
    seen.asked_for_token = true;
    await page.fill('#token', token);
    await page.click('#login button[type=submit]');
    const row = `tr[data-job="${jobId}"]`;
    await page.waitForSelector(row, { timeout: 15000 });
    seen.job_row = true;
    seen.job_name = await page.textContent(`${row} b`);
    // Progress: wait for trials measured.
    await page.waitForFunction((sel) => {
      const p = document.querySelector(`${sel} .progress`);
      return p && Number(p.dataset.progress) > 0;
    }, row, { timeout: 60000 });
    seen.progress_text = (await page.textContent(`${row} .progress`)).trim();
    seen.progress = Number(await page.getAttribute(`${row} .progress`, 'data-progress'));
    await page.waitForFunction(() => {
      const c = document.querySelector('#curves');
      return c && Number(c.dataset.points) > 1 && c.querySelector('canvas');
    }, null, { timeout: 60000 });
    seen.curve_points = Number(await page.getAttribute('#curves', 'data-points'));
    seen.curve_series = await page.$$eval('#curves .u-legend .u-series', (s) => s.length - 1);
    seen.task_rows = await page.$$eval('#tasks tbody tr', (rows) => rows.length);
    seen.session_token = await page.evaluate(() => sessionStorage.getItem('kiln-dashboard-token'));
    seen.page_url = page.url();
    await page.screenshot({ path: screenshot, fullPage: true });
    seen.screenshot = screenshot;
    await page.click(`${row} button[data-action=pause]`);
    // The row shows the job paused once the service has paused it.
    await page.waitForSelector(`${row}[data-state=paused]`, { timeout: 60000 });
    seen.paused_row = true;
    // The other views render.
    await page.goto(url + '#/farm');
    await page.waitForSelector('#farm', { timeout: 15000 });
    seen.farm_devices = await page.$$eval('#devices tbody tr', (rows) => rows.map((r) => r.cells[0].textContent));
    await page.waitForSelector('#runners', { timeout: 15000 });
    // Each runner's row: the tracker's state and heartbeat, merged with the log's trials.
    await page.waitForSelector('#runners tbody tr[data-state]:not([data-state=unregistered])', { timeout: 15000 });
    seen.runners = await page.$$eval('#runners tbody tr', (rows) => rows.map((r) => ({
      runner: r.dataset.runner,
      state: r.dataset.state,
      badge: r.querySelector('.state .badge').textContent,
      heartbeat: r.querySelector('.heartbeat').textContent,
      trials: Number(r.querySelector('.trials').textContent),
    })));
    await page.screenshot({ path: screenshot.replace(/\.png$/, '-farm.png'), fullPage: true });
    await page.goto(url + '#/log');
    await page.waitForSelector('#workloads', { timeout: 15000 });
    seen.log_workloads = await page.$$eval('#workloads tbody tr:not([hidden])', (rows) => rows.length);
    await page.screenshot({ path: screenshot.replace(/\.png$/, '-log.png'), fullPage: true });
  } catch (e) {
    failures.push(e.message.split('\n')[0]);
  } finally {
    await browser.close();
    require('fs').rmSync(userDataDir, { recursive: true, force: true });
  }
  seen.foreign_requests = urls.filter((u) => !u.startsWith(new URL(url).origin));
  seen.token_in_url = urls.some((u) => u.includes(token));
  seen.failures = failures;
  console.log(JSON.stringify(seen));
  process.exit(failures.length ? 1 : 0);
})();
