// The Sessions page in a real browser (the system's chromium, driven by playwright-core;
// nothing beyond the server can be reached). Alice signs in, launches three sessions with
// "Launch Multiple Sessions" and sees them turn RUNNING without a reload, terminates one
// and sees it under Finished; Bob's page, open at the same time, never shows them; the
// admin's page shows them with their owner. Also: the panel's hover, column settings over
// a reload, the CSV download, a launch that cannot fit, the keyboard, axe-core, and
// screenshots. Prints one JSON line with what it saw; the Rust test asserts on it.
// Usage: node sessions_page.mjs <http://127.0.0.1:port> <artifact-dir>
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { launchBrowser } from './launch.mjs';
import { api } from './api.mjs';

const [base, artifacts] = process.argv.slice(2);
const server = new URL(base);
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const report = { blocked: [], errors: [], axe: {} };
const WAIT = { timeout: 30000 };
/** While the test cuts a tab off the server on purpose, its failed loads are expected. */
let outage = false;

const browser = await launchBrowser();

/** Alice's `sessionEvents` sockets, passed through so that the test can drop one: the
 * cursors the server sent, and the variables of each subscribe the page sent. */
const feed = { sockets: [], cursors: [], subscribes: [] };

async function passThrough(ws) {
  const server = ws.connectToServer();
  feed.sockets.push({ ws, server });
  ws.onMessage((m) => {
    try {
      const j = JSON.parse(m);
      if (j.type === 'subscribe' && j.payload.query.includes('sessionEvents')) feed.subscribes.push(j.payload.variables);
    } catch {}
    server.send(m);
  });
  server.onMessage((m) => {
    try {
      const cursor = JSON.parse(m).payload?.data?.sessionEvents?.cursor;
      if (cursor) feed.cursors.push(cursor);
    } catch {}
    ws.send(m);
  });
  ws.onClose(() => server.close());
  server.onClose((code, reason) => ws.close({ code, reason }));
}

/** A browser context of its own (a user's tab), signed in already unless `token` is null
 * (Alice, who signs in through the form). */
async function open(token, path) {
  // The page's policy allows no injected script; axe-core is injected into Alice's tab, so
  // hers bypasses it. Bob's and the admin's run under it, and report anything it blocks.
  const alice = token === null;
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, acceptDownloads: true, bypassCSP: alice });
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.host === server.host) return route.continue();
    report.blocked.push(url.href);
    return route.abort();
  });
  if (token) await context.addInitScript((t) => sessionStorage.setItem('sessiond.page.token', t), token);
  else await context.routeWebSocket(/\/graphql\/ws$/, passThrough);
  const page = await context.newPage();
  page.loaded = 0;
  page.on('response', async (r) => {
    try {
      page.loaded += (await r.body()).length;
    } catch {}
  });
  page.on('pageerror', (e) => report.errors.push(`${token}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !alice && !outage) report.errors.push(`${token}: console: ${m.text()}`);
  });
  await page.goto(new URL(path, base).href);
  return page;
}

/** The names in the list as shown now. */
async function names(page) {
  return page.locator('#table tbody td[data-column="NAME"]').allInnerTexts();
}

async function row(page, name) {
  return page.locator('#table tbody tr').filter({ has: page.getByRole('button', { name, exact: true }) });
}

/** One GraphQL request with `token`, outside the browser. */
const call = (token, query, variables) => api(base, token, query, variables);

async function axe(page, label) {
  await page.addScriptTag({ content: axeSource });
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help, targets: v.nodes.map((n) => n.html.slice(0, 200)) }));
  });
  report.axe[label] = result;
}

try {
  // Alice signs in through the form at `/` and lands on her default project's page.
  const loadStarted = Date.now();
  const alice = await open(null, '/');
  // A token the server refuses is said so, and nothing else shows.
  await alice.getByLabel('Access token').fill('not-a-token');
  await alice.getByRole('button', { name: 'Sign in' }).click();
  await alice.locator('#signin-error').waitFor({ state: 'visible', ...WAIT });
  report.badToken = { error: await alice.locator('#signin-error').innerText(), appShown: await alice.locator('#app').isVisible() };
  await alice.getByLabel('Access token').fill('demo-alice');
  await alice.getByRole('button', { name: 'Sign in' }).click();
  await alice.locator('#table tbody tr').first().waitFor(WAIT);
  report.firstRowsMs = Date.now() - loadStarted;
  report.aliceUrl = alice.url();
  report.who = await alice.locator('#who').innerText();
  report.countsBefore = { running: await alice.locator('#tab-running').innerText(), finished: await alice.locator('#tab-finished').innerText() };
  report.namesBefore = await names(alice);
  report.firstLoadBytes = alice.loaded;

  const bob = await open('demo-bob', '/project/default/session');
  await bob.locator('#table tbody tr').first().waitFor(WAIT);
  // Bob launches 25 small sessions (through the API): his page shows them 20 at a time.
  const projects = await call('demo-bob', '{ viewer { projects { id name } } }', {});
  const projectId = projects.viewer.projects.find((p) => p.name === 'default').id;
  // Five at a time: a keypair may have 20 waiting at once.
  for (let i = 0; i < 5; i += 1) {
    await call(
      'demo-bob',
      `mutation($p: ID!, $n: String!) { launchSessions(count: 5, input: { projectId: $p, name: $n, image: "python:3.12",
        resources: [{ slot: "cpu", amount: 0.5 }, { slot: "mem", amount: 536870912 }] }) { sessions { id } } }`,
      { p: projectId, n: `bob-p${i}` },
    );
    await bob.waitForTimeout(200);
  }
  // The newest (the last launched) first, once the live list has them all.
  await bob.getByRole('button', { name: 'bob-p4-5', exact: true }).waitFor(WAIT);
  await bob.locator('#table tbody tr[data-session]').nth(19).waitFor(WAIT);
  report.bobPage1 = await names(bob);
  await bob.getByRole('button', { name: 'Next page' }).click();
  await bob.locator('#table tbody tr[data-session]').first().filter({ hasNotText: report.bobPage1[0] }).waitFor(WAIT);
  await bob.waitForTimeout(300);
  report.bobPage2 = await names(bob);
  await bob.getByRole('button', { name: 'Previous page' }).click();
  await bob.getByRole('button', { name: report.bobPage1[0], exact: true }).waitFor(WAIT);
  report.bobPageBack = await names(bob);
  // Sorted by keyboard: the focus stays on the heading's button.
  await bob.getByRole('button', { name: 'Name', exact: true }).focus();
  await bob.keyboard.press('Enter');
  await bob.locator('th[aria-sort="ascending"]').waitFor(WAIT);
  await bob.waitForTimeout(300);
  report.bobByName = await names(bob);
  report.sortFocus = await bob.evaluate(() => document.activeElement?.dataset?.sort ?? document.activeElement?.tagName);
  const byName = await call(
    'demo-bob',
    `query($p: ID!) { sessions(projectId: $p, first: 20, filter: { tab: RUNNING }, orderBy: [{ field: NAME, direction: ASC }]) {
      edges { node { name } } } }`,
    { p: projectId },
  );
  report.apiByName = byName.sessions.edges.map((e) => e.node.name);
  // Back to the page as it opens (newest first), where Alice's would come first if shown.
  await bob.reload();
  await bob.locator('#table tbody tr[data-session]').nth(19).waitFor(WAIT);
  const admin = await open('demo-admin', '/admin/project/default/session');
  await admin.locator('#table tbody tr').first().waitFor(WAIT);
  const refused = await open('demo-bob', '/admin/project/default/session');
  await refused.locator('#notice').waitFor({ state: 'visible', ...WAIT });
  report.bobOnAdminPage = await refused.locator('#notice').innerText();
  report.refusedShows = {
    workspace: await refused.locator('#workspace').isVisible(),
    csv: await refused.locator('#csv-button').isVisible(),
    launch: await refused.locator('#launch-button').isVisible(),
    link: (await refused.locator('#view-link').isVisible()) ? await refused.locator('#view-link').getAttribute('href') : null,
  };
  // A superadmin, a member of nothing, lands on everyone's sessions of the default project.
  const root = await open('demo-root', '/');
  await root.locator('#table tbody tr').first().waitFor(WAIT);
  report.rootUrl = root.url();
  report.rootNotice = await root.locator('#notice').isVisible();
  report.rootLaunch = await root.locator('#launch-button').isVisible();
  report.rootProjects = await root.locator('#project-switch option').allInnerTexts();
  await root.context().close();

  // The first click of Launch in an outage: said so; once the server answers, Launch opens.
  outage = true;
  await bob.route('**/graphql', (r) => r.abort());
  await bob.getByRole('button', { name: 'Launch', exact: true }).click();
  await bob.locator('#status-line').filter({ hasText: 'could not open' }).waitFor(WAIT);
  report.outageLine = await bob.locator('#status-line').innerText();
  await bob.unroute('**/graphql');
  outage = false;
  await bob.getByRole('button', { name: 'Launch', exact: true }).click();
  await bob.locator('#launcher').waitFor({ state: 'visible', ...WAIT });
  report.launcherAfterOutage = true;
  await bob.keyboard.press('Escape');
  await bob.locator('#launcher').waitFor({ state: 'hidden', ...WAIT });

  // The panel: hovering the cpu bar shows every layer, the binding one named.
  const cpuBar = alice.locator('.bar[data-slot="cpu"]');
  await cpuBar.hover();
  await alice.locator('#tip-cpu').waitFor({ state: 'visible', ...WAIT });
  report.cpuTooltip = await alice.locator('#tip-cpu').innerText();
  await alice.mouse.move(0, 0);

  // The launcher: a request that cannot fit shows why before Launch is pressed.
  await alice.getByRole('button', { name: 'Launch', exact: true }).click();
  // Opened empty: no error yet, Launch not offered, the verdict says what is missing.
  await alice.locator('#verdict').filter({ hasText: 'Name the session' }).waitFor(WAIT);
  report.openedClean = {
    errors: await alice.locator('#launch-form .field-error').count(),
    launchDisabled: await alice.locator('#launch-submit').isDisabled(),
  };
  // A bad name, once typed, is shown at the name.
  await alice.getByLabel('Name', { exact: true }).fill('ab');
  await alice.locator('#launch-name-error').waitFor(WAIT);
  report.nameError = await alice.locator('#launch-name-error').innerText();
  report.nameInvalid = await alice.locator('#launch-name').getAttribute('aria-invalid');
  await alice.getByLabel('Name', { exact: true }).fill('page-multi');
  // Too little memory for the image: at the memory, in binary units.
  await alice.getByLabel('Memory (GiB)').fill('0.25');
  await alice.locator('#launch-mem-error').waitFor(WAIT);
  report.memError = await alice.locator('#launch-mem-error').innerText();
  report.cpuErrorWithMem = await alice.locator('#launch-cpu-error').count();
  await alice.getByLabel('Memory (GiB)').fill('1');
  await alice.getByLabel('CPU (cores)').fill('100000');
  await alice.locator('#verdict.verdict-bad, #verdict.verdict-wait').filter({ hasText: /cpu/i }).waitFor(WAIT);
  report.verdictTooBig = await alice.locator('#verdict').innerText();
  report.fieldErrors = await alice.locator('#launch-form .field-error').allInnerTexts();
  report.cpuError = await alice.locator('#launch-cpu-error').count();
  report.launchDisabledWhenBad = await alice.locator('#launch-submit').isDisabled();
  await alice.screenshot({ path: join(artifacts, 'sessions-page-launcher.png') });
  await axe(alice, 'launcher');
  // Three at once.
  await alice.getByLabel('CPU (cores)').fill('1');
  await alice.getByLabel('Launch Multiple Sessions').check();
  await alice.getByLabel('How many').fill('3');
  await alice.locator('#verdict.verdict-good').waitFor(WAIT);
  report.verdictFits = await alice.locator('#verdict').innerText();
  await alice.locator('#launch-submit').click();
  await alice.locator('#launcher').waitFor({ state: 'hidden', ...WAIT });
  const launched = ['page-multi-1', 'page-multi-2', 'page-multi-3'];
  // They appear and turn RUNNING with no reload.
  for (const name of launched) {
    await (await row(alice, name)).locator('td[data-column="STATUS"]:has-text("RUNNING")').waitFor(WAIT);
  }
  report.aliceSawRunning = true;

  // The connection drops: the page subscribes again from the last cursor it was sent.
  const seen = feed.cursors.at(-1);
  const before = feed.subscribes.length;
  for (const { ws } of feed.sockets) ws.close({ code: 1012, reason: 'dropped by the test' });
  await alice.locator('#live-state:has-text("Reconnecting")').waitFor(WAIT);
  await alice.locator('#live-state:has-text("Live")').waitFor(WAIT);
  report.resumedFrom = feed.subscribes.slice(before).map((v) => v.after);
  report.lastCursorBeforeDrop = seen;
  // The admin's page shows them with their owner, live too.
  for (const name of launched) {
    await (await row(admin, name)).waitFor(WAIT);
  }
  report.adminOwners = await Promise.all(
    launched.map(async (name) => (await row(admin, name)).locator('td[data-column="OWNER"]').innerText()),
  );
  // Bob's page, open all along, never shows them.
  await bob.waitForTimeout(500);
  report.bobNames = await names(bob);
  // The admin's CSV has whose each session is, as the admin's list does.
  const [adminCsv] = await Promise.all([admin.waitForEvent('download', WAIT), admin.getByRole('button', { name: 'Download CSV' }).click()]);
  report.adminCsvHeader = readFileSync(await adminCsv.path(), 'utf8').split('\n')[0];
  report.adminHeaders = await admin.locator('#table thead th').allInnerTexts();

  // Focus on a row's name stays there while live updates move the list.
  await (await row(alice, 'page-multi-1')).getByRole('button', { name: 'page-multi-1' }).focus();
  const aliceP = (await call('demo-alice', '{ viewer { projects { id name } } }', {})).viewer.projects.find((p) => p.name === 'default').id;
  await call(
    'demo-alice',
    `mutation($p: ID!) { launchSession(input: { projectId: $p, name: "page-moves", image: "python:3.12",
      resources: [{ slot: "cpu", amount: 0.5 }, { slot: "mem", amount: 536870912 }] }) { session { id } } }`,
    { p: aliceP },
  );
  await (await row(alice, 'page-moves')).locator('td[data-column="STATUS"]:has-text("RUNNING")').waitFor(WAIT);
  await alice.waitForTimeout(600);
  report.focusAfterLive = await alice.evaluate(() => {
    const a = document.activeElement;
    return { tag: a?.tagName, text: a?.textContent, row: a?.closest('tr')?.rowIndex ?? null };
  });
  await call('demo-alice', 'mutation($ids: [ID!]!) { terminateSessions(ids: $ids, force: true) { results { outcome } } }', {
    ids: [(await call('demo-alice', `query($p: ID!) { sessions(projectId: $p, filter: { nameContains: "page-moves" }) { edges { node { id } } } }`, { p: aliceP })).sessions.edges[0].node.id],
  });
  await (await row(alice, 'page-moves')).waitFor({ state: 'detached', ...WAIT });
  // A minute of elapsed time goes on without a read: the cell ticks.
  const elapsedCell = (await row(alice, 'page-multi-1')).locator('td[data-column="ELAPSED"]');
  const e1 = await elapsedCell.innerText();
  await alice.waitForTimeout(2100);
  report.elapsedTicks = [e1, await elapsedCell.innerText()];

  // A session that must wait shows why, and where it stands in the queue (then it goes).
  const aliceProject = (await call('demo-alice', '{ viewer { projects { id name } } }', {})).viewer.projects.find(
    (p) => p.name === 'default',
  ).id;
  const waiting = await call(
    'demo-alice',
    `mutation($p: ID!) { launchSession(input: { projectId: $p, name: "page-wait", image: "python:3.12",
      resources: [{ slot: "cpu", amount: 15 }, { slot: "mem", amount: 1073741824 }] }) { session { id } } }`,
    { p: aliceProject },
  );
  const waitingStatus = (await row(alice, 'page-wait')).locator('td[data-column="STATUS"]');
  await waitingStatus.locator('.reasons').filter({ hasText: /\S/ }).waitFor(WAIT);
  await waitingStatus.locator('.queue').waitFor(WAIT);
  report.waiting = {
    status: await waitingStatus.locator('.status').innerText(),
    queue: await waitingStatus.locator('.queue').innerText(),
    reasons: await waitingStatus.locator('.reasons').innerText(),
  };
  await call('demo-alice', 'mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }', {
    ids: [waiting.launchSession.session.id],
  });
  await (await row(alice, 'page-wait')).waitFor({ state: 'detached', ...WAIT });
  await alice.screenshot({ path: join(artifacts, 'sessions-page-list.png') });
  await axe(alice, 'list');

  // Terminate one: it leaves the Running tab and shows under Finished, no reload.
  await alice.getByLabel('Select page-multi-2').check();
  await alice.getByRole('button', { name: /Terminate 1 selected/ }).click();
  // Asked first; Cancel leaves it running.
  await alice.locator('#confirm-dialog').waitFor({ state: 'visible', ...WAIT });
  report.confirmTitle = await alice.locator('#confirm-title').innerText();
  await alice.locator('#confirm-cancel').click();
  await alice.waitForTimeout(300);
  report.cancelledKeepsIt = (await names(alice)).includes('page-multi-2');
  await alice.getByRole('button', { name: /Terminate 1 selected/ }).click();
  await alice.locator('#confirm-ok').click();
  await (await row(alice, 'page-multi-2')).waitFor({ state: 'detached', ...WAIT });
  report.terminateLine = await alice.locator('#status-line').innerText();
  report.runningAfter = await names(alice);
  await alice.getByRole('tab', { name: /Finished/ }).click();
  await (await row(alice, 'page-multi-2')).waitFor(WAIT);
  report.finishedAfter = await names(alice);
  report.countsAfter = { running: await alice.locator('#tab-running').innerText(), finished: await alice.locator('#tab-finished').innerText() };

  // Asked to terminate an ended one: said so, not counted as ended by this.
  await alice.getByLabel('Select page-multi-2').check();
  await alice.getByRole('button', { name: /Terminate 1 selected/ }).click();
  await alice.locator('#confirm-ok').click();
  await alice.locator('#status-line').filter({ hasText: 'already ended' }).waitFor(WAIT);
  report.finishedTerminateLine = await alice.locator('#status-line').innerText();

  // The CSV of the current view (Finished) holds the view's rows.
  const [download] = await Promise.all([alice.waitForEvent('download', WAIT), alice.getByRole('button', { name: 'Download CSV' }).click()]);
  report.csv = readFileSync(await download.path(), 'utf8');
  report.csvViewNames = await names(alice);

  // The detail panel.
  await alice.getByRole('tab', { name: /Running/ }).click();
  await (await row(alice, 'page-multi-1')).waitFor(WAIT);
  await (await row(alice, 'page-multi-1')).getByRole('button', { name: 'page-multi-1' }).click();
  await alice.locator('#detail .transitions li').first().waitFor(WAIT);
  report.detail = await alice.locator('#detail').innerText();
  await alice.screenshot({ path: join(artifacts, 'sessions-page-detail.png') });
  await axe(alice, 'detail');
  await alice.keyboard.press('Escape');
  await alice.locator('#detail').waitFor({ state: 'hidden', ...WAIT });

  // Column settings, by keyboard alone: show TYPE and move it to the top; kept over a reload.
  await alice.locator('#columns-button').focus();
  await alice.keyboard.press('Enter');
  await alice.locator('#columns-dialog').waitFor({ state: 'visible', ...WAIT });
  await alice.locator('li[data-column="TYPE"] input[type=checkbox]').focus();
  await alice.keyboard.press('Space');
  for (let i = 0; i < 30; i += 1) {
    const up = alice.locator('#up-TYPE');
    if (await up.isDisabled()) break;
    await up.focus();
    await alice.keyboard.press('Enter');
  }
  await alice.getByRole('button', { name: 'Save columns' }).focus();
  await alice.keyboard.press('Enter');
  await alice.locator('#columns-dialog').waitFor({ state: 'hidden', ...WAIT });
  await alice.reload();
  await alice.locator('#table tbody tr').first().waitFor(WAIT);
  report.headersAfterReload = await alice.locator('#table thead th').allInnerTexts();
  report.nameAlwaysShown = await alice.evaluate(async () => {
    document.getElementById('columns-button').click();
    await new Promise((r) => setTimeout(r, 100));
    const box = document.querySelector('li[data-column="NAME"] input[type=checkbox]');
    const disabled = box.disabled;
    document.getElementById('columns-cancel').click();
    return disabled;
  });

  // The keyboard alone: tabs move with the arrow keys; a launch (Enter on the launcher's
  // button, the name typed where the focus lands, Enter to launch) and its termination
  // (Space on its checkbox, Enter on Terminate).
  await alice.getByRole('tab', { name: /Running/ }).focus();
  await alice.keyboard.press('ArrowRight');
  report.keyboardTab = await alice.evaluate(() => document.activeElement?.id);
  await alice.keyboard.press('ArrowLeft');
  await alice.locator('#launch-button').focus();
  await alice.keyboard.press('Enter');
  await alice.locator('#launcher').waitFor({ state: 'visible', ...WAIT });
  report.launcherFocus = await alice.evaluate(() => document.activeElement?.id);
  await alice.keyboard.type('kbd-one');
  await alice.locator('#verdict.verdict-good').waitFor(WAIT);
  await alice.keyboard.press('Enter');
  await alice.locator('#launcher').waitFor({ state: 'hidden', ...WAIT });
  await (await row(alice, 'kbd-one')).waitFor(WAIT);
  await alice.getByLabel('Select kbd-one').focus();
  await alice.keyboard.press('Space');
  await alice.locator('#terminate-button').focus();
  await alice.keyboard.press('Enter');
  await alice.locator('#confirm-dialog').waitFor({ state: 'visible', ...WAIT });
  report.confirmFocus = await alice.evaluate(() => document.activeElement?.id);
  await alice.keyboard.press('Tab');
  await alice.keyboard.press('Enter');
  await (await row(alice, 'kbd-one')).waitFor({ state: 'detached', ...WAIT });
  report.keyboardLaunchedAndTerminated = true;

  // The resource panel's view is kept through the API.
  await alice.getByLabel('View').selectOption('TOTAL_IN_RESOURCE_GROUP');
  await alice.waitForTimeout(300);
  await alice.reload();
  await alice.locator('#table tbody tr').first().waitFor(WAIT);
  report.panelViewAfterReload = await alice.getByLabel('View').inputValue();

  // The detail panel, left open, follows its session from PENDING (set to start in 3 s)
  // to TERMINATED (a batch session ends by itself), its log line by line.
  const later = new Date(Date.now() + 3000).toISOString();
  const follow = await call(
    'demo-alice',
    `mutation($p: ID!, $at: DateTime!) { launchSession(input: { projectId: $p, name: "page-follow", image: "python:3.12",
      type: BATCH, startupCommand: "echo hi", startsAt: $at,
      resources: [{ slot: "cpu", amount: 0.5 }, { slot: "mem", amount: 536870912 }] }) { session { id } } }`,
    { p: aliceP, at: later },
  );
  const followId = follow.launchSession.session.id;
  await (await row(alice, 'page-follow')).getByRole('button', { name: 'page-follow' }).click();
  const badge = alice.locator('#detail .detail-summary .status');
  await badge.waitFor(WAIT);
  const statuses = [];
  const until = Date.now() + 30000;
  while (Date.now() < until) {
    const status = await badge.getAttribute('data-status').catch(() => null);
    if (status && statuses.at(-1) !== status) statuses.push(status);
    if (status === 'TERMINATED') break;
    await alice.waitForTimeout(50);
  }
  report.followed = statuses;
  await alice.locator('#detail .transitions li').filter({ hasText: '→ TERMINATED' }).waitFor(WAIT);
  report.followedTransitions = await alice.locator('#detail .transitions li').allInnerTexts();
  await alice.waitForTimeout(500);
  report.followedLogs = (await alice.locator('#detail pre.logs').innerText()).split('\n').filter((l) => l !== '');
  report.apiLogs = (await call('demo-alice', 'query($id: ID!) { session(id: $id) { logs(tail: 200) } }', { id: followId })).session.logs;
  await alice.keyboard.press('Escape');

  // A 390 px phone: every field of the launcher within the screen.
  await alice.setViewportSize({ width: 390, height: 844 });
  await alice.getByRole('button', { name: 'Launch', exact: true }).click();
  await alice.locator('#launcher').waitFor({ state: 'visible', ...WAIT });
  report.phoneFields = await alice.evaluate(() =>
    [...document.querySelectorAll('#launch-form input, #launch-form select, #launch-form textarea')]
      .filter((el) => el.offsetParent !== null)
      .map((el) => {
        const r = el.getBoundingClientRect();
        return { id: el.id, left: Math.round(r.left), right: Math.round(r.right) };
      }),
  );
  await alice.screenshot({ path: join(artifacts, 'sessions-page-phone.png') });
  await alice.keyboard.press('Escape');
} catch (e) {
  report.failure = String(e?.stack ?? e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
