// A pull in a real browser: Alice's page shows session `<name>` (PULLING, its progress
// told by PULL_PROGRESS events) as `PULLING n %`, and the cell follows the events in place,
// without reading the list again; its detail panel shows a progress bar. Prints one JSON
// line. Usage: node pull_page.mjs <http://127.0.0.1:port> <name>
import { launchBrowser } from './launch.mjs';

const [base, name] = process.argv.slice(2);
const server = new URL(base);
const WAIT = { timeout: 60000 };
const report = { blocked: [], errors: [] };
const browser = await launchBrowser();
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  let listReads = 0;
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.host !== server.host) {
      report.blocked.push(url.href);
      return route.abort();
    }
    if ((route.request().postData() ?? '').includes('query SessionsPage')) listReads += 1;
    return route.continue();
  });
  await context.addInitScript(() => sessionStorage.setItem('sessiond.page.token', 'demo-alice'));
  const page = await context.newPage();
  page.on('pageerror', (e) => report.errors.push(e.message));
  await page.goto(new URL('/project/default/session', base).href);
  const row = page.locator('#table tbody tr').filter({ has: page.getByRole('button', { name, exact: true }) });
  const cell = row.locator('td[data-column="STATUS"]');
  await cell.filter({ hasText: /PULLING \d+ %/ }).waitFor(WAIT);
  report.first = (await cell.innerText()).trim();
  // The cell's next text, once it differs from `previous` and still says PULLING n %.
  const next = async (previous) => {
    await page.waitForFunction(
      ([n, before]) => {
        const rows = [...document.querySelectorAll('#table tbody tr')];
        const r = rows.find((tr) => tr.querySelector('button')?.textContent === n);
        const text = r?.querySelector('td[data-column="STATUS"]')?.textContent?.trim();
        return text && text !== before && /PULLING \d+ %/.test(text);
      },
      [name, previous],
      WAIT,
    );
    return (await cell.innerText()).trim();
  };
  // The feed's first events may meet the read it makes a moment after it connects (one
  // event may come before it); events come a second apart, so from the second on, none do.
  report.second = await next(report.first);
  report.third = await next(report.second);
  const readsBefore = listReads;
  report.fourth = await next(report.third);
  report.listReadsBetween = listReads - readsBefore;
  await row.getByRole('button', { name, exact: true }).click();
  const bar = page.locator('#detail progress');
  await bar.waitFor(WAIT);
  report.detailBar = { value: Number(await bar.getAttribute('value')), max: Number(await bar.getAttribute('max')) };
  report.detailText = (await page.locator('#detail p.pull').innerText()).trim();
} catch (e) {
  report.failure = String(e?.stack ?? e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
