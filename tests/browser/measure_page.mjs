// Measures the Sessions page in chromium (driven by `cargo bench --bench web_page`):
// - the first load: bytes the browser received (as transferred: headers and bodies) and the time
//   from navigation to the first rows, for a user already signed in (the token in the
//   tab's storage), over `loads` fresh tabs;
// - a page left open `seconds` while sessions change (a session launched and one
//   terminated every `every` ms through the API): the page's JS heap and DOM nodes at the
//   start, at its largest and at the end (after a garbage collection), and how many
//   rows it showed.
// Prints one JSON line. Usage: node measure_page.mjs <http://127.0.0.1:port> <token> <loads> <seconds> <every-ms>
import { launchBrowser } from './launch.mjs';
import { api } from './api.mjs';

const [base, token, loadsArg, secondsArg, everyArg] = process.argv.slice(2);
const loads = Number(loadsArg ?? 5);
const seconds = Number(secondsArg ?? 600);
const every = Number(everyArg ?? 3000);
const browser = await launchBrowser();
const out = { loads: [], soak: {} };

async function tab() {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  await context.addInitScript((t) => sessionStorage.setItem('sessiond.page.token', t), token);
  return context.newPage();
}

const gql = (query, variables) => api(base, token, query, variables);

try {
  for (let i = 0; i < loads; i += 1) {
    const page = await tab();
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.enable');
    let transferred = 0;
    cdp.on('Network.loadingFinished', (e) => {
      transferred += e.encodedDataLength;
    });
    const t = Date.now();
    await page.goto(new URL('/project/default/session', base).href);
    await page.locator('#table tbody tr').first().waitFor({ timeout: 30000 });
    const firstRowsMs = Date.now() - t;
    await page.waitForTimeout(500);
    out.loads.push({ firstRowsMs, transferred });
    await page.context().close();
  }

  const page = await tab();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const metrics = async () => {
    const m = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((x) => [x.name, x.value]));
    return { heap: m.JSHeapUsedSize, nodes: m.Nodes, listeners: m.JSEventListeners };
  };
  await page.goto(new URL('/project/default/session', base).href);
  await page.locator('#table tbody tr').first().waitFor({ timeout: 30000 });
  const viewer = await gql('{ viewer { projects { id name } } }', {});
  const project = viewer.viewer.projects.find((p) => p.name === 'default').id;
  await page.waitForTimeout(2000);
  await cdp.send('HeapProfiler.collectGarbage');
  const start = await metrics();
  let largest = { ...start };
  let launched = 0;
  let terminated = 0;
  const ids = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const l = await gql(
      `mutation($p: ID!, $n: String!) { launchSession(input: { projectId: $p, name: $n, image: "python:3.12",
        resources: [{ slot: "cpu", amount: 0.5 }, { slot: "mem", amount: 536870912 }] }) { session { id } } }`,
      { p: project, n: `soak-${launched}` },
    );
    launched += 1;
    ids.push(l.launchSession.session.id);
    if (ids.length > 4) {
      await gql('mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }', { ids: [ids.shift()] });
      terminated += 1;
    }
    await page.waitForTimeout(every);
    const m = await metrics();
    for (const k of Object.keys(largest)) largest[k] = Math.max(largest[k], m[k]);
  }
  await page.waitForTimeout(3000);
  await cdp.send('HeapProfiler.collectGarbage');
  out.soak = {
    seconds,
    launched,
    terminated,
    start,
    largest,
    end: await metrics(),
    rowsShown: await page.locator('#table tbody tr[data-session]').count(),
    finishedTab: await page.locator('#tab-finished').innerText(),
  };
  for (const id of ids) await gql('mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }', { ids: [id] });
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
