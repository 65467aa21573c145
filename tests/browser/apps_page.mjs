// A session's web app in a real browser: Alice opens her page, opens session `<name>`'s
// detail, clicks "Open web": a tab of its own opens the app on the apps' origin. There, a
// page the app serves (`probe.html`) looks for what is the user's: `window.opener`, the
// Sessions page's stored token, the API. Prints one JSON line.
// Usage: node apps_page.mjs <http://api> <name>
import { openRunningSession } from './alice.mjs';
import { launchBrowser } from './launch.mjs';

const [base, name] = process.argv.slice(2);
const WAIT = { timeout: 60000 };
const report = { errors: [] };
const browser = await launchBrowser();
try {
  const { context, page } = await openRunningSession(browser, base, name, report, WAIT);
  // The row has a button for each of its web apps too.
  const row = page.locator('#table tbody tr').filter({ has: page.getByRole('button', { name, exact: true }) });
  report.rowApps = await row.locator('button.app').allInnerTexts();
  const open = page.locator('#detail button[data-app="web"]');
  await open.waitFor(WAIT);
  const [tab] = await Promise.all([context.waitForEvent('page', WAIT), open.click()]);
  await tab.waitForLoadState();
  report.appUrl = tab.url();
  // The app's own page, on the apps' origin.
  await tab.goto(new URL('probe.html', tab.url()).href);
  await tab.locator('#done').waitFor(WAIT);
  report.probe = JSON.parse(await tab.locator('#done').innerText());
} catch (e) {
  report.failure = String(e?.stack ?? e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
