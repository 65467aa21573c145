// The launcher: image, type, resource group, resources, cluster size, environment, startup
// command, the project's folders to mount, and "Launch Multiple Sessions" with a count. The dry run (`checkLaunch`) is
// shown as the form changes, before Launch is pressed; errors are shown by field.

import { ApiError, gql, type Problem } from './api.js';
import { byId, fill, h } from './dom.js';

interface LauncherState {
  project: { id: string };
}

interface Image {
  name: string;
  supportedTypes: string[];
}

interface Verdict {
  valid: boolean;
  fitsNow: boolean;
  problems: Problem[];
  pendingReasons: { code: string; message: string }[];
}

const CATALOG = `query PageCatalog($p: ID!) { images { name supportedTypes }
  resourceGroups(projectId: $p) { name allowedSessionTypes }
  resourcePanel(projectId: $p, view: MY_TOTAL) { slots { slot } } }`;

const CHECK = `query PageCheck($count: Int, $input: LaunchSessionInput!) { checkLaunch(count: $count, input: $input) {
  valid fitsNow problems { code field message } pendingReasons { code message } } }`;

/** The project's folders the caller sees, read each time the launcher opens. */
const FOLDERS = `query PageLaunchFolders($p: ID!) { folders(projectId: $p) { id name access } }`;

interface FolderChoice {
  id: string;
  name: string;
  access: 'READ_ONLY' | 'READ_WRITE';
}

/** One session keeps its name; several are named `<name>-1` … `<name>-<count>`. */
const LAUNCH_ONE = `mutation PageLaunchOne($input: LaunchSessionInput!) { launchSession(input: $input) { session { id } } }`;
const LAUNCH = `mutation PageLaunch($count: Int!, $input: LaunchSessionInput!) {
  launchSessions(count: $count, input: $input) { sessions { id } } }`;

/** The form's fields by the input path the API names in its problems. The resources go in
 * the order the form sends them: CPU, memory, then the accelerator. */
const FIELDS: Record<string, string> = {
  'input.name': 'launch-name',
  'input.image': 'launch-image',
  'input.type': 'launch-type',
  'input.resourceGroup': 'launch-group',
  'input.resources[0]': 'launch-cpu',
  'input.resources[1]': 'launch-mem',
  'input.resources[2]': 'launch-accel',
  'input.resources': 'launch-cpu',
  'input.clusterSize': 'launch-cluster',
  'input.environment': 'launch-env',
  'input.startupCommand': 'launch-command',
  'input.mounts': 'launch-mounts',
  count: 'launch-count',
};

/** The field a problem is about: its path, or the most specific known prefix of it. */
function fieldOf(p: Problem): string | null {
  const path = p.field ?? (p.code === 'NAME_TAKEN' ? 'input.name' : null);
  if (!path) return null;
  const keys = Object.keys(FIELDS).sort((a, b) => b.length - a.length);
  const key = keys.find((f) => path === f || path.startsWith(`${f}[`) || path.startsWith(`${f}.`));
  return key ? FIELDS[key] : null;
}

/** Fields the user has changed since the launcher opened: only their problems are marked, so
 * an empty form does not open full of errors. Pressing Launch marks every field. */
const touched = new Set<string>();
let submitted = false;

let checkTimer: number | undefined;
let asked = 0;

function value(id: string): string {
  return byId<HTMLInputElement>(id).value.trim();
}

/** The form as the API's input; problems it can tell before asking. */
function input(project: string): { count: number; input: Record<string, unknown>; local: Problem[] } {
  const local: Problem[] = [];
  const resources: { slot: string; amount: number }[] = [
    { slot: 'cpu', amount: Number(value('launch-cpu')) },
    { slot: 'mem', amount: Math.round(Number(value('launch-mem')) * 1024 ** 3) },
  ];
  const accelerator = value('launch-accel-slot');
  const accelerators = Number(value('launch-accel') || '0');
  if (accelerator && accelerators > 0) resources.push({ slot: accelerator, amount: accelerators });
  const environment: { name: string; value: string }[] = [];
  for (const line of byId<HTMLTextAreaElement>('launch-env').value.split('\n')) {
    if (!line.trim()) continue;
    const at = line.indexOf('=');
    if (at <= 0) {
      local.push({ code: 'INVALID', field: 'input.environment', message: `“${line}” is not NAME=value.` });
      continue;
    }
    environment.push({ name: line.slice(0, at).trim(), value: line.slice(at + 1) });
  }
  const mounts = [...document.querySelectorAll<HTMLInputElement>('#launch-mount-list input[data-folder]:checked')].map(
    (box) => ({
      folder: box.dataset.folder,
      readOnly: byId<HTMLSelectElement>(`mount-mode-${box.dataset.index}`).value === 'ro',
    }),
  );
  const multiple = byId<HTMLInputElement>('launch-multiple').checked;
  const count = multiple ? Number(value('launch-count')) : 1;
  return {
    count,
    local,
    input: {
      projectId: project,
      name: value('launch-name'),
      image: value('launch-image'),
      type: value('launch-type'),
      resourceGroup: value('launch-group') || null,
      resources,
      clusterSize: Number(value('launch-cluster') || '1'),
      environment,
      startupCommand: value('launch-command') || null,
      mounts,
    },
  };
}

/** Marks each problem at its field (of the fields the user has touched, or all once Launch
 * was pressed); returns the problems shown. */
function showProblems(problems: Problem[]): Problem[] {
  for (const el of document.querySelectorAll('#launch-form .field-error')) el.remove();
  for (const id of Object.values(FIELDS)) {
    byId(id).removeAttribute('aria-invalid');
    byId(id).removeAttribute('aria-describedby');
  }
  const shown: Problem[] = [];
  const marked = new Set<string>();
  for (const p of problems) {
    const id = fieldOf(p);
    if (id && !submitted && !touched.has(id)) continue;
    shown.push(p);
    if (!id || marked.has(id)) continue;
    marked.add(id);
    const field = byId(id);
    field.setAttribute('aria-invalid', 'true');
    const note = h('p', { class: 'field-error', id: `${id}-error` }, p.message);
    field.setAttribute('aria-describedby', `${id}-error`);
    field.closest('.field')?.append(note);
  }
  return shown;
}

function showVerdict(v: Verdict | null, text?: string): void {
  const el = byId('verdict');
  const submit = byId<HTMLButtonElement>('launch-submit');
  if (!v) {
    fill(el, text ?? '');
    el.className = '';
    submit.disabled = false;
    return;
  }
  // Launch is offered only when the dry run says it can launch.
  submit.disabled = !v.valid;
  if (!v.valid) {
    const shown = showProblems(v.problems);
    if (!shown.length) {
      // Nothing touched is wrong yet: say what is missing, without alarm.
      el.className = '';
      fill(el, v.problems.some((p) => fieldOf(p) === 'launch-name') ? 'Name the session to launch it.' : 'Complete the form to launch.');
      return;
    }
    el.className = 'verdict-bad';
    fill(el, h('strong', {}, 'Cannot launch: '), shown.map((p) => p.message).join(' '));
    return;
  }
  showProblems([]);
  if (v.fitsNow) {
    el.className = 'verdict-good';
    fill(el, h('strong', {}, 'Fits now: '), 'it will start as soon as it is launched.');
  } else {
    el.className = 'verdict-wait';
    fill(el, h('strong', {}, 'Will wait: '), v.pendingReasons.map((r) => r.message).join(' '));
  }
}

/** Asks the dry run for the form as it is (the latest answer wins). */
async function check(project: string): Promise<void> {
  const ask = ++asked;
  const { count, input: i, local } = input(project);
  if (local.length) {
    showVerdict({ valid: false, fitsNow: false, problems: local, pendingReasons: [] });
    return;
  }
  try {
    const v = (await gql<{ checkLaunch: Verdict }>(CHECK, { count, input: i })).checkLaunch;
    if (ask !== asked) return;
    showVerdict(v);
  } catch (e) {
    if (ask !== asked) return;
    const problems = e instanceof ApiError ? e.problems() : [];
    showVerdict({
      valid: false,
      fitsNow: false,
      problems: problems.length ? problems : [{ code: 'ERROR', field: null, message: String(e instanceof ApiError ? e.message : e) }],
      pendingReasons: [],
    });
  }
}

let catalog: Promise<void> | null = null;
let images: Image[] = [];

/** The images that support the chosen type, the current choice kept when it still fits. */
function fillImages(): void {
  const select = byId<HTMLSelectElement>('launch-image');
  const type = value('launch-type');
  const chosen = select.value;
  const fitting = images.filter((i) => i.supportedTypes.includes(type));
  fill(select, fitting.map((i) => h('option', { value: i.name }, i.name)));
  if (fitting.some((i) => i.name === chosen)) select.value = chosen;
}

async function loadCatalog(project: string): Promise<void> {
  type Answer = {
    images: Image[];
    resourceGroups: { name: string }[];
    resourcePanel: { slots: { slot: string }[] };
  };
  const data = await gql<Answer>(CATALOG, { p: project });
  images = data.images;
  fillImages();
  byId('launch-type').addEventListener('change', fillImages);
  fill(byId('launch-group'), data.resourceGroups.map((g) => h('option', { value: g.name }, g.name)));
  const accelerators = data.resourcePanel.slots.map((s) => s.slot).filter((s) => s !== 'cpu' && s !== 'mem');
  fill(
    byId('launch-accel-slot'),
    h('option', { value: '' }, 'none'),
    accelerators.map((s) => h('option', { value: s }, s)),
  );
}

/** A line per folder: mount it (at its name), read-write or read-only (only that when the
 * caller may only read it). */
async function loadFolders(project: string): Promise<void> {
  const folders = (await gql<{ folders: FolderChoice[] }>(FOLDERS, { p: project })).folders;
  const list = byId('launch-mount-list');
  list.className = folders.length ? 'mounts' : 'mounts muted';
  fill(
    list,
    folders.length
      ? folders.map((f, i) =>
          h(
            'div',
            { class: 'mount' },
            h('label', {}, h('input', { type: 'checkbox', 'data-folder': f.id, 'data-index': i }), ` ${f.name}`),
            h(
              'select',
              { id: `mount-mode-${i}`, 'aria-label': `How ${f.name} is mounted` },
              f.access === 'READ_WRITE' ? h('option', { value: 'rw' }, 'read-write') : null,
              h('option', { value: 'ro' }, 'read-only'),
            ),
          ),
        )
      : 'No folder in this project.',
  );
}

/** Opens the launcher; `launched` is called after a launch. */
export function openLauncher(s: LauncherState, launched: () => void): void {
  const dialog = byId<HTMLDialogElement>('launcher');
  const form = byId<HTMLFormElement>('launch-form');
  // A catalog that could not be read (the server away) is asked again at the next click.
  catalog ??= loadCatalog(s.project.id).catch((e: unknown) => {
    catalog = null;
    throw e;
  });
  const recheck = (e?: Event): void => {
    const id = (e?.target as HTMLElement | null)?.id;
    if (id) touched.add(id === 'launch-accel-slot' ? 'launch-accel' : id);
    window.clearTimeout(checkTimer);
    checkTimer = window.setTimeout(() => void check(s.project.id), 200);
  };
  form.oninput = recheck;
  form.onchange = recheck;
  byId<HTMLInputElement>('launch-multiple').onchange = (e) => {
    byId('launch-count-field').hidden = !byId<HTMLInputElement>('launch-multiple').checked;
    recheck(e);
  };
  byId('launch-cancel').onclick = () => dialog.close();
  form.onsubmit = async (e) => {
    e.preventDefault();
    submitted = true;
    const { count, input: i, local } = input(s.project.id);
    if (local.length) {
      showVerdict({ valid: false, fitsNow: false, problems: local, pendingReasons: [] });
      return;
    }
    const button = byId<HTMLButtonElement>('launch-submit');
    button.disabled = true;
    try {
      const made =
        count === 1
          ? (await gql<{ launchSession: { session: { id: string } } }>(LAUNCH_ONE, { input: i }), 1)
          : (await gql<{ launchSessions: { sessions: { id: string }[] } }>(LAUNCH, { count, input: i })).launchSessions
              .sessions.length;
      dialog.close();
      // The next launch starts from a fresh form.
      form.reset();
      byId('launch-count-field').hidden = true;
      fillImages();
      touched.clear();
      submitted = false;
      showProblems([]);
      showVerdict(null);
      fill(byId('status-line'), made === 1 ? 'Launched 1 session.' : `Launched ${made} sessions.`);
      launched();
    } catch (err) {
      const problems = err instanceof ApiError ? err.problems() : [];
      if (err instanceof ApiError && err.code === 'NAME_TAKEN' && !problems.length) {
        problems.push({ code: err.code, field: 'input.name', message: err.message });
      }
      showProblems(problems);
      showVerdict(null, err instanceof ApiError ? err.message : String(err));
    }
  };
  Promise.all([catalog, loadFolders(s.project.id)]).then(
    () => {
      touched.clear();
      submitted = false;
      if (!dialog.open) dialog.showModal();
      byId('launch-name').focus();
      void check(s.project.id);
    },
    (e: unknown) => {
      fill(byId('status-line'), `The launcher could not open: ${e instanceof ApiError ? e.message : String(e)} Try again.`);
    },
  );
}
