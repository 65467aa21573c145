// What the page calls the API's names: limit layers, slots, session types, counts. The API
// speaks in enum values and slot keys; people read these.
const LAYERS = {
    KEYPAIR: 'Keypair',
    PROJECT: 'Project',
    DOMAIN: 'Domain',
    RESOURCE_GROUP: 'Resource group',
};
const SLOTS = {
    cpu: 'CPU',
    mem: 'Memory',
    'cuda.device': 'CUDA GPU',
    'cuda.shares': 'CUDA GPU shares',
    'rocm.device': 'ROCm GPU',
};
const TYPES = {
    INTERACTIVE: 'Interactive',
    BATCH: 'Batch',
    INFERENCE: 'Inference',
    UPLOAD: 'Upload',
};
/** A limit layer (`KEYPAIR`) as people say it (`Keypair`). */
export function layerLabel(layer) {
    return LAYERS[layer] ?? layer;
}
/** A slot (`cuda.device`) as people say it (`CUDA GPU`); an unknown one as it is. */
export function slotLabel(slot) {
    return SLOTS[slot] ?? slot;
}
/** A session type (`INTERACTIVE`) as people say it (`Interactive`). */
export function typeLabel(type) {
    return TYPES[type] ?? type;
}
/** `n` things: `1 core`, `2 cores`, `0.5 cores`. */
export function counted(n, one, many) {
    return `${n} ${Number(n) === 1 ? one : many}`;
}
/** A status as a badge says it: `PULLING 43 %` while the image is pulled. */
export function statusLabel(status, pull) {
    return pull ? `${status} ${pull.percent} %` : status;
}
