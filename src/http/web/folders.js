// Folders: the project's folders the caller sees, each with its use against its quota and
// the sessions that mount it; its files listed (a directory opens), downloaded and
// uploaded through `/folders/{id}/files/…` with the signed-in token.
import { ApiError, gql, token } from './api.js';
import { byId, bytes, fill, h, when } from './dom.js';
const FOLDERS = `query PageFolders($p: ID!) { folders(projectId: $p) { id name scope access quotaBytes
  usage { bytes files } mountedBy { name } } }`;
/** Where the open folder's listing is: the folder and the path inside it. */
let browsing = null;
function filesUrl(folder, path) {
    const encoded = path.split('/').filter(Boolean).map(encodeURIComponent).join('/');
    return `/folders/${encodeURIComponent(folder.id)}/files/${encoded}`;
}
/** A request of the files routes; its JSON error's message when refused. */
async function files(method, url, body) {
    const response = await fetch(url, { method, body, headers: { Authorization: `Bearer ${token() ?? ''}` } });
    if (!response.ok) {
        const refused = (await response.json().catch(() => null));
        throw new Error(refused?.error?.message ?? `${response.status} ${response.statusText}`);
    }
    return response;
}
function say(text) {
    fill(byId('folders-line'), text);
}
async function download(folder, path, name) {
    try {
        const blob = await (await files('GET', filesUrl(folder, path))).blob();
        const link = h('a', { href: URL.createObjectURL(blob), download: name, hidden: true });
        document.body.append(link);
        link.click();
        link.remove();
        URL.revokeObjectURL(link.href);
    }
    catch (e) {
        say(`${name} could not be downloaded: ${String(e instanceof Error ? e.message : e)}`);
    }
}
async function upload(project, folder, path, chosen) {
    for (const file of Array.from(chosen ?? [])) {
        say(`Uploading ${file.name}…`);
        try {
            await files('PUT', filesUrl(folder, `${path}/${file.name}`), file);
            say(`Uploaded ${file.name}.`);
        }
        catch (e) {
            say(`${file.name} was not uploaded: ${String(e instanceof Error ? e.message : e)}`);
            break;
        }
    }
    await openFolders(project);
}
/** The listing of the open folder's directory, below its line. */
async function listing(project, folder, path) {
    const answer = (await (await files('GET', filesUrl(folder, path))).json());
    const up = path.split('/').filter(Boolean).slice(0, -1).join('/');
    return h('div', { class: 'files', 'data-files': folder.name }, h('p', {}, h('strong', {}, `${folder.name}/${path}`), path ? h('button', { type: 'button', onclick: () => void browse(project, folder, up) }, 'Up') : null), answer.entries.length
        ? h('ul', {}, answer.entries.map((e) => h('li', {}, e.kind === 'directory'
            ? h('button', { type: 'button', onclick: () => void browse(project, folder, `${path}/${e.name}`) }, `${e.name}/`)
            : e.kind === 'file'
                ? h('button', { type: 'button', 'data-download': e.name, onclick: () => void download(folder, `${path}/${e.name}`, e.name) }, e.name)
                : h('span', { class: 'muted' }, `${e.name} (${e.kind})`), e.kind === 'file' ? ` ${bytes(e.size)}` : '', e.modifiedAt ? h('span', { class: 'muted' }, ` ${when(e.modifiedAt)}`) : '')))
        : h('p', { class: 'muted' }, 'Empty.'), answer.truncated ? h('p', { class: 'muted' }, 'More files than are shown.') : null, folder.access === 'READ_WRITE'
        ? h('label', {}, 'Upload: ', h('input', {
            type: 'file',
            multiple: true,
            'data-upload': folder.name,
            onchange: (ev) => void upload(project, folder, path, ev.target.files),
        }))
        : null);
}
async function browse(project, folder, path) {
    browsing = { folder, path: path.split('/').filter(Boolean).join('/') };
    await openFolders(project);
}
/** The use of a folder against its quota. */
function use(f) {
    if (!f.usage)
        return `quota ${bytes(f.quotaBytes)} (use not measured here)`;
    return h('span', {}, h('progress', { max: f.quotaBytes, value: f.usage.bytes, 'aria-label': `${f.name}: use of its quota` }), ` ${bytes(f.usage.bytes)} of ${bytes(f.quotaBytes)}, ${f.usage.files} files`);
}
/** Opens (or redraws) the folders dialog of `project`. */
export async function openFolders(project) {
    const dialog = byId('folders-dialog');
    byId('folders-close').onclick = () => {
        browsing = null;
        dialog.close();
    };
    try {
        const folders = (await gql(FOLDERS, { p: project })).folders;
        const open = browsing && folders.find((f) => f.id === browsing?.folder.id);
        fill(byId('folders-list'), folders.length
            ? h('table', { class: 'folders-table' }, h('thead', {}, h('tr', {}, h('th', {}, 'Folder'), h('th', {}, 'Scope'), h('th', {}, 'Use'), h('th', {}, 'Mounted by'))), h('tbody', {}, folders.map((f) => h('tr', { 'data-folder': f.name }, h('td', {}, h('button', { type: 'button', onclick: () => void browse(project, f, '') }, f.name)), h('td', {}, `${f.scope.toLowerCase()}${f.access === 'READ_ONLY' ? ', read-only' : ''}`), h('td', {}, use(f)), h('td', {}, f.mountedBy.map((s) => s.name).join(', ') || '—')))))
            : h('p', { class: 'muted' }, 'No folder in this project yet.'), open && browsing ? await listing(project, open, browsing.path) : null);
    }
    catch (e) {
        say(`The folders could not be read: ${e instanceof ApiError || e instanceof Error ? e.message : String(e)}`);
    }
    if (!dialog.open)
        dialog.showModal();
}
