// The resource panel: one bar per slot in the chosen view (the choice kept through the
// API); hovering or focusing a bar shows every layer's limit and use, the binding one named.

import { ApiError, gql } from './api.js';
import { amount, byId, fill, h } from './dom.js';
import { layerLabel, slotLabel } from './labels.js';

interface Layer {
  layer: string;
  limit: number | null;
  used: number;
  remaining: number | null;
}

interface SlotUsage {
  slot: string;
  used: number;
  limit: number | null;
  remaining: number | null;
  bindingLayer: string | null;
  layers: Layer[];
}

interface PanelState {
  project: { id: string };
  viewer: { settings: { resourcePanelView: string } };
}

const VIEWS: [string, string][] = [
  ['MY_IN_RESOURCE_GROUP', 'My use in this resource group'],
  ['MY_TOTAL', 'My total use'],
  ['TOTAL_IN_RESOURCE_GROUP', 'Everyone in this resource group'],
];

const PANEL = `query PagePanel($p: ID!, $view: ResourcePanelView!) { resourcePanel(projectId: $p, view: $view) {
  view resourceGroup slots { slot used limit remaining bindingLayer layers { layer limit used remaining } } } }`;

let wired = false;
/** Reads asked so far: only the latest answer is drawn. */
let asked = 0;

/** Draws the panel in the viewer's view (and wires its switcher the first time). */
export async function renderPanel(s: PanelState): Promise<void> {
  const select = byId<HTMLSelectElement>('panel-view');
  if (!wired) {
    wired = true;
    fill(select, VIEWS.map(([value, label]) => h('option', { value }, label)));
    select.addEventListener('change', async () => {
      try {
        const answer = await gql<{ setResourcePanelView: { resourcePanelView: string } }>(
          'mutation PageView($view: ResourcePanelView!) { setResourcePanelView(view: $view) { resourcePanelView } }',
          { view: select.value },
        );
        s.viewer.settings.resourcePanelView = answer.setResourcePanelView.resourcePanelView;
      } catch {
        select.value = s.viewer.settings.resourcePanelView;
      }
      await renderPanel(s);
    });
  }
  select.value = s.viewer.settings.resourcePanelView;
  let panel: { resourceGroup: string | null; slots: SlotUsage[] };
  const ask = ++asked;
  try {
    panel = (await gql<{ resourcePanel: typeof panel }>(PANEL, { p: s.project.id, view: s.viewer.settings.resourcePanelView }))
      .resourcePanel;
  } catch (e) {
    if (ask !== asked) return;
    fill(byId('bars'), h('p', {}, `The panel could not be read: ${e instanceof ApiError ? e.message : String(e)}`));
    return;
  }
  if (ask !== asked) return;
  fill(byId('panel-group'), panel.resourceGroup ? `Resource group: ${panel.resourceGroup}` : 'Every resource group');
  fill(byId('bars'), panel.slots.map(bar));
}

/** Sets a bar's width through the CSSOM (the page's policy allows no inline style attribute). */
function fillTo(el: HTMLElement, percent: number): HTMLElement {
  el.style.width = `${percent.toFixed(1)}%`;
  return el;
}

function bar(u: SlotUsage): HTMLElement {
  // The bar shows how full the binding layer is: `limit` is that layer's own, and what the
  // view counts as used may be another population (all of one's keypairs, say).
  const binding = u.layers.find((l) => l.layer === u.bindingLayer);
  const share = binding && binding.limit ? Math.min(100, (binding.used / binding.limit) * 100) : 0;
  const tip = `tip-${u.slot.replace(/[^a-z0-9]/gi, '-')}`;
  const text =
    u.limit === null
      ? `${amount(u.slot, u.used)} used, no limit`
      : `${amount(u.slot, u.used)} used · ${amount(u.slot, u.remaining ?? 0)} left of ${amount(u.slot, u.limit)} (${layerLabel(u.bindingLayer ?? '')})`;
  return h(
    'div',
    { class: 'bar', tabindex: 0, 'aria-describedby': tip, 'data-slot': u.slot },
    h('div', { class: 'bar-label' }, h('strong', {}, slotLabel(u.slot)), ' ', text),
    h(
      'div',
      {
        class: 'bar-track',
        role: 'meter',
        'aria-label': `${slotLabel(u.slot)} used`,
        'aria-valuemin': 0,
        'aria-valuemax': binding?.limit ?? u.used,
        'aria-valuenow': binding?.used ?? u.used,
        'aria-valuetext': text,
      },
      fillTo(h('div', { class: 'bar-fill' }), share),
    ),
    h(
      'div',
      { class: 'tooltip', role: 'tooltip', id: tip },
      h(
        'p',
        {},
        u.bindingLayer
          ? `Binding: ${layerLabel(u.bindingLayer)} (${amount(u.slot, u.remaining ?? 0)} left)`
          : 'No layer limits this.',
      ),
      h(
        'table',
        {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Layer'), h('th', {}, 'Limit'), h('th', {}, 'Used'), h('th', {}, 'Left'))),
        h(
          'tbody',
          {},
          u.layers.map((l) =>
            h(
              'tr',
              { class: l.layer === u.bindingLayer ? 'binding' : '' },
              h('td', {}, layerLabel(l.layer), l.layer === u.bindingLayer ? ' (binding)' : ''),
              h('td', {}, l.limit === null ? 'unlimited' : amount(u.slot, l.limit)),
              h('td', {}, amount(u.slot, l.used)),
              h('td', {}, l.remaining === null ? '—' : amount(u.slot, l.remaining)),
            ),
          ),
        ),
      ),
    ),
  );
}
