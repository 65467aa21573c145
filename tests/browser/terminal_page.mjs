// The detail panel's terminal in a real browser: Alice opens her page, waits for session
// `<name>` (an interactive session of an engine that offers a terminal) to run, opens its
// detail, types a command into the terminal and reads the answer. Prints one JSON line.
// Usage: node terminal_page.mjs <http://127.0.0.1:port> <name>
import { openRunningSession } from './alice.mjs';
import { launchBrowser } from './launch.mjs';

const [base, name] = process.argv.slice(2);
const server = new URL(base);
const WAIT = { timeout: 60000 };
const report = { blocked: [], errors: [] };
const browser = await launchBrowser();
try {
  const { page } = await openRunningSession(browser, base, name, report, WAIT, server.host);
  await page.getByLabel('Terminal input').waitFor(WAIT);
  const output = page.locator('pre.terminal');
  await output.filter({ hasText: '$' }).waitFor(WAIT);
  await page.getByLabel('Terminal input').fill('echo answer-$((6*7))');
  await page.keyboard.press('Enter');
  await output.filter({ hasText: 'answer-42' }).waitFor(WAIT);
  report.terminal = await output.innerText();
} catch (e) {
  report.failure = String(e?.stack ?? e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
