// What the page calls the API's names: limit layers, slots, session types, counts. The API
// speaks in enum values and slot keys; people read these.

const LAYERS: Record<string, string> = {
  KEYPAIR: 'Keypair',
  PROJECT: 'Project',
  DOMAIN: 'Domain',
  RESOURCE_GROUP: 'Resource group',
};

const SLOTS: Record<string, string> = {
  cpu: 'CPU',
  mem: 'Memory',
  'cuda.device': 'CUDA GPU',
  'cuda.shares': 'CUDA GPU shares',
  'rocm.device': 'ROCm GPU',
};

const TYPES: Record<string, string> = {
  INTERACTIVE: 'Interactive',
  BATCH: 'Batch',
  INFERENCE: 'Inference',
  UPLOAD: 'Upload',
};

/** A limit layer (`KEYPAIR`) as people say it (`Keypair`). */
export function layerLabel(layer: string): string {
  return LAYERS[layer] ?? layer;
}

/** A slot (`cuda.device`) as people say it (`CUDA GPU`); an unknown one as it is. */
export function slotLabel(slot: string): string {
  return SLOTS[slot] ?? slot;
}

/** A session type (`INTERACTIVE`) as people say it (`Interactive`). */
export function typeLabel(type: string): string {
  return TYPES[type] ?? type;
}

/** `n` things: `1 core`, `2 cores`, `0.5 cores`. */
export function counted(n: number | string, one: string, many: string): string {
  return `${n} ${Number(n) === 1 ? one : many}`;
}

/** How far an image's pull is, as the API gives it while a session is PULLING. */
export interface Pull {
  percent: number;
}

/** A status as a badge says it: `PULLING 43 %` while the image is pulled. */
export function statusLabel(status: string, pull: Pull | null | undefined): string {
  return pull ? `${status} ${pull.percent} %` : status;
}
