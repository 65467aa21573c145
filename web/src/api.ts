// GraphQL over HTTP with the signed-in token, and the token itself (kept in the browser's
// session storage: it lasts as long as the tab).

const TOKEN_KEY = 'sessiond.page.token';

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** One error of an answer, as the server words it. */
export interface GqlError {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; field?: string; problems?: Problem[] };
}

/** A problem with one field of an input. */
export interface Problem {
  code: string;
  field: string | null;
  message: string;
}

/** An answer with errors: the first one's code and message, and every error. */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly errors: GqlError[],
  ) {
    super(message);
  }

  /** Problems by field path, from every error that names one. */
  problems(): Problem[] {
    const out: Problem[] = [];
    for (const e of this.errors) {
      for (const p of e.extensions?.problems ?? []) out.push(p);
      if (!e.extensions?.problems && e.extensions?.field) {
        out.push({ code: e.extensions.code ?? 'ERROR', field: e.extensions.field, message: e.message });
      }
    }
    return out;
  }
}

/** Called when the server no longer accepts the token (revoked, or deleted). */
let onRefused: (() => void) | null = null;

/** What to do when the server refuses the signed-in token: back to signing in. */
export function whenTokenRefused(handler: () => void): void {
  onRefused = handler;
}

/** Tells the page that the server refused the token. */
export function tokenRefused(): void {
  onRefused?.();
}

/** Sends one operation and returns its data; any error in the answer throws an ApiError. */
export async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  const t = token();
  if (t) headers.authorization = `Bearer ${t}`;
  let response: Response;
  try {
    response = await fetch('/graphql', { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  } catch {
    throw new ApiError('NETWORK', 'The server cannot be reached.', []);
  }
  let body: { data?: T; errors?: GqlError[] };
  try {
    body = await response.json();
  } catch {
    throw new ApiError('HTTP_' + response.status, `The server answered ${response.status}.`, []);
  }
  if (body.errors?.length) {
    const first = body.errors[0];
    const code = first.extensions?.code ?? 'ERROR';
    if (code === 'UNAUTHENTICATED' && t) tokenRefused();
    throw new ApiError(code, first.message, body.errors);
  }
  if (body.data === undefined || body.data === null) throw new ApiError('ERROR', 'The answer had no data.', []);
  return body.data;
}
