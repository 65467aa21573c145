// A real Jupyter server in a session, through the proxy, in chromium: Alice opens the
// session's detail and its "Open jupyter" button; in the app's tab, on the apps' origin,
// she creates a notebook, starts its kernel, and runs `1+1` over the kernel's WebSocket.
// Prints one JSON line. Usage: node jupyter_page.mjs <http://api> <name> <base path>
import { openRunningSession } from './alice.mjs';
import { launchBrowser } from './launch.mjs';

const [base, name, appBase] = process.argv.slice(2);
const WAIT = { timeout: 90000 };
const report = { errors: [] };
const browser = await launchBrowser();
try {
  const { context, page } = await openRunningSession(browser, base, name, report, WAIT);
  // Enabled once the app answers (READY): under load the library's copy and Jupyter's
  // start take a while.
  const open = page.locator('#detail button[data-app="jupyter"]:not([disabled])');
  await open.waitFor({ timeout: 240000 });
  const [tab] = await Promise.all([context.waitForEvent('page', WAIT), open.click()]);
  await tab.waitForLoadState();
  report.tabUrl = tab.url();
  report.run = await tab.evaluate(async (root) => {
    const at = new URL(root, location.href).href;
    const json = { 'content-type': 'application/json' };
    // The server may still be starting: its API answers once it listens.
    for (let i = 0; i < 300; i += 1) {
      const r = await fetch(`${at}api`);
      if (r.ok) break;
      await new Promise((done) => setTimeout(done, 200));
    }
    const nb = await (await fetch(`${at}api/contents`, { method: 'POST', headers: json, body: '{"type":"notebook"}' })).json();
    const session = await (
      await fetch(`${at}api/sessions`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ path: nb.path, type: 'notebook', name: nb.name, kernel: { name: 'python3' } }),
      })
    ).json();
    const ws = new WebSocket(`${at.replace(/^http/, 'ws')}api/kernels/${session.kernel.id}/channels?session_id=page`);
    const id = `run-${Date.now()}`;
    const result = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no result within 60 s')), 60000);
      ws.onerror = () => reject(new Error('the kernel WebSocket failed'));
      ws.onmessage = (m) => {
        const msg = JSON.parse(m.data);
        if (msg.parent_header?.msg_id === id && msg.msg_type === 'execute_result') {
          clearTimeout(timer);
          resolve(msg.content.data['text/plain']);
        }
      };
      ws.onopen = () =>
        ws.send(
          JSON.stringify({
            header: { msg_id: id, username: 'alice', session: 'page', msg_type: 'execute_request', version: '5.3' },
            parent_header: {},
            metadata: {},
            channel: 'shell',
            content: { code: '1+1', silent: false, store_history: true, user_expressions: {}, allow_stdin: false },
          }),
        );
    });
    ws.close();
    return { notebook: nb.path, kernel: session.kernel.name, result };
  }, appBase);
} catch (e) {
  report.failure = String(e?.stack ?? e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
