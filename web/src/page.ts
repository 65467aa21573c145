// The Sessions page: sign-in, the resource panel, the list with its tabs, filter, columns
// and live rows, the launcher, the detail panel. Everything through the public API.

import { ApiError, gql, setToken, token } from './api.js';
import { type Column, COLUMNS, type Row } from './columns.js';
import { openDetail } from './detail.js';
import { byId, fill, h } from './dom.js';
import { openLauncher } from './launcher.js';
import { subscribe, type Subscription } from './live.js';
import { renderPanel } from './panel.js';

interface Viewer {
  user: { email: string; fullName: string; role: string };
  projects: { id: string; name: string }[];
  settings: { resourcePanelView: string; sessionListColumns: { column: string; visible: boolean }[] };
}

/** What the page shows now. */
export interface State {
  viewer: Viewer;
  project: { id: string; name: string };
  scope: 'MINE' | 'PROJECT';
  tab: 'RUNNING' | 'FINISHED';
  type: string;
  order: { field: string; direction: 'ASC' | 'DESC' };
  page: { first?: number; after?: string; last?: number; before?: string };
  rows: Row[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  fetchedAt: number;
  selected: Set<string>;
}

const PAGE_SIZE = 20;

const VIEWER = `query PageViewer { viewer { user { email fullName role } projects { id name }
  settings { resourcePanelView sessionListColumns { column visible } } } }`;

const LIST = `query SessionsPage($p: ID!, $scope: SessionScope, $filter: SessionFilter, $counted: SessionFilter,
  $order: [SessionOrder!], $first: Int, $after: String, $last: Int, $before: String) {
  sessions(projectId: $p, scope: $scope, filter: $filter, orderBy: $order, first: $first, after: $after, last: $last, before: $before) {
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { node { id name status type createdAt startedAt terminatedAt elapsedSeconds clusterSize priority
      queuePosition result statusInfo agent owner { email } project { name } resourceGroup { name } image { name }
      requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { cpu memory accelerators { slot amount } }
      pendingReasons { code message } statusChangedBy { kind rule user { email } } expiry { at reason }
      utilization { slot current } } }
  }
  sessionCounts(projectId: $p, scope: $scope, filter: $counted) { running finished }
}`;

const EVENTS = `subscription PageEvents($p: ID!, $scope: SessionScope, $after: String) {
  sessionEvents(projectId: $p, scope: $scope, after: $after) { cursor kind sessionId toStatus }
}`;

let state: State | null = null;
let events: Subscription | null = null;
let lastCursor: string | null = null;
let refreshTimer: number | undefined;
/** Reads of the list asked so far: an answer to an older one is dropped (a live refresh
 * still in flight when the user pages on must not put the old page back). */
let listAsked = 0;

/** Where the address points: the project's name and whether it is the admin view. */
function route(): { admin: boolean; project: string | null } {
  const admin = location.pathname.match(/^\/admin\/project\/([^/]+)\/session\/?$/);
  if (admin) return { admin: true, project: decodeURIComponent(admin[1]) };
  const user = location.pathname.match(/^\/project\/([^/]+)\/session\/?$/);
  return { admin: false, project: user ? decodeURIComponent(user[1]) : null };
}

function notice(text: string | null): void {
  const el = byId('notice');
  el.hidden = !text;
  el.textContent = text ?? '';
}

async function start(): Promise<void> {
  byId<HTMLFormElement>('signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const value = byId<HTMLInputElement>('token').value.trim();
    if (value) {
      setToken(value);
      void signIn();
    }
  });
  byId('signout').addEventListener('click', () => {
    setToken(null);
    events?.close();
    location.reload();
  });
  if (token()) await signIn();
  else showSignIn(null);
}

function showSignIn(error: string | null): void {
  byId('signin').hidden = false;
  byId('app').hidden = true;
  const el = byId('signin-error');
  el.hidden = !error;
  el.textContent = error ?? '';
  byId<HTMLInputElement>('token').focus();
}

async function signIn(): Promise<void> {
  let viewer: Viewer;
  try {
    viewer = (await gql<{ viewer: Viewer }>(VIEWER)).viewer;
  } catch (e) {
    // A token the server refuses is forgotten; one it could not check (the server down)
    // is kept for the next try.
    const refused = e instanceof ApiError && e.code === 'UNAUTHENTICATED';
    if (refused) setToken(null);
    showSignIn(refused ? 'That token is not valid.' : `Could not sign in: ${e instanceof ApiError ? e.message : String(e)}`);
    return;
  }
  const where = route();
  if (!where.project) {
    // `/` and anything else: the default project's page.
    const home = viewer.projects.find((p) => p.name === 'default') ?? viewer.projects[0];
    if (home) {
      history.replaceState(null, '', `/project/${encodeURIComponent(home.name)}/session`);
    }
  }
  const name = route().project;
  const project = viewer.projects.find((p) => p.name === name);
  byId('signin').hidden = true;
  byId('app').hidden = false;
  fill(byId('who'), `${viewer.user.fullName || viewer.user.email} (${viewer.user.email}, ${viewer.user.role})`);
  if (!project) {
    fill(byId('project-name'), 'Sessions');
    notice(name ? `There is no project “${name}” you may open.` : 'You belong to no project.');
    byId('workspace').hidden = true;
    return;
  }
  state = {
    viewer,
    project,
    scope: where.admin ? 'PROJECT' : 'MINE',
    tab: 'RUNNING',
    type: '',
    order: { field: 'CREATED_AT', direction: 'DESC' },
    page: { first: PAGE_SIZE },
    rows: [],
    pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
    fetchedAt: Date.now(),
    selected: new Set(),
  };
  fill(byId('project-name'), where.admin ? `Sessions of ${project.name} (all users)` : `Sessions of ${project.name}`);
  document.title = `${project.name} · Sessions · sessiond`;
  wire(state);
  await Promise.all([refresh(), renderPanel(state)]);
  follow(state);
  window.setInterval(tick, 1000);
}

/** The list's controls, once. */
function wire(s: State): void {
  for (const tab of ['RUNNING', 'FINISHED'] as const) {
    byId(`tab-${tab.toLowerCase()}`).addEventListener('click', () => {
      s.tab = tab;
      s.page = { first: PAGE_SIZE };
      s.selected.clear();
      void refresh();
    });
  }
  byId('tabs').addEventListener('keydown', (e) => {
    if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      const next = s.tab === 'RUNNING' ? 'finished' : 'running';
      byId(`tab-${next}`).click();
      byId(`tab-${next}`).focus();
    }
  });
  byId<HTMLSelectElement>('type-filter').addEventListener('change', (e) => {
    s.type = (e.target as HTMLSelectElement).value;
    s.page = { first: PAGE_SIZE };
    void refresh();
  });
  byId('next').addEventListener('click', () => {
    s.page = { first: PAGE_SIZE, after: s.pageInfo.endCursor ?? undefined };
    void refresh();
  });
  byId('prev').addEventListener('click', () => {
    s.page = { last: PAGE_SIZE, before: s.pageInfo.startCursor ?? undefined };
    void refresh();
  });
  byId('launch-button').addEventListener('click', () => openLauncher(s, () => void refresh()));
  byId('terminate-button').addEventListener('click', () => void terminate(s));
  byId('csv-button').addEventListener('click', () => void download(s));
  byId('columns-button').addEventListener('click', () => openColumns(s));
}

function filter(s: State, withTab: boolean): Record<string, unknown> {
  const f: Record<string, unknown> = {};
  if (withTab) f.tab = s.tab;
  if (s.type) f.types = [s.type];
  return f;
}

/** Reads the list and the counts again, as they now are. */
export async function refresh(): Promise<void> {
  const s = state;
  if (!s) return;
  type Answer = {
    sessions: { pageInfo: State['pageInfo']; edges: { node: Row }[] };
    sessionCounts: { running: number; finished: number };
  };
  let data: Answer;
  const ask = ++listAsked;
  try {
    data = await gql<Answer>(LIST, {
      p: s.project.id,
      scope: s.scope,
      filter: filter(s, true),
      counted: filter(s, false),
      order: [{ field: s.order.field, direction: s.order.direction }],
      ...s.page,
    });
  } catch (e) {
    if (ask !== listAsked) return;
    notice(e instanceof ApiError && e.code === 'FORBIDDEN' ? `Refused: ${e.message}` : `The list could not be read: ${String(e)}`);
    return;
  }
  if (ask !== listAsked) return;
  notice(null);
  s.rows = data.sessions.edges.map((e) => e.node);
  s.pageInfo = data.sessions.pageInfo;
  s.fetchedAt = Date.now();
  const ids = new Set(s.rows.map((r) => r.id));
  for (const id of [...s.selected]) if (!ids.has(id)) s.selected.delete(id);
  fill(byId('tab-running'), `Running (${data.sessionCounts.running})`);
  fill(byId('tab-finished'), `Finished (${data.sessionCounts.finished})`);
  byId('tab-running').setAttribute('aria-selected', String(s.tab === 'RUNNING'));
  byId('tab-finished').setAttribute('aria-selected', String(s.tab === 'FINISHED'));
  byId('tab-running').tabIndex = s.tab === 'RUNNING' ? 0 : -1;
  byId('tab-finished').tabIndex = s.tab === 'FINISHED' ? 0 : -1;
  byId<HTMLButtonElement>('next').disabled = !s.pageInfo.hasNextPage;
  byId<HTMLButtonElement>('prev').disabled = !s.pageInfo.hasPreviousPage;
  renderTable(s);
}

function visibleColumns(s: State): Column[] {
  const keys = s.viewer.settings.sessionListColumns.filter((c) => c.visible).map((c) => c.column);
  // Everyone's sessions: whose each is, right after its name, whatever the settings say.
  if (s.scope === 'PROJECT' && !keys.includes('OWNER')) keys.splice(keys.indexOf('NAME') + 1, 0, 'OWNER');
  return keys.map((key) => COLUMNS.find((c) => c.key === key)).filter((c): c is Column => c !== undefined);
}

function renderTable(s: State): void {
  const columns = visibleColumns(s);
  const head = h(
    'tr',
    {},
    h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Select')),
    columns.map((c) => {
      const sorted = c.sort && s.order.field === c.sort;
      const label = c.label;
      return h(
        'th',
        { scope: 'col', 'aria-sort': sorted ? (s.order.direction === 'ASC' ? 'ascending' : 'descending') : null },
        c.sort
          ? h(
              'button',
              {
                type: 'button',
                class: 'sort',
                onclick: () => {
                  const field = c.sort as string;
                  s.order =
                    s.order.field === field
                      ? { field, direction: s.order.direction === 'ASC' ? 'DESC' : 'ASC' }
                      : { field, direction: field === 'NAME' ? 'ASC' : 'DESC' };
                  s.page = { first: PAGE_SIZE };
                  void refresh();
                },
              },
              label,
              sorted ? (s.order.direction === 'ASC' ? ' ▲' : ' ▼') : '',
            )
          : label,
      );
    }),
  );
  const body = s.rows.length
    ? s.rows.map((r) =>
        h(
          'tr',
          { 'data-session': r.id, 'data-status': r.status },
          h(
            'td',
            {},
            h('input', {
              type: 'checkbox',
              'aria-label': `Select ${r.name}`,
              checked: s.selected.has(r.id),
              onchange: (e: Event) => {
                if ((e.target as HTMLInputElement).checked) s.selected.add(r.id);
                else s.selected.delete(r.id);
                updateSelection(s);
              },
            }),
          ),
          columns.map((c) =>
            h(
              'td',
              { 'data-column': c.key },
              c.key === 'NAME'
                ? h('button', { type: 'button', class: 'link', onclick: () => openDetail(r.id, r.name) }, r.name)
                : c.render(r),
            ),
          ),
        ),
      )
    : [h('tr', {}, h('td', { colspan: columns.length + 1, class: 'empty' }, 'No sessions here.'))];
  fill(byId('table'), h('thead', {}, head), h('tbody', {}, body));
  updateSelection(s);
}

function updateSelection(s: State): void {
  const n = s.selected.size;
  const button = byId<HTMLButtonElement>('terminate-button');
  button.disabled = n === 0;
  fill(button, n ? `Terminate ${n} selected` : 'Terminate selected');
}

/** The elapsed time of live sessions, ticking between reads. */
function tick(): void {
  const s = state;
  if (!s) return;
  const since = (Date.now() - s.fetchedAt) / 1000;
  const elapsed = COLUMNS.find((c) => c.key === 'ELAPSED');
  for (const cell of document.querySelectorAll<HTMLElement>('td[data-column="ELAPSED"]')) {
    const row = s.rows.find((r) => r.id === cell.parentElement?.dataset.session);
    if (row && elapsed) fill(cell, elapsed.render(row, since));
  }
}

/** Live rows: every change in the list's scope reads the list again (at most every 250 ms). */
function follow(s: State): void {
  events = subscribe<{ sessionEvents: { cursor: string } }>(EVENTS, {
    variables: () => ({ p: s.project.id, scope: s.scope, after: lastCursor }),
    next: (data) => {
      lastCursor = data.sessionEvents.cursor;
      scheduleRefresh();
    },
    state: (up) => {
      fill(byId('live-state'), up ? 'Live' : 'Reconnecting…');
      if (up) scheduleRefresh();
    },
    error: (code, message) => {
      if (code === 'LAGGED') {
        lastCursor = null;
        scheduleRefresh();
        return true;
      }
      fill(byId('live-state'), `Not live: ${message}`);
      return false;
    },
  });
}

function scheduleRefresh(): void {
  if (refreshTimer !== undefined) return;
  refreshTimer = window.setTimeout(() => {
    refreshTimer = undefined;
    void refresh();
    if (state) void renderPanel(state);
  }, 250);
}

async function terminate(s: State): Promise<void> {
  const ids = [...s.selected];
  if (!ids.length) return;
  type Answer = { terminateSessions: { results: { id: string; outcome: string }[] } };
  try {
    const answer = await gql<Answer>(
      'mutation PageTerminate($ids: [ID!]!) { terminateSessions(ids: $ids) { results { id outcome } } }',
      { ids },
    );
    const done = answer.terminateSessions.results.filter((r) => r.outcome !== 'NOT_FOUND').length;
    fill(byId('status-line'), `${done} of ${ids.length} asked to terminate.`);
  } catch (e) {
    notice(`Terminate failed: ${String(e)}`);
  }
  s.selected.clear();
  await refresh();
}

/** The CSV of the current view, through the signed link (valid a minute, no header needed). */
async function download(s: State): Promise<void> {
  try {
    const data = await gql<{ sessionExportUrl: string }>(
      `query PageExport($p: ID!, $scope: SessionScope, $filter: SessionFilter, $order: [SessionOrder!]) {
        sessionExportUrl(projectId: $p, scope: $scope, filter: $filter, orderBy: $order) }`,
      { p: s.project.id, scope: s.scope, filter: filter(s, true), order: [s.order] },
    );
    const link = h('a', { href: data.sessionExportUrl, download: 'sessions.csv', hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
  } catch (e) {
    notice(`The export could not be made: ${String(e)}`);
  }
}

/** Column settings: show, hide, reorder (drag, or the move buttons), saved through the API. */
function openColumns(s: State): void {
  const dialog = byId<HTMLDialogElement>('columns-dialog');
  let order = s.viewer.settings.sessionListColumns.map((c) => ({ ...c }));
  const list = byId('columns-list');
  let dragged: number | null = null;
  const draw = (focus?: string): void => {
    fill(
      list,
      order.map((c, i) =>
        h(
          'li',
          {
            draggable: 'true',
            'data-column': c.column,
            ondragstart: () => {
              dragged = i;
            },
            ondragover: (e: Event) => e.preventDefault(),
            ondrop: (e: Event) => {
              e.preventDefault();
              if (dragged === null || dragged === i) return;
              const [moved] = order.splice(dragged, 1);
              order.splice(i, 0, moved);
              dragged = null;
              draw();
            },
          },
          h(
            'label',
            {},
            h('input', {
              type: 'checkbox',
              checked: c.visible,
              disabled: c.column === 'NAME',
              onchange: (e: Event) => {
                c.visible = (e.target as HTMLInputElement).checked;
              },
            }),
            ' ',
            COLUMNS.find((k) => k.key === c.column)?.label ?? c.column,
            c.column === 'NAME' ? ' (always shown)' : '',
          ),
          h(
            'button',
            {
              type: 'button',
              id: `up-${c.column}`,
              'aria-label': `Move ${c.column} up`,
              disabled: i === 0,
              onclick: () => {
                [order[i - 1], order[i]] = [order[i], order[i - 1]];
                draw(`up-${c.column}`);
              },
            },
            '↑',
          ),
          h(
            'button',
            {
              type: 'button',
              id: `down-${c.column}`,
              'aria-label': `Move ${c.column} down`,
              disabled: i === order.length - 1,
              onclick: () => {
                [order[i + 1], order[i]] = [order[i], order[i + 1]];
                draw(`down-${c.column}`);
              },
            },
            '↓',
          ),
        ),
      ),
    );
    if (focus) {
      const el = document.getElementById(focus) as HTMLButtonElement | null;
      if (el && !el.disabled) el.focus();
    }
  };
  draw();
  byId('columns-error').hidden = true;
  byId<HTMLFormElement>('columns-form').onsubmit = async (e) => {
    e.preventDefault();
    try {
      type Answer = { updateSessionListColumns: Viewer['settings'] };
      const answer = await gql<Answer>(
        `mutation PageColumns($columns: [SessionColumnInput!]!) {
          updateSessionListColumns(columns: $columns) { resourcePanelView sessionListColumns { column visible } } }`,
        { columns: order.map((c) => ({ column: c.column, visible: c.visible })) },
      );
      s.viewer.settings = answer.updateSessionListColumns;
      order = [];
      dialog.close();
      renderTable(s);
    } catch (err) {
      const el = byId('columns-error');
      el.hidden = false;
      el.textContent = String(err instanceof ApiError ? err.message : err);
    }
  };
  byId('columns-cancel').onclick = () => dialog.close();
  dialog.showModal();
}

void start();
