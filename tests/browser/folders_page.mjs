// Folders on the Sessions page in a real browser: Alice opens "Folders", sees folder
// `data` with its use against its quota, opens it, downloads `seed.txt` and uploads
// `up.txt`; then launches a session mounting `data` read-only from the launcher's folder
// picker, and its detail panel lists the mount. Prints one JSON line.
// Usage: node folders_page.mjs <http://127.0.0.1:port>
import { launchBrowser } from './launch.mjs';

const [base] = process.argv.slice(2);
const server = new URL(base);
const WAIT = { timeout: 60000 };
const report = { blocked: [], errors: [] };
const browser = await launchBrowser();
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.host === server.host || url.protocol === 'blob:') return route.continue();
    report.blocked.push(url.href);
    return route.abort();
  });
  await context.addInitScript(() => sessionStorage.setItem('sessiond.page.token', 'demo-alice'));
  const page = await context.newPage();
  page.on('pageerror', (e) => report.errors.push(e.message));
  await page.goto(new URL('/project/default/session', base).href);

  // The folders, their use; a folder's files, downloaded and uploaded.
  await page.locator('#folders-button').click();
  const row = page.locator('#folders-list tr[data-folder="data"]');
  await row.waitFor(WAIT);
  report.use = await row.locator('td').nth(2).innerText();
  await row.getByRole('button', { name: 'data', exact: true }).click();
  const download = page.locator('#folders-list button[data-download="seed.txt"]');
  await download.waitFor(WAIT);
  const [file] = await Promise.all([page.waitForEvent('download', WAIT), download.click()]);
  report.downloaded = await new Promise((resolve, reject) => {
    file.createReadStream().then((stream) => {
      const chunks = [];
      stream.on('data', (c) => chunks.push(c));
      stream.on('end', () => resolve(Buffer.concat(chunks).toString()));
      stream.on('error', reject);
    }, reject);
  });
  await page.locator('input[data-upload="data"]').setInputFiles({ name: 'up.txt', mimeType: 'text/plain', buffer: Buffer.from('from the page') });
  await page.locator('#folders-line', { hasText: 'Uploaded up.txt.' }).waitFor(WAIT);
  await page.locator('#folders-list button[data-download="up.txt"]').waitFor(WAIT);
  await page.locator('#folders-close').click();

  // The launcher's folder picker, and the mount in the detail panel.
  await page.locator('#launch-button').click();
  await page.locator('#launch-mount-list input[type="checkbox"]').first().waitFor(WAIT);
  report.picker = await page.locator('#launch-mount-list').innerText();
  await page.locator('#launch-name').fill('with-data');
  await page.locator('#launch-mount-list input[type="checkbox"]').first().check();
  await page.getByLabel('How data is mounted').selectOption('ro');
  await page.locator('#launch-submit:not([disabled])').waitFor(WAIT);
  await page.locator('#launch-submit').click();
  await page.locator('#launcher').waitFor({ state: 'hidden', ...WAIT });
  const launched = page.getByRole('button', { name: 'with-data', exact: true });
  await launched.waitFor(WAIT);
  await launched.click();
  const mounts = page.locator('#detail p.mounts');
  await mounts.waitFor(WAIT);
  report.mounts = await mounts.innerText();
} catch (e) {
  report.failure = String(e?.stack ?? e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
