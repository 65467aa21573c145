// The Sessions page: sign-in, the resource panel, the list with its tabs, filter, columns
// and live rows, the launcher, the detail panel. Everything through the public API.
import { ApiError, gql, setToken, token, whenTokenRefused } from './api.js';
import { COLUMNS } from './columns.js';
import { openDetail } from './detail.js';
import { byId, fill, h } from './dom.js';
import { openFolders } from './folders.js';
import { openLauncher } from './launcher.js';
import { subscribe } from './live.js';
import { renderPanel } from './panel.js';
const PAGE_SIZE = 20;
const VIEWER = `query PageViewer { viewer { user { email fullName role } projects { id name sessionScopes }
  settings { resourcePanelView sessionListColumns { column visible }
    everyone: sessionListColumns(scope: PROJECT) { column visible } } } }`;
const LIST = `query SessionsPage($p: ID!, $scope: SessionScope, $filter: SessionFilter, $counted: SessionFilter,
  $order: [SessionOrder!], $first: Int, $after: String, $last: Int, $before: String) {
  sessions(projectId: $p, scope: $scope, filter: $filter, orderBy: $order, first: $first, after: $after, last: $last, before: $before) {
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { node { id name status type createdAt startedAt terminatedAt elapsedSeconds clusterSize priority
      queuePosition result statusInfo pull { percent } agent owner { email } project { name } resourceGroup { name } image { name webApps }
      requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { cpu memory accelerators { slot amount } }
      pendingReasons { code message } statusChangedBy { kind rule user { email } } expiry { at reason }
      utilization { slot current } mounts { path readOnly } } }
  }
  sessionCounts(projectId: $p, scope: $scope, filter: $counted) { running finished }
}`;
const EVENTS = `subscription PageEvents($p: ID!, $scope: SessionScope, $after: String) {
  sessionEvents(projectId: $p, scope: $scope, after: $after) {
    cursor kind sessionId toStatus session { name statusInfo pull { percent } }
  }
}`;
let state = null;
let events = null;
let lastCursor = null;
let refreshTimer;
/** Reads of the list asked so far: an answer to an older one is dropped (a live refresh
 * still in flight when the user pages on must not put the old page back). */
let listAsked = 0;
/** Where the address points: the project's name and whether it is the admin view. */
function route() {
    const admin = location.pathname.match(/^\/admin\/project\/([^/]+)\/session\/?$/);
    if (admin)
        return { admin: true, project: decodeURIComponent(admin[1]) };
    const user = location.pathname.match(/^\/project\/([^/]+)\/session\/?$/);
    return { admin: false, project: user ? decodeURIComponent(user[1]) : null };
}
/** The page of a project's list in `scope`. */
function pathOf(project, scope) {
    const name = encodeURIComponent(project);
    return scope === 'PROJECT' ? `/admin/project/${name}/session` : `/project/${name}/session`;
}
function notice(text) {
    const el = byId('notice');
    el.hidden = !text;
    el.textContent = text ?? '';
}
async function start() {
    byId('signin-form').addEventListener('submit', (e) => {
        e.preventDefault();
        const value = byId('token').value.trim();
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
    // A token the server stops accepting (revoked, its user gone): back to signing in, with
    // nothing of the old view left on screen.
    whenTokenRefused(() => {
        if (!token())
            return;
        setToken(null);
        events?.close();
        events = null;
        state = null;
        fill(byId('table'));
        fill(byId('bars'));
        showSignIn('Your token is no longer accepted: sign in again.');
    });
    if (token())
        await signIn();
    else
        showSignIn(null);
}
function showSignIn(error) {
    byId('signin').hidden = false;
    byId('app').hidden = true;
    byId('who').textContent = '';
    const el = byId('signin-error');
    el.hidden = !error;
    el.textContent = error ?? '';
    byId('token').focus();
}
/** The project switcher and the link between one's own and everyone's sessions. */
function navigation(viewer, project, scope) {
    const select = byId('project-switch');
    fill(select, viewer.projects.map((p) => h('option', { value: p.name }, p.name)));
    select.hidden = viewer.projects.length === 0;
    byId('project-switch-label').hidden = select.hidden;
    if (project)
        select.value = project.name;
    select.onchange = () => {
        const next = viewer.projects.find((p) => p.name === select.value);
        if (!next)
            return;
        // The same view there when it may be read, else the one that may.
        const to = next.sessionScopes.includes(scope) ? scope : next.sessionScopes[0];
        if (to)
            location.assign(pathOf(next.name, to));
    };
    const link = byId('view-link');
    const other = scope === 'PROJECT' ? 'MINE' : 'PROJECT';
    if (project && project.sessionScopes.includes(other)) {
        link.hidden = false;
        link.href = pathOf(project.name, other);
        link.textContent = other === 'PROJECT' ? 'Everyone’s sessions' : 'My sessions';
    }
    else {
        link.hidden = true;
    }
}
async function signIn() {
    let viewer;
    try {
        viewer = (await gql(VIEWER)).viewer;
    }
    catch (e) {
        // A token the server refuses is forgotten; one it could not check (the server down)
        // is kept for the next try.
        const refused = e instanceof ApiError && e.code === 'UNAUTHENTICATED';
        if (refused)
            setToken(null);
        showSignIn(refused ? 'That token is not valid.' : `Could not sign in: ${e instanceof ApiError ? e.message : String(e)}`);
        return;
    }
    const where = route();
    if (!where.project) {
        // `/` and anything else: the default project's page, in the view the viewer may read.
        const home = viewer.projects.find((p) => p.name === 'default' && p.sessionScopes.length) ??
            viewer.projects.find((p) => p.sessionScopes.length);
        if (home)
            history.replaceState(null, '', pathOf(home.name, home.sessionScopes[0]));
    }
    const { admin, project: name } = route();
    const scope = admin ? 'PROJECT' : 'MINE';
    const project = viewer.projects.find((p) => p.name === name);
    byId('signin').hidden = true;
    byId('app').hidden = false;
    fill(byId('who'), `${viewer.user.fullName || viewer.user.email} (${viewer.user.email}, ${viewer.user.role})`);
    navigation(viewer, project, scope);
    if (!project || !project.sessionScopes.includes(scope)) {
        // Nothing of a list that cannot be read: no panel, no list, no Launch.
        fill(byId('project-name'), 'Sessions');
        byId('workspace').hidden = true;
        if (!name)
            notice('You belong to no project.');
        else if (!project)
            notice(`There is no project “${name}” you may open.`);
        else if (scope === 'PROJECT') {
            notice(`Refused: listing everyone’s sessions in ${project.name} needs an administrator of its domain.`);
        }
        else
            notice(`Refused: you are not a member of ${project.name}; its administrators list its sessions for everyone.`);
        return;
    }
    state = {
        viewer,
        project,
        scope,
        tab: 'RUNNING',
        type: '',
        order: { field: 'CREATED_AT', direction: 'DESC' },
        page: { first: PAGE_SIZE },
        rows: [],
        pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
        fetchedAt: Date.now(),
        selected: new Set(),
    };
    fill(byId('project-name'), admin ? `Sessions of ${project.name} (all users)` : `Sessions of ${project.name}`);
    document.title = `${project.name} · Sessions · sessiond`;
    // Launching is a member's: an administrator who is not one lists, and cannot launch.
    byId('launch-button').hidden = !project.sessionScopes.includes('MINE');
    wire(state);
    await Promise.all([refresh(), renderPanel(state)]);
    follow(state);
    window.setInterval(tick, 1000);
}
/** The list's controls, once. */
function wire(s) {
    for (const tab of ['RUNNING', 'FINISHED']) {
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
    byId('type-filter').addEventListener('change', (e) => {
        s.type = e.target.value;
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
    byId('terminate-button').addEventListener('click', () => confirmTerminate(s));
    byId('csv-button').addEventListener('click', () => void download(s));
    byId('folders-button').addEventListener('click', () => void openFolders(s.project.id));
    byId('columns-button').addEventListener('click', () => openColumns(s));
}
function filter(s, withTab) {
    const f = {};
    if (withTab)
        f.tab = s.tab;
    if (s.type)
        f.types = [s.type];
    return f;
}
/** A read that failed for want of the server is tried again this soon. */
const RETRY_MS = 2000;
let retryTimer;
/** Reads the list and the counts again, as they now are. */
export async function refresh() {
    const s = state;
    if (!s)
        return;
    let data;
    const ask = ++listAsked;
    window.clearTimeout(retryTimer);
    try {
        data = await gql(LIST, {
            p: s.project.id,
            scope: s.scope,
            filter: filter(s, true),
            counted: filter(s, false),
            order: [{ field: s.order.field, direction: s.order.direction }],
            ...s.page,
        });
    }
    catch (e) {
        if (ask !== listAsked || state !== s)
            return;
        const code = e instanceof ApiError ? e.code : 'ERROR';
        if (code === 'UNAUTHENTICATED')
            return;
        notice(code === 'FORBIDDEN' ? `Refused: ${e.message}` : `The list could not be read: ${String(e)}`);
        // The server away, or failing for now: read again soon, whatever the live feed does.
        if (code === 'NETWORK' || code === 'UNAVAILABLE' || code.startsWith('HTTP_')) {
            retryTimer = window.setTimeout(() => void refresh(), RETRY_MS);
        }
        return;
    }
    if (ask !== listAsked || state !== s)
        return;
    notice(null);
    s.rows = data.sessions.edges.map((e) => ({ ...e.node, mine: e.node.owner.email === s.viewer.user.email }));
    s.pageInfo = data.sessions.pageInfo;
    s.fetchedAt = Date.now();
    const ids = new Set(s.rows.map((r) => r.id));
    for (const id of [...s.selected])
        if (!ids.has(id))
            s.selected.delete(id);
    fill(byId('tab-running'), `Running (${data.sessionCounts.running})`);
    fill(byId('tab-finished'), `Finished (${data.sessionCounts.finished})`);
    byId('tab-running').setAttribute('aria-selected', String(s.tab === 'RUNNING'));
    byId('tab-finished').setAttribute('aria-selected', String(s.tab === 'FINISHED'));
    byId('tab-running').tabIndex = s.tab === 'RUNNING' ? 0 : -1;
    byId('tab-finished').tabIndex = s.tab === 'FINISHED' ? 0 : -1;
    byId('next').disabled = !s.pageInfo.hasNextPage;
    byId('prev').disabled = !s.pageInfo.hasPreviousPage;
    renderTable(s);
}
/** The columns the list shows, as the API orders them for this list's scope. */
function visibleColumns(s) {
    const settings = s.scope === 'PROJECT' ? s.viewer.settings.everyone : s.viewer.settings.sessionListColumns;
    return settings
        .filter((c) => c.visible)
        .map((c) => COLUMNS.find((k) => k.key === c.column))
        .filter((c) => c !== undefined);
}
/** Moves `node` before `before` in `parent`, keeping its focus and state where the browser
 * can (`moveBefore`), else putting the focus back. */
function place(parent, node, before) {
    const mover = parent;
    if (node.parentNode === parent && typeof mover.moveBefore === 'function') {
        mover.moveBefore(node, before);
        return;
    }
    const focused = document.activeElement;
    parent.insertBefore(node, before);
    if (focused instanceof HTMLElement && node.contains(focused) && document.activeElement !== focused)
        focused.focus();
}
/** The header row, in place: a new one only when the columns change. */
function renderHead(s, table, columns) {
    const keys = columns.map((c) => c.key).join(',');
    let head = table.tHead;
    if (!head || head.dataset.columns !== keys) {
        const focusedSort = document.activeElement?.dataset?.sort;
        const row = h('tr', {}, h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Select')), columns.map((c) => h('th', { scope: 'col', 'data-column': c.key }, c.sort
            ? h('button', {
                type: 'button',
                class: 'sort',
                'data-sort': c.sort,
                onclick: () => {
                    const field = c.sort;
                    s.order =
                        s.order.field === field
                            ? { field, direction: s.order.direction === 'ASC' ? 'DESC' : 'ASC' }
                            : { field, direction: field === 'NAME' ? 'ASC' : 'DESC' };
                    s.page = { first: PAGE_SIZE };
                    void refresh();
                },
            }, c.label)
            : c.label)));
        const fresh = h('thead', {}, row);
        fresh.dataset.columns = keys;
        if (head)
            head.replaceWith(fresh);
        else
            table.prepend(fresh);
        head = fresh;
        if (focusedSort)
            head.querySelector(`button[data-sort="${focusedSort}"]`)?.focus();
    }
    for (const c of columns) {
        const th = head.querySelector(`th[data-column="${c.key}"]`);
        if (!th || !c.sort)
            continue;
        const sorted = s.order.field === c.sort;
        const direction = s.order.direction === 'ASC' ? 'ascending' : 'descending';
        if (sorted)
            th.setAttribute('aria-sort', direction);
        else
            th.removeAttribute('aria-sort');
        const button = th.querySelector('button');
        const text = `${c.label}${sorted ? (s.order.direction === 'ASC' ? ' ▲' : ' ▼') : ''}`;
        if (button && button.textContent !== text)
            button.textContent = text;
    }
}
/** One row's cells, made once; [`updateRow`] keeps them current. */
function makeRow(s, r, columns) {
    const tr = h('tr', { 'data-session': r.id }, h('td', {}, h('input', {
        type: 'checkbox',
        'aria-label': `Select ${r.name}`,
        onchange: (e) => {
            const id = e.target.closest('tr')?.dataset.session;
            if (!id)
                return;
            if (e.target.checked)
                s.selected.add(id);
            else
                s.selected.delete(id);
            updateSelection(s);
        },
    })), columns.map((c) => h('td', { 'data-column': c.key }, c.key === 'NAME'
        ? h('button', {
            type: 'button',
            class: 'link',
            onclick: (e) => {
                const row = s.rows.find((x) => x.id === e.target.closest('tr')?.dataset.session);
                if (row)
                    void openDetail(row.id, row.name, { project: s.project.id, scope: s.scope });
            },
        })
        : null)));
    return tr;
}
/** Brings a row's cells up to `r`, touching only what changed (a focused name stays put). */
function updateRow(s, tr, r, columns) {
    const signature = JSON.stringify(r);
    tr.dataset.status = r.status;
    const box = tr.querySelector('input[type=checkbox]');
    if (box) {
        box.checked = s.selected.has(r.id);
        box.setAttribute('aria-label', `Select ${r.name}`);
    }
    if (tr.dataset.signature === signature)
        return;
    tr.dataset.signature = signature;
    for (const c of columns) {
        const cell = tr.querySelector(`td[data-column="${c.key}"]`);
        if (!cell)
            continue;
        if (c.key === 'NAME') {
            const button = cell.querySelector('button');
            if (button && button.textContent !== r.name)
                button.textContent = r.name;
            continue;
        }
        fill(cell, c.render(r));
    }
}
/** The table as the rows now are, patched in place: rows are kept by session, moved only
 * when their place changes, and a cell is written only when its session changed, so live
 * refreshes and sorting by keyboard leave the focus where it was. */
function renderTable(s) {
    const table = byId('table');
    const columns = visibleColumns(s);
    const keys = columns.map((c) => c.key).join(',');
    renderHead(s, table, columns);
    let body = table.tBodies[0];
    if (!body || body.dataset.columns !== keys) {
        const fresh = h('tbody', {});
        fresh.dataset.columns = keys;
        if (body)
            body.replaceWith(fresh);
        else
            table.append(fresh);
        body = fresh;
    }
    if (!s.rows.length) {
        fill(body, h('tr', {}, h('td', { colspan: columns.length + 1, class: 'empty' }, 'No sessions here.')));
        updateSelection(s);
        return;
    }
    const kept = new Map();
    for (const tr of Array.from(body.rows)) {
        const id = tr.dataset.session;
        if (id)
            kept.set(id, tr);
        else
            tr.remove();
    }
    const wanted = new Set(s.rows.map((r) => r.id));
    for (const [id, tr] of kept) {
        if (wanted.has(id))
            continue;
        // A focused row that goes hands the focus to the list, not to the page's end.
        if (tr.contains(document.activeElement))
            byId('table').focus();
        tr.remove();
        kept.delete(id);
    }
    let at = body.firstElementChild;
    for (const r of s.rows) {
        let tr = kept.get(r.id);
        if (!tr)
            tr = makeRow(s, r, columns);
        updateRow(s, tr, r, columns);
        if (tr === at) {
            at = at.nextElementSibling;
        }
        else {
            place(body, tr, at);
        }
    }
    updateSelection(s);
}
function updateSelection(s) {
    const n = s.selected.size;
    const button = byId('terminate-button');
    button.disabled = n === 0;
    const text = n ? `Terminate ${n} selected` : 'Terminate selected';
    if (button.textContent !== text)
        fill(button, text);
}
/** The elapsed time of live sessions, ticking between reads. */
function tick() {
    const s = state;
    if (!s)
        return;
    const since = (Date.now() - s.fetchedAt) / 1000;
    const elapsed = COLUMNS.find((c) => c.key === 'ELAPSED');
    for (const cell of document.querySelectorAll('td[data-column="ELAPSED"]')) {
        const row = s.rows.find((r) => r.id === cell.parentElement?.dataset.session);
        if (!row || !elapsed)
            continue;
        const text = elapsed.render(row, since);
        if (cell.textContent !== text)
            fill(cell, text);
    }
}
/** Live rows: every change in the list's scope reads the list again (at most every 250 ms);
 * a session that fails is said so, as it leaves the Running tab. */
function follow(s) {
    events = subscribe(EVENTS, {
        variables: () => ({ p: s.project.id, scope: s.scope, after: lastCursor }),
        next: (data) => {
            const e = data.sessionEvents;
            lastCursor = e.cursor;
            if (e.kind === 'PULL_PROGRESS') {
                pulled(s, e);
                return;
            }
            if (e.kind === 'STATUS' && e.toStatus === 'ERROR')
                failed(s, e);
            scheduleRefresh();
        },
        state: (up) => {
            fill(byId('live-state'), up ? 'Live' : 'Reconnecting…');
            if (up)
                scheduleRefresh();
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
/** A pull went on: the row's status cell says how far, in place (nothing else of the list
 * changes with it). */
function pulled(s, e) {
    const row = s.rows.find((r) => r.id === e.sessionId);
    const cell = document.querySelector(`tr[data-session="${CSS.escape(e.sessionId)}"] td[data-column="STATUS"]`);
    const status = COLUMNS.find((c) => c.key === 'STATUS');
    if (!row || !cell || !status || !e.session)
        return;
    row.pull = e.session.pull;
    fill(cell, status.render(row));
}
/** Says that a session failed, with a way to its detail (it is under Finished now). */
function failed(s, e) {
    const name = e.session?.name ?? 'A session';
    const why = e.session?.statusInfo ? `: ${e.session.statusInfo}` : '';
    const line = byId('status-line');
    fill(line, h('span', { class: 'error' }, `${name} failed${why}. `), h('button', {
        type: 'button',
        class: 'link',
        onclick: () => void openDetail(e.sessionId, name, { project: s.project.id, scope: s.scope }),
    }, 'Show it'));
}
function scheduleRefresh() {
    if (refreshTimer !== undefined)
        return;
    refreshTimer = window.setTimeout(() => {
        refreshTimer = undefined;
        void refresh();
        if (state)
            void renderPanel(state);
    }, 250);
}
/** Asks before ending sessions: their names, and Terminate or Cancel. */
function confirmTerminate(s) {
    const ids = [...s.selected];
    if (!ids.length)
        return;
    const dialog = byId('confirm-dialog');
    const names = ids.map((id) => s.rows.find((r) => r.id === id)?.name ?? id);
    fill(byId('confirm-title'), ids.length === 1 ? `Terminate ${names[0]}?` : `Terminate ${ids.length} sessions?`);
    fill(byId('confirm-body'), h('p', {}, 'Their processes are stopped and their resources freed. This cannot be undone.'), ids.length > 1 ? h('ul', {}, names.map((n) => h('li', {}, n))) : null);
    byId('confirm-cancel').onclick = () => dialog.close();
    byId('confirm-ok').onclick = () => {
        dialog.close();
        void terminate(s, ids);
    };
    dialog.showModal();
    byId('confirm-cancel').focus();
}
async function terminate(s, ids) {
    try {
        const answer = await gql('mutation PageTerminate($ids: [ID!]!) { terminateSessions(ids: $ids) { results { sessionId outcome } } }', { ids });
        const by = (outcomes) => answer.terminateSessions.results.filter((r) => outcomes.includes(r.outcome)).length;
        const ending = by(['TERMINATING', 'TERMINATED', 'CANCELLED']);
        const ended = by(['SKIPPED']);
        const gone = by(['NOT_FOUND']);
        const parts = [
            ending ? `${ending === 1 ? '1 session' : `${ending} sessions`} asked to terminate.` : 'Nothing to terminate.',
            ended ? `${ended} had already ended or is ending.` : '',
            gone ? `${gone} no longer found.` : '',
        ];
        fill(byId('status-line'), parts.filter(Boolean).join(' '));
    }
    catch (e) {
        notice(`Terminate failed: ${String(e)}`);
    }
    s.selected.clear();
    await refresh();
}
/** The CSV of the current view, its columns as the list shows them, through the signed link
 * (valid a minute, no header needed). */
async function download(s) {
    try {
        const data = await gql(`query PageExport($p: ID!, $scope: SessionScope, $filter: SessionFilter, $order: [SessionOrder!],
        $columns: [SessionColumnKey!]) {
        sessionExportUrl(projectId: $p, scope: $scope, filter: $filter, orderBy: $order, columns: $columns) }`, {
            p: s.project.id,
            scope: s.scope,
            filter: filter(s, true),
            order: [s.order],
            columns: visibleColumns(s).map((c) => c.key),
        });
        const link = h('a', { href: data.sessionExportUrl, download: 'sessions.csv', hidden: true });
        document.body.append(link);
        link.click();
        link.remove();
    }
    catch (e) {
        notice(`The export could not be made: ${String(e)}`);
    }
}
/** Column settings: show, hide, reorder (drag, or the move buttons), saved through the API. */
function openColumns(s) {
    const dialog = byId('columns-dialog');
    let order = s.viewer.settings.sessionListColumns.map((c) => ({ ...c }));
    const list = byId('columns-list');
    let dragged = null;
    const draw = (focus) => {
        fill(list, order.map((c, i) => h('li', {
            draggable: 'true',
            'data-column': c.column,
            ondragstart: () => {
                dragged = i;
            },
            ondragover: (e) => e.preventDefault(),
            ondrop: (e) => {
                e.preventDefault();
                if (dragged === null || dragged === i)
                    return;
                const [moved] = order.splice(dragged, 1);
                order.splice(i, 0, moved);
                dragged = null;
                draw();
            },
        }, h('label', {}, h('input', {
            type: 'checkbox',
            checked: c.visible,
            disabled: c.column === 'NAME',
            onchange: (e) => {
                c.visible = e.target.checked;
            },
        }), ' ', COLUMNS.find((k) => k.key === c.column)?.label ?? c.column, c.column === 'NAME' ? ' (always shown)' : ''), h('button', {
            type: 'button',
            id: `up-${c.column}`,
            'aria-label': `Move ${c.column} up`,
            disabled: i === 0,
            onclick: () => {
                [order[i - 1], order[i]] = [order[i], order[i - 1]];
                draw(`up-${c.column}`);
            },
        }, '↑'), h('button', {
            type: 'button',
            id: `down-${c.column}`,
            'aria-label': `Move ${c.column} down`,
            disabled: i === order.length - 1,
            onclick: () => {
                [order[i + 1], order[i]] = [order[i], order[i + 1]];
                draw(`down-${c.column}`);
            },
        }, '↓'))));
        if (focus) {
            const el = document.getElementById(focus);
            if (el && !el.disabled)
                el.focus();
        }
    };
    draw();
    byId('columns-error').hidden = true;
    byId('columns-form').onsubmit = async (e) => {
        e.preventDefault();
        try {
            const answer = await gql(`mutation PageColumns($columns: [SessionColumnInput!]!) {
          updateSessionListColumns(columns: $columns) { resourcePanelView sessionListColumns { column visible }
            everyone: sessionListColumns(scope: PROJECT) { column visible } } }`, { columns: order.map((c) => ({ column: c.column, visible: c.visible })) });
            s.viewer.settings = answer.updateSessionListColumns;
            order = [];
            dialog.close();
            renderTable(s);
        }
        catch (err) {
            const el = byId('columns-error');
            el.hidden = false;
            el.textContent = String(err instanceof ApiError ? err.message : err);
        }
    };
    byId('columns-cancel').onclick = () => dialog.close();
    dialog.showModal();
}
void start();
