// The detail panel of one session: its status, scheduling history, status transitions, logs
// and, for an interactive session whose engine offers it to the viewer, a terminal. Left
// open, it follows the session: each event of it (a status change, a rename, an
// extension) reads it again, and its log grows line by line until it has ended.

import { ApiError, gql } from './api.js';
import { byId, bytes, fill, h, when } from './dom.js';
import { statusLabel, typeLabel } from './labels.js';
import { authorization, subscribe, type Subscription, wsUrl } from './live.js';

interface Detail {
  id: string;
  name: string;
  status: string;
  type: string;
  statusInfo: string | null;
  pull: { percent: number; bytesDone: number; bytesTotal: number; layersDone: number; layersTotal: number } | null;
  pendingReasons: { message: string }[];
  queuePosition: number | null;
  mounts: { path: string; readOnly: boolean }[];
  apps: { name: string; url: string | null; opens: boolean; status: string | null; statusInfo: string | null }[];
  statusTransitions: { fromStatus: string | null; toStatus: string; occurredAt: string; reason: string | null }[];
  schedulingHistory: {
    edges: {
      node: { phase: string; result: string; message: string; attempts: number; createdAt: string; lastTriedAt: string };
    }[];
  };
}

/** Where the panel's session is listed: its events come through that list's feed. */
export interface Listed {
  project: string;
  scope: 'MINE' | 'PROJECT';
}

const DETAIL = `query PageDetail($id: ID!) { session(id: $id) { id name status type statusInfo queuePosition
  pull { percent bytesDone bytesTotal layersDone layersTotal } pendingReasons { message } mounts { path readOnly }
  apps { name url opens status statusInfo }
  statusTransitions { fromStatus toStatus occurredAt reason }
  schedulingHistory(first: 50) { edges { node { phase result message attempts createdAt lastTriedAt } } } } }`;

/** Its last 200 lines, then each new one until it has ended (at once, if it has). */
const LOGS = `subscription PageLogs($id: ID!) { sessionLogs(sessionId: $id, tail: 200) }`;

const EVENTS = `subscription PageSessionEvents($p: ID!, $scope: SessionScope, $id: ID, $after: String) {
  sessionEvents(projectId: $p, scope: $scope, sessionId: $id, after: $after) { cursor kind toStatus }
}`;

/** What the open panel follows; closed with it. */
let open: {
  logs: Subscription | null;
  events: Subscription | null;
  terminal: WebSocket | null;
  timer?: number;
  poll?: number;
} = {
  logs: null,
  events: null,
  terminal: null,
};
/** Reads of the panel asked so far: an answer to an older one is dropped. */
let asked = 0;

function stop(): void {
  open.logs?.close();
  open.events?.close();
  open.terminal?.close(1000);
  window.clearTimeout(open.timer);
  window.clearTimeout(open.poll);
  open = { logs: null, events: null, terminal: null };
  asked += 1;
}

/** Opens the panel for session `id`, listed in `listed`, and follows it while open. */
export async function openDetail(id: string, name: string, listed: Listed): Promise<void> {
  stop();
  const panel = byId<HTMLDialogElement>('detail');
  const body = byId('detail-body');
  fill(byId('detail-title'), name);
  const summary = h('div', { class: 'detail-summary', 'aria-live': 'polite' }, h('p', {}, 'Loading…'));
  const logs = h('pre', { class: 'logs', role: 'log', tabindex: 0, 'aria-label': 'Logs' });
  const terminalSlot = h('div', {});
  fill(body, summary, h('h3', {}, 'Logs'), logs, terminalSlot);
  byId('detail-close').onclick = () => panel.close();
  panel.onclose = stop;
  if (!panel.open) panel.showModal();

  const read = async (): Promise<void> => {
    const ask = ++asked;
    let s: Detail | null;
    try {
      s = (await gql<{ session: Detail | null }>(DETAIL, { id })).session;
    } catch (e) {
      if (ask === asked) fill(summary, h('p', {}, e instanceof ApiError ? e.message : String(e)));
      return;
    }
    if (ask !== asked) return;
    if (!s) {
      fill(summary, h('p', {}, 'This session does not exist.'));
      return;
    }
    fill(byId('detail-title'), s.name);
    renderSummary(summary, s, id);
    // An app starting says nothing when it is ready: asked again until it says.
    window.clearTimeout(open.poll);
    if (s.apps.some((a) => a.status === 'STARTING')) open.poll = window.setTimeout(() => void read(), 2000);
    // Once offered (it runs now), the terminal opens; it stays as long as the panel.
    if (!open.terminal) {
      const app = s.apps.find((a) => a.name === 'terminal' && a.url);
      if (app?.url) fill(terminalSlot, terminalView(app.url));
    }
  };
  await read();

  // Each line on a line of its own, whenever it comes.
  open.logs = subscribe<{ sessionLogs: string }>(LOGS, {
    variables: () => ({ id }),
    next: (data) => {
      const stick = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
      logs.append(data.sessionLogs.endsWith('\n') ? data.sessionLogs : `${data.sessionLogs}\n`);
      if (stick) logs.scrollTop = logs.scrollHeight;
    },
    // The feed starts again with its tail after a drop: the lines start again too.
    state: (up) => {
      if (up) logs.replaceChildren();
    },
    error: () => false,
  });
  // Every event of this session reads the panel again (a burst, once).
  let cursor: string | null = null;
  open.events = subscribe<{ sessionEvents: { cursor: string } }>(EVENTS, {
    variables: () => ({ p: listed.project, scope: listed.scope, id, after: cursor }),
    next: (data) => {
      cursor = data.sessionEvents.cursor;
      window.clearTimeout(open.timer);
      open.timer = window.setTimeout(() => void read(), 150);
    },
    // Connected (again): what happened meanwhile is read at once.
    state: (up) => {
      if (up) void read();
    },
    error: (code) => code === 'LAGGED',
  });
}

const OPEN_APP = `mutation PageOpenApp($id: ID!, $name: String!) { openSessionApp(sessionId: $id, name: $name) { url } }`;

/** Opens a web app of the session in a tab of its own: on the apps' origin, with no way
 * back to this page (`noopener`). */
export async function openApp(id: string, name: string, line: HTMLElement = byId('status-line')): Promise<void> {
  try {
    const opened = await gql<{ openSessionApp: { url: string } }>(OPEN_APP, { id, name });
    window.open(opened.openSessionApp.url, '_blank', 'noopener,noreferrer');
    fill(line, '');
  } catch (e) {
    fill(line, e instanceof ApiError ? e.message : String(e));
  }
}

/** A button for each web app the session opens now. */
function appButtons(s: Detail, id: string): HTMLElement | null {
  const web = s.apps.filter((a) => a.opens);
  if (!web.length) return null;
  const line = h('span', { class: 'app-error', role: 'status' });
  return h(
    'p',
    { class: 'apps' },
    web.map((a) =>
      a.status === 'READY'
        ? h('button', { type: 'button', 'data-app': a.name, onclick: () => void openApp(id, a.name, line) }, `Open ${a.name}`)
        : h(
            'button',
            { type: 'button', 'data-app': a.name, disabled: true, title: a.statusInfo ?? '' },
            a.status === 'FAILED' ? `${a.name}: failed${a.statusInfo ? ` (${a.statusInfo})` : ''}` : `${a.name}: starting…`,
          ),
    ),
    line,
  );
}

function renderSummary(summary: HTMLElement, s: Detail, id: string): void {
  fill(
    summary,
    h(
      'p',
      {},
      h(
        'span',
        { class: `status status-${s.status.toLowerCase()}`, 'data-status': s.status },
        statusLabel(s.status, s.pull),
      ),
      ` ${typeLabel(s.type)}`,
      s.statusInfo ? ` — ${s.statusInfo}` : '',
    ),
    appButtons(s, id),
    s.pull
      ? h(
          'p',
          { class: 'pull' },
          h('progress', { max: 100, value: s.pull.percent, 'aria-label': 'Image pull' }),
          ` Pulling the image: ${bytes(s.pull.bytesDone)} of ${bytes(s.pull.bytesTotal)}, ` +
            `${s.pull.layersDone} of ${s.pull.layersTotal} layers`,
        )
      : null,
    s.status === 'PENDING'
      ? h(
          'p',
          { class: 'reasons' },
          s.queuePosition !== null ? `#${s.queuePosition} in queue. ` : '',
          s.pendingReasons.map((r) => r.message).join(' '),
        )
      : null,
    s.mounts.length
      ? h(
          'p',
          { class: 'mounts' },
          'Folders: ',
          s.mounts.map((m) => `${m.path}${m.readOnly ? ' (read-only)' : ''}`).join(', '),
        )
      : null,
    h('h3', {}, 'Status transitions'),
    h(
      'ol',
      { class: 'transitions' },
      s.statusTransitions.map((t) =>
        h('li', {}, `${when(t.occurredAt)}: ${t.fromStatus ?? '—'} → ${t.toStatus}`, t.reason ? ` (${t.reason})` : ''),
      ),
    ),
    h('h3', {}, 'Scheduling history'),
    h(
      'table',
      { class: 'history' },
      h(
        'thead',
        {},
        h('tr', {}, h('th', {}, 'When'), h('th', {}, 'Phase'), h('th', {}, 'Result'), h('th', {}, 'Message')),
      ),
      h(
        'tbody',
        {},
        s.schedulingHistory.edges.map(({ node: e }) =>
          h(
            'tr',
            {},
            h('td', {}, when(e.createdAt)),
            h('td', {}, e.phase),
            h('td', {}, e.result),
            h(
              'td',
              {},
              e.message,
              e.attempts > 1 ? ` (×${e.attempts}, last ${when(e.lastTriedAt)})` : '',
            ),
          ),
        ),
      ),
    ),
  );
}

/** A line-at-a-time terminal over the app's WebSocket (`/sessions/<id>/terminal`). */
function terminalView(path: string): HTMLElement {
  const output = h('pre', { class: 'terminal', role: 'log', tabindex: 0, 'aria-label': 'Terminal output', 'aria-live': 'polite' });
  const line = h('input', { type: 'text', id: 'terminal-input', autocomplete: 'off' });
  const ws = new WebSocket(wsUrl(path));
  ws.binaryType = 'arraybuffer';
  open.terminal = ws;
  const decoder = new TextDecoder();
  ws.onopen = () =>
    ws.send(JSON.stringify({ type: 'connection_init', payload: authorization(), cols: 100, rows: 30 }));
  ws.onmessage = (e) => {
    if (typeof e.data === 'string') return;
    // Colours and cursor moves are dropped: the panel shows text.
    output.append(decoder.decode(e.data, { stream: true }).replace(/\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r/g, ''));
    output.scrollTop = output.scrollHeight;
  };
  ws.onclose = (e) => output.append(`\n[closed${e.code === 1000 ? '' : `: ${e.code} ${e.reason}`}]\n`);
  const form = h(
    'form',
    {
      class: 'terminal-line',
      onsubmit: (e: Event) => {
        e.preventDefault();
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'input', data: `${line.value}\n` }));
        line.value = '';
      },
    },
    h('label', { for: 'terminal-input' }, 'Terminal input'),
    line,
    h('button', { type: 'submit' }, 'Send'),
  );
  return h('section', { 'aria-label': 'Terminal' }, h('h3', {}, 'Terminal'), output, form);
}
