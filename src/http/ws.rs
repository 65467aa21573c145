//! GraphQL over WebSocket at `/graphql/ws`: the `graphql-transport-ws` protocol (the
//! `graphql-ws` npm client's) to the letter, and the legacy `graphql-ws` protocol
//! (subscriptions-transport-ws) for older clients. The server answers with the subprotocol
//! it actually serves.
//!
//! Our own connection loop, because the protocol's close codes are part of the contract:
//! 4400 a message we cannot understand, 4401 an operation before `connection_ack`, 4403 a
//! bad token in `connection_init`, 4406 no subprotocol we speak, 4408 no `connection_init`
//! in time, 4409 an operation id already running, 4429 a second `connection_init`. Beyond
//! the protocol: 1013 when the server (or the user) already has its maximum of
//! connections, 1001 when a peer stays silent (no pong to our pings) or cannot take
//! messages for the keepalive timeout, 1009 for a message over the size limit. One
//! operation too many on a connection, or over the user's share of subscriptions, is
//! refused with `LIMIT_EXCEEDED`, and the connection stays.
//!
//! A connection counts against `--max-ws-connections` and the user's share only once it
//! has authenticated. Before that it is one of at most `--max-ws-unauthenticated` waiting
//! ones, for `--ws-init-timeout-ms` at most; when they are all taken, the one that has
//! waited longest is closed (1013) to make room, so that silent connections cannot lock
//! anyone out.
//!
//! Credentials are checked again for every operation (through a cache of a few seconds)
//! and whenever they change anywhere ([`crate::domain::directory::credentials`]): a token revoked,
//! or its user gone, closes the connection with 4403 within seconds. Queries and mutations
//! count against `--max-in-flight` like HTTP requests.
//!
//! Every operation runs in its own task and hands its messages to the connection through a
//! small bounded queue: a client that does not read stops its operations' tasks, whose
//! subscriptions then fall behind the event bus and end with `LAGGED`. Nothing grows.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::domain::DomainError;
use crate::domain::directory::auth::{self, Viewer};
use crate::domain::directory::credentials::Credentials;
use crate::domain::live::shares::{Held, Share};
use crate::graphql::errors::{
    ApiError, GRAPHQL_VALIDATION_FAILED, INTERNAL_MESSAGE, LIMIT_EXCEEDED, UNAVAILABLE, finalize_errors,
};
use crate::graphql::{limits, prepare_long_lived};
use async_graphql::parser::types::OperationType;

mod operations;

use super::AppState;
use super::waiting::{Arrival, EVICTED, too_big};

/// Messages an operation may have queued for its connection before it waits.
const QUEUE: usize = 16;
/// Longest operation id accepted.
const MAX_ID: usize = 128;
/// How long a closing connection waits for the peer's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// The subprotocols we speak, in the order we prefer them.
const PROTOCOLS: [&str; 2] = [Protocol::TransportWs.name(), Protocol::Legacy.name()];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// `graphql-transport-ws`.
    TransportWs,
    /// `graphql-ws`: the protocol of the retired subscriptions-transport-ws.
    Legacy,
}

impl Protocol {
    const fn name(self) -> &'static str {
        match self {
            Protocol::TransportWs => "graphql-transport-ws",
            Protocol::Legacy => "graphql-ws",
        }
    }

    fn named(name: &str) -> Option<Self> {
        [Protocol::TransportWs, Protocol::Legacy].into_iter().find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

pub async fn upgrade(State(state): State<AppState>, headers: axum::http::HeaderMap, ws: WebSocketUpgrade) -> Response {
    if !super::origins::websocket_allowed(&headers, &state.limits.cors_origins) {
        return foreign_origin();
    }
    let limits = &state.limits.ws;
    let ws = ws
        .protocols(PROTOCOLS)
        .max_message_size(limits.ws_max_message_bytes)
        .max_frame_size(limits.ws_max_message_bytes)
        // Small buffers: an idle connection should cost little.
        .read_buffer_size(4 << 10)
        .write_buffer_size(0);
    let protocol = ws.selected_protocol().and_then(|p| p.to_str().ok()).and_then(Protocol::named);
    ws.on_upgrade(move |mut socket| async move {
        let Some(protocol) = protocol else {
            close(&mut socket, 4406, "Subprotocol not acceptable: use graphql-transport-ws or graphql-ws").await;
            return;
        };
        let arrival = state.ws_waiting.arrive();
        let (conn, out_rx) = Connection::new(state, protocol, arrival);
        serve(conn, out_rx, socket).await;
    })
}

/// The answer to an upgrade from a page of another origin: 403, as JSON.
pub(super) fn foreign_origin() -> Response {
    use axum::response::IntoResponse;
    let body = serde_json::json!({"error": {"code": "FORBIDDEN", "message": "a WebSocket is opened from this server's own origin or one it lists (--cors-origin)"}});
    (axum::http::StatusCode::FORBIDDEN, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string())
        .into_response()
}

async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    // A close frame carries at most 123 bytes of reason.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame { code, reason: reason[..end].into() };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

/// What an operation's task hands to its connection.
/// Each names the operation and the start of it (`generation`) it comes from: what a
/// stopped or replaced operation had queued is dropped, never sent.
enum Out {
    Text(String, String, u64),
    /// The last messages of an operation: its id is free again before the client reads them.
    Last(Vec<String>, String, u64),
}

/// Why the loop ends.
struct Closing {
    code: u16,
    reason: String,
    /// A message to send before the close frame.
    before: Option<String>,
}

impl Closing {
    fn new(code: u16, reason: impl Into<String>) -> Self {
        Self { code, reason: reason.into(), before: None }
    }
}

struct Connection {
    state: AppState,
    protocol: Protocol,
    /// Until authenticated: its place among the connections waiting to.
    arrival: Option<Arrival>,
    /// Once authenticated: counts it against `--max-ws-connections`, and against the user's
    /// share of connections.
    _permit: Option<(OwnedSemaphorePermit, Held)>,
    /// Set by a successful `connection_init`.
    viewer: Option<Arc<Viewer>>,
    /// The hash of the token it authenticated with: checked again for each operation.
    token_hash: String,
    init_received: bool,
    /// Running operations by id, with the generation that started them.
    operations: HashMap<String, (u64, AbortHandle)>,
    generation: u64,
    out_tx: mpsc::Sender<Out>,
    /// Names this connection in the log lines of its internal errors.
    log_id: String,
}

impl Drop for Connection {
    fn drop(&mut self) {
        for (_, (_, task)) in self.operations.drain() {
            task.abort();
        }
    }
}

impl Connection {
    fn new(state: AppState, protocol: Protocol, arrival: Arrival) -> (Self, mpsc::Receiver<Out>) {
        let (out_tx, out_rx) = mpsc::channel(QUEUE);
        let conn = Self {
            state,
            protocol,
            arrival: Some(arrival),
            _permit: None,
            viewer: None,
            token_hash: String::new(),
            init_received: false,
            operations: HashMap::new(),
            generation: 0,
            out_tx,
            log_id: format!("ws-{}", uuid::Uuid::new_v4()),
        };
        (conn, out_rx)
    }
}

/// The connection's loop: client messages, operations' messages, the init deadline and the
/// keepalive, until either side closes.
async fn serve(mut conn: Connection, mut out_rx: mpsc::Receiver<Out>, mut socket: WebSocket) {
    {
        let limits = conn.state.limits.ws.clone();
        let init_deadline = tokio::time::sleep(Duration::from_millis(limits.ws_init_timeout_ms));
        tokio::pin!(init_deadline);
        let keepalive = Duration::from_millis(limits.ws_keepalive_ms.max(1));
        let silence = Duration::from_millis(limits.ws_keepalive_timeout_ms.max(1));
        let mut pings = tokio::time::interval_at(Instant::now() + keepalive, keepalive);
        let mut last_heard = Instant::now();
        let mut evicted = conn.arrival.as_mut().and_then(|a| a.evicted.take());
        let mut changes = conn.state.live.credentials.changes();
        changes.mark_unchanged();
        let recheck = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(recheck);
        let mut rechecking = false;
        let closing = loop {
            let outgoing = tokio::select! {
                incoming = socket.recv() => {
                    last_heard = Instant::now();
                    match incoming {
                        Some(Err(e)) if too_big(&e) => {
                            let max = conn.state.limits.ws.ws_max_message_bytes;
                            break Closing::new(1009, format!("Message too big: at most {max} bytes"));
                        }
                        None | Some(Err(_)) => return,
                        Some(Ok(Message::Text(text))) => match conn.handle(text.as_str()).await {
                            Ok(replies) => replies,
                            Err(closing) => break closing,
                        },
                        Some(Ok(Message::Binary(_))) => break Closing::new(4400, "Binary messages are not supported"),
                        Some(Ok(Message::Close(_))) => return,
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => Vec::new(),
                    }
                }
                Some(out) = out_rx.recv() => match out {
                    Out::Text(text, id, generation) if conn.is_running(&id, generation) => {
                        vec![Message::Text(text.into())]
                    }
                    Out::Last(texts, id, generation) if conn.is_running(&id, generation) => {
                        conn.operations.remove(&id);
                        texts.into_iter().map(|t| Message::Text(t.into())).collect()
                    }
                    _ => Vec::new(), // from an operation the client has stopped
                },
                () = &mut init_deadline, if !conn.init_received => {
                    break Closing::new(4408, "Connection initialisation timeout");
                }
                Ok(()) = async { evicted.as_mut().expect("guarded").await }, if evicted.is_some() && conn.viewer.is_none() => {
                    break Closing::new(EVICTED.0, EVICTED.1);
                }
                Ok(()) = changes.changed(), if conn.viewer.is_some() => {
                    // Credentials changed somewhere: check this token again a little later
                    // (spread among all connections, so they do not all ask at once).
                    recheck.as_mut().reset(Instant::now() + Credentials::spread());
                    rechecking = true;
                    Vec::new()
                }
                () = &mut recheck, if rechecking => {
                    rechecking = false;
                    match conn.authenticated(false).await {
                        Ok(()) => Vec::new(),
                        Err(closing) => break closing,
                    }
                }
                _ = pings.tick() => {
                    if last_heard.elapsed() >= silence {
                        break Closing::new(1001, "Keepalive timeout: no answer to pings");
                    }
                    let mut msgs = vec![Message::Ping(Default::default())];
                    if conn.protocol == Protocol::Legacy && conn.viewer.is_some() {
                        msgs.push(Message::Text(json!({"type": "ka"}).to_string().into()));
                    }
                    msgs
                }
            };
            for msg in outgoing {
                match tokio::time::timeout(silence, socket.send(msg)).await {
                    Ok(Ok(())) => {}
                    // Gone, or not reading for the whole keepalive timeout: drop it.
                    _ => return,
                }
            }
        };
        drop(conn); // stops the operations
        let Closing { code, reason, before } = closing;
        // The closing handshake: our close frame, then the peer's (a second at most), so
        // that the peer reads our reason before the connection goes.
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            if let Some(text) = before {
                let _ = socket.send(Message::Text(text.into())).await;
            }
            close(&mut socket, code, &reason).await;
            while let Some(Ok(msg)) = socket.recv().await {
                if matches!(msg, Message::Close(_)) {
                    break;
                }
            }
        })
        .await;
    }
}
