// The list's columns: each `SessionColumnKey` with its heading, its sort field (when the
// API sorts by it) and how a row shows it.
import { amount, bytes, duration, h, when } from './dom.js';
import { openApp } from './detail.js';
import { counted, slotLabel, statusLabel, typeLabel } from './labels.js';
const LIVE = new Set(['PREPARING', 'PULLING', 'PREPARED', 'CREATING', 'RUNNING', 'TERMINATING']);
/** A running session's slots are what it occupies; a waiting or ended one's, what it asked for. */
function slots(r) {
    return LIVE.has(r.status) ? r.occupiedSlots : r.requestedSlots;
}
/** Buttons for the web apps of the viewer's own running interactive session. */
function apps(r) {
    if (!r.mine || r.status !== 'RUNNING' || r.type !== 'INTERACTIVE' || !r.image.webApps.length)
        return null;
    return h('span', { class: 'row-apps' }, r.image.webApps.map((name) => h('button', { type: 'button', class: 'app', 'data-app': name, onclick: () => void openApp(r.id, name) }, name)));
}
function status(r) {
    const badge = h('span', { class: `status status-${r.status.toLowerCase()}` }, statusLabel(r.status, r.pull));
    const opens = apps(r);
    if (opens)
        return h('span', {}, badge, ' ', opens);
    if (r.status !== 'PENDING')
        return badge;
    const why = r.pendingReasons.map((p) => p.message).join(' ');
    return h('span', {}, badge, r.queuePosition !== null ? h('span', { class: 'queue' }, ` #${r.queuePosition} in queue`) : '', why ? h('span', { class: 'reasons' }, why) : '');
}
export const COLUMNS = [
    { key: 'NAME', label: 'Name', sort: 'NAME', render: (r) => r.name },
    { key: 'STATUS', label: 'Status', sort: 'STATUS', render: status },
    { key: 'TYPE', label: 'Type', sort: 'TYPE', render: (r) => typeLabel(r.type) },
    { key: 'OWNER', label: 'Owner', render: (r) => r.owner.email },
    { key: 'PROJECT', label: 'Project', render: (r) => r.project.name },
    { key: 'RESOURCE_GROUP', label: 'Resource group', render: (r) => r.resourceGroup.name },
    { key: 'IMAGE', label: 'Image', render: (r) => r.image.name },
    { key: 'CPU', label: 'CPU', render: (r) => counted(amount('cpu', slots(r).cpu), 'core', 'cores') },
    { key: 'MEMORY', label: 'Memory', render: (r) => bytes(slots(r).memory) },
    {
        key: 'ACCELERATORS',
        label: 'Accelerators',
        render: (r) => slots(r).accelerators.map((a) => `${slotLabel(a.slot)} ${amount(a.slot, a.amount)}`).join(', ') || '—',
    },
    { key: 'CLUSTER_SIZE', label: 'Cluster size', render: (r) => String(r.clusterSize) },
    { key: 'CREATED_AT', label: 'Created', sort: 'CREATED_AT', render: (r) => when(r.createdAt) },
    { key: 'STARTED_AT', label: 'Started', render: (r) => when(r.startedAt) },
    { key: 'TERMINATED_AT', label: 'Ended', sort: 'TERMINATED_AT', render: (r) => when(r.terminatedAt) },
    {
        key: 'ELAPSED',
        label: 'Elapsed',
        sort: 'ELAPSED',
        // A live session's time goes on between reads; an ended one's stays.
        render: (r, ticked = 0) => duration(r.elapsedSeconds + (r.terminatedAt || r.status === 'PENDING' ? 0 : ticked)),
    },
    { key: 'AGENT', label: 'Agent', render: (r) => r.agent ?? '—' },
    { key: 'PRIORITY', label: 'Priority', render: (r) => String(r.priority) },
    { key: 'QUEUE_POSITION', label: 'Queue', render: (r) => (r.queuePosition === null ? '—' : `#${r.queuePosition}`) },
    { key: 'RESULT', label: 'Result', render: (r) => r.result },
    { key: 'STATUS_INFO', label: 'Status info', render: (r) => r.statusInfo ?? '' },
    {
        key: 'STATUS_CHANGED_BY',
        label: 'Changed by',
        render: (r) => r.statusChangedBy.user?.email ?? `system (${r.statusChangedBy.rule ?? 'rule'})`,
    },
    {
        key: 'EXPIRY',
        label: 'Reclaimed',
        render: (r) => (r.expiry ? `${when(r.expiry.at)} (${r.expiry.reason.toLowerCase().replace(/_/g, ' ')})` : '—'),
    },
    {
        key: 'MOUNTS',
        label: 'Folders',
        render: (r) => r.mounts.map((m) => `${m.path.replace(/^\/home\/work\//, '')}${m.readOnly ? ' (ro)' : ''}`).join(', ') || '—',
    },
    {
        key: 'UTILIZATION',
        label: 'Use',
        sort: 'CPU_USED',
        render: (r) => r.utilization.map((u) => `${slotLabel(u.slot)} ${amount(u.slot, u.current)}`).join(', ') || '—',
    },
];
