// The detail panel of one session: its scheduling history, status transitions, logs (live
// while it runs) and, for an interactive session whose engine offers one, a terminal.

import { ApiError, gql } from './api.js';
import { byId, fill, h, when } from './dom.js';
import { authorization, subscribe, type Subscription, wsUrl } from './live.js';

interface Detail {
  id: string;
  name: string;
  status: string;
  type: string;
  statusInfo: string | null;
  pendingReasons: { message: string }[];
  queuePosition: number | null;
  apps: { name: string; url: string | null }[];
  statusTransitions: { fromStatus: string | null; toStatus: string; occurredAt: string; reason: string | null }[];
  schedulingHistory: {
    edges: { node: { phase: string; result: string; message: string; attempts: number; createdAt: string } }[];
  };
  logs: string[];
}

const DETAIL = `query PageDetail($id: ID!) { session(id: $id) { id name status type statusInfo queuePosition
  pendingReasons { message } apps { name url }
  statusTransitions { fromStatus toStatus occurredAt reason }
  schedulingHistory(first: 50) { edges { node { phase result message attempts createdAt } } }
  logs(tail: 200) } }`;

const LOGS = `subscription PageLogs($id: ID!) { sessionLogs(sessionId: $id, tail: 0) }`;

const ENDED = new Set(['TERMINATED', 'CANCELLED', 'ERROR']);

let following: Subscription | null = null;
let terminal: WebSocket | null = null;

function stop(): void {
  following?.close();
  following = null;
  terminal?.close(1000);
  terminal = null;
}

/** Opens the panel for session `id`. */
export async function openDetail(id: string, name: string): Promise<void> {
  stop();
  const panel = byId<HTMLDialogElement>('detail');
  const body = byId('detail-body');
  fill(byId('detail-title'), name);
  fill(body, h('p', {}, 'Loading…'));
  byId('detail-close').onclick = () => panel.close();
  panel.onclose = stop;
  if (!panel.open) panel.showModal();
  let s: Detail | null;
  try {
    s = (await gql<{ session: Detail | null }>(DETAIL, { id })).session;
  } catch (e) {
    fill(body, h('p', {}, e instanceof ApiError ? e.message : String(e)));
    return;
  }
  if (!s) {
    fill(body, h('p', {}, 'This session does not exist.'));
    return;
  }
  const logs = h('pre', { class: 'logs', tabindex: 0, 'aria-label': 'Logs' }, s.logs.join('\n'));
  fill(
    body,
    h(
      'p',
      {},
      h('span', { class: `status status-${s.status.toLowerCase()}` }, s.status),
      ` ${s.type}`,
      s.statusInfo ? ` — ${s.statusInfo}` : '',
    ),
    s.status === 'PENDING'
      ? h(
          'p',
          { class: 'reasons' },
          s.queuePosition !== null ? `#${s.queuePosition} in queue. ` : '',
          s.pendingReasons.map((r) => r.message).join(' '),
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
      h('thead', {}, h('tr', {}, h('th', {}, 'When'), h('th', {}, 'Phase'), h('th', {}, 'Result'), h('th', {}, 'Message'))),
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
            h('td', {}, e.message, e.attempts > 1 ? ` (×${e.attempts})` : ''),
          ),
        ),
      ),
    ),
    h('h3', {}, 'Logs'),
    logs,
    // Only where the engine offers one (the app then has its address).
    terminalOf(s),
  );
  if (!ENDED.has(s.status)) {
    following = subscribe<{ sessionLogs: string }>(LOGS, {
      variables: () => ({ id }),
      next: (data) => {
        logs.append(data.sessionLogs.endsWith('\n') ? data.sessionLogs : `${data.sessionLogs}\n`);
        logs.scrollTop = logs.scrollHeight;
      },
      error: () => false,
    });
  }
}

function terminalOf(s: Detail): HTMLElement | null {
  const app = s.apps.find((a) => a.name === 'terminal' && a.url);
  return app?.url ? terminalView(app.url) : null;
}

/** A line-at-a-time terminal over the app's WebSocket (`/sessions/<id>/terminal`). */
function terminalView(path: string): HTMLElement {
  const output = h('pre', { class: 'terminal', tabindex: 0, 'aria-label': 'Terminal output', 'aria-live': 'polite' });
  const line = h('input', { type: 'text', id: 'terminal-input', autocomplete: 'off' });
  const ws = new WebSocket(wsUrl(path));
  ws.binaryType = 'arraybuffer';
  terminal = ws;
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
