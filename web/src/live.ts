// Subscriptions over `/graphql/ws` (the graphql-transport-ws protocol), each on a socket
// of its own, that come back after a dropped connection: the caller says where to resume.

import { gql, token } from './api.js';

/** The WebSocket address of `path` on this server (`ws:` or `wss:` as the page is served). */
export function wsUrl(path: string): URL {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url;
}

/** What a WebSocket's first message carries to authenticate it (`connection_init`'s payload). */
export function authorization(): { authorization: string } {
  return { authorization: `Bearer ${token() ?? ''}` };
}

export interface Subscription {
  close(): void;
}

export interface Handlers<T> {
  /** Each `next` payload's data. */
  next(data: T): void;
  /** The variables to (re)subscribe with: a feed resumes from its last cursor. */
  variables(): Record<string, unknown>;
  /** The connection is up (true) or down and retrying (false). */
  state?(up: boolean): void;
  /** An error the server sent for the operation; it ends the subscription unless it says retry. */
  error?(code: string, message: string): boolean;
  /** The server completed the operation (the followed thing ended). */
  complete?(): void;
}

/** The longest wait between two tries to reconnect: a server back up is seen within it. */
const MOST_DELAY = 4000;

/** Subscribes to `query`, reconnecting after a drop (0.5 s, doubling to 4 s, and at once
 * when the browser is back online) until closed. */
export function subscribe<T>(query: string, handlers: Handlers<T>): Subscription {
  let socket: WebSocket | null = null;
  let closed = false;
  let delay = 500;
  let timer: number | undefined;
  const now = (): void => {
    if (closed || socket) return;
    window.clearTimeout(timer);
    connect();
  };
  window.addEventListener('online', now);

  const connect = (): void => {
    if (closed) return;
    const ws = new WebSocket(wsUrl('/graphql/ws'), 'graphql-transport-ws');
    socket = ws;
    let finished = false;
    ws.onopen = () => {
      ws.send(JSON.stringify({ type: 'connection_init', payload: authorization() }));
    };
    ws.onmessage = (event) => {
      const message = JSON.parse(String(event.data));
      switch (message.type) {
        case 'connection_ack':
          delay = 500;
          handlers.state?.(true);
          ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables: handlers.variables() } }));
          break;
        case 'ping':
          ws.send(JSON.stringify({ type: 'pong' }));
          break;
        case 'next':
          if (message.payload?.errors?.length) {
            const e = message.payload.errors[0];
            if (!(handlers.error?.(e.extensions?.code ?? 'ERROR', e.message) ?? false)) finished = true;
            else ws.close(1000);
          } else if (message.payload?.data) {
            handlers.next(message.payload.data as T);
          }
          break;
        case 'error': {
          const e = message.payload?.[0] ?? {};
          const retry = handlers.error?.(e.extensions?.code ?? 'ERROR', e.message ?? 'error') ?? false;
          if (!retry) finished = true;
          ws.close(1000);
          break;
        }
        case 'complete':
          finished = true;
          handlers.complete?.();
          ws.close(1000);
          break;
      }
    };
    ws.onclose = (event) => {
      if (socket === ws) socket = null;
      // 4403: the token no longer allows it; retrying would not help. A token revoked
      // altogether sends the page back to signing in (the probe's refusal does).
      if (closed || finished || event.code === 4403) {
        if (event.code === 4403) {
          handlers.error?.('FORBIDDEN', 'Your credentials no longer allow this.');
          void gql('query PageProbe { viewer { user { email } } }').catch(() => undefined);
        }
        return;
      }
      handlers.state?.(false);
      timer = window.setTimeout(connect, delay);
      delay = Math.min(delay * 2, MOST_DELAY);
    };
  };
  connect();
  return {
    close() {
      closed = true;
      window.clearTimeout(timer);
      window.removeEventListener('online', now);
      socket?.close(1000);
    },
  };
}
