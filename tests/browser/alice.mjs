// Alice's Sessions page, signed in, with session `name`'s detail panel open once it runs:
// the start the browser checks of one session share. `report.errors` collects the page's
// script errors; with `only`, requests to any other host are blocked and listed in
// `report.blocked`.
export async function openRunningSession(browser, base, name, report, wait, only = null) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  if (only) {
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (url.host === only) return route.continue();
      report.blocked.push(url.href);
      return route.abort();
    });
  }
  await context.addInitScript(() => {
    if (location.pathname.startsWith('/project/')) sessionStorage.setItem('sessiond.page.token', 'demo-alice');
  });
  const page = await context.newPage();
  page.on('pageerror', (e) => report.errors.push(e.message));
  await page.goto(new URL('/project/default/session', base).href);
  const row = page.locator('#table tbody tr').filter({ has: page.getByRole('button', { name, exact: true }) });
  await row.locator('td[data-column="STATUS"]:has-text("RUNNING")').waitFor(wait);
  await row.getByRole('button', { name, exact: true }).click();
  return { context, page };
}
