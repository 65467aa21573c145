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
//! and whenever they change anywhere ([`crate::domain::credentials`]): a token revoked,
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
use crate::domain::auth::{self, Viewer};
use crate::domain::credentials::Credentials;
use crate::domain::shares::{Held, Share};
use crate::graphql::errors::{
    ApiError, BAD_USER_INPUT, INTERNAL_MESSAGE, LIMIT_EXCEEDED, UNAVAILABLE, finalize_errors,
};
use crate::graphql::{limits, prepare_long_lived};
use async_graphql::parser::types::OperationType;

use super::AppState;

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

pub async fn upgrade(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
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

/// The WebSocket connections that have not authenticated yet: at most `max`. One more
/// makes room by closing the one that has waited longest, so that connections which never
/// authenticate cannot keep anyone else out.
#[derive(Debug)]
pub struct Waiting {
    max: usize,
    queue: std::sync::Mutex<std::collections::VecDeque<(u64, tokio::sync::oneshot::Sender<()>)>>,
    next: std::sync::atomic::AtomicU64,
}

impl Waiting {
    pub fn new(max: usize) -> Self {
        Self { max: max.max(1), queue: Default::default(), next: Default::default() }
    }

    /// A new connection waiting to authenticate; the longest waiting one is told to leave
    /// when there are `max` already.
    pub fn arrive(self: &Arc<Self>) -> Arrival {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut queue = self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while queue.len() >= self.max {
            if let Some((_, oldest)) = queue.pop_front() {
                let _ = oldest.send(());
            }
        }
        queue.push_back((id, tx));
        Arrival { waiting: self.clone(), id, evicted: Some(rx) }
    }

    /// How many wait now.
    pub fn len(&self) -> usize {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connection's place among the waiting ones; it leaves when dropped (authenticated or
/// gone).
#[derive(Debug)]
pub struct Arrival {
    waiting: Arc<Waiting>,
    id: u64,
    /// Fires when the connection must leave to make room.
    pub evicted: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let mut queue = self.waiting.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        queue.retain(|(id, _)| *id != self.id);
    }
}

/// The close that makes room for a newer unauthenticated connection.
pub const EVICTED: (u16, &str) = (1013, "Too many connections waiting to authenticate; this one waited longest");

/// Whether a WebSocket error is a message over the size limit (then closed with 1009).
pub fn too_big(e: &axum::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|inner| inner.downcast_ref::<tungstenite::Error>())
        .is_some_and(|e| matches!(e, tungstenite::Error::Capacity(_)))
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
                    match conn.authenticated().await {
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

impl Connection {
    fn is_running(&self, id: &str, generation: u64) -> bool {
        self.operations.get(id).is_some_and(|(g, _)| *g == generation)
    }

    /// Handles one client message: the messages to send back, or why to close.
    async fn handle(&mut self, text: &str) -> Result<Vec<Message>, Closing> {
        let bad = |why: &str| Closing::new(4400, format!("Invalid message received: {why}"));
        let message: Value = serde_json::from_str(text).map_err(|_| bad("not JSON"))?;
        let kind = message.get("type").and_then(Value::as_str).ok_or_else(|| bad("no `type`"))?;
        let reply = |v: Value| Ok(vec![Message::Text(v.to_string().into())]);
        match (self.protocol, kind) {
            (_, "connection_init") => self.init(message.get("payload")).await,
            (Protocol::TransportWs, "ping") => reply(json!({"type": "pong"})),
            (Protocol::TransportWs, "pong") => Ok(Vec::new()),
            (Protocol::TransportWs, "subscribe") | (Protocol::Legacy, "start") => {
                let id = message.get("id").and_then(Value::as_str).filter(|id| !id.is_empty() && id.len() <= MAX_ID);
                let id = id.ok_or_else(|| bad("an operation needs a string `id` of 1 to 128 bytes"))?.to_owned();
                let request: async_graphql::Request = message
                    .get("payload")
                    .cloned()
                    .and_then(|p| serde_json::from_value(p).ok())
                    .ok_or_else(|| bad("the `payload` of an operation is a GraphQL request"))?;
                self.start(id, request).await
            }
            (Protocol::TransportWs, "complete") | (Protocol::Legacy, "stop") => {
                let id = message.get("id").and_then(Value::as_str).ok_or_else(|| bad("no `id`"))?;
                let stopped = self.operations.remove(id).map(|(_, task)| task.abort()).is_some();
                if stopped && self.protocol == Protocol::Legacy {
                    return reply(json!({"type": "complete", "id": id}));
                }
                Ok(Vec::new())
            }
            (Protocol::Legacy, "connection_terminate") => Err(Closing::new(1000, "Terminated by the client")),
            (_, other) => Err(bad(&format!("unknown message type `{other}`"))),
        }
    }

    async fn init(&mut self, payload: Option<&Value>) -> Result<Vec<Message>, Closing> {
        if self.init_received {
            return Err(Closing::new(4429, "Too many initialisation requests"));
        }
        self.init_received = true;
        let header =
            payload.and_then(|p| p.get("authorization").or_else(|| p.get("Authorization"))).and_then(Value::as_str);
        let hash = header.and_then(super::bearer_token).map(auth::hash_token);
        let viewer = match &hash {
            None => Err(DomainError::Unauthenticated),
            Some(hash) => self.state.live.credentials.viewer_of_token(hash).await,
        };
        match viewer {
            Ok(v) => {
                // Now it counts against the server's connections and the user's share.
                let Ok(permit) = self.state.ws_connections.clone().try_acquire_owned() else {
                    let max = self.state.limits.ws.max_ws_connections;
                    return Err(Closing::new(
                        1013,
                        format!("Too many WebSocket connections (at most {max}); try again later"),
                    ));
                };
                let share = self
                    .state
                    .live
                    .shares
                    .take(v.user_id, Share::Connection)
                    .map_err(|e| Closing::new(1013, e.to_string()))?;
                self._permit = Some((permit, share));
                self.arrival = None;
                self.token_hash = hash.unwrap_or_default();
                self.viewer = Some(Arc::new(v));
                let mut msgs = vec![Message::Text(json!({"type": "connection_ack"}).to_string().into())];
                if self.protocol == Protocol::Legacy {
                    msgs.push(Message::Text(json!({"type": "ka"}).to_string().into()));
                }
                Ok(msgs)
            }
            Err(DomainError::Unauthenticated) => {
                let why = "Forbidden: send {\"authorization\": \"Bearer <token>\"} as the payload";
                let mut closing = Closing::new(4403, why);
                if self.protocol == Protocol::Legacy {
                    // The legacy protocol says so in a message before the close.
                    closing.before = Some(json!({"type": "connection_error", "payload": {"message": why}}).to_string());
                }
                Err(closing)
            }
            Err(e) => {
                tracing::error!(error = ?e, connection = %self.log_id, "authenticating a WebSocket failed");
                Err(Closing::new(1011, INTERNAL_MESSAGE))
            }
        }
    }

    /// Checks the connection's token again (through the credentials cache): the viewer as
    /// it is now, or a close with 4403 when the token authenticates nobody any more.
    async fn authenticated(&mut self) -> Result<(), Closing> {
        match self.state.live.credentials.viewer_of_token(&self.token_hash).await {
            Ok(v) => {
                if self.viewer.as_deref() != Some(&v) {
                    self.viewer = Some(Arc::new(v));
                }
                Ok(())
            }
            Err(DomainError::Unauthenticated) => {
                Err(Closing::new(4403, "Forbidden: the token of this connection no longer authenticates"))
            }
            // The database cannot say now: keep what we know, and ask again next time.
            Err(e) => {
                tracing::warn!(error = ?e, connection = %self.log_id, "checking a connection's credentials failed");
                Ok(())
            }
        }
    }

    /// The messages that refuse operation `id` with `err`.
    fn refuse(&self, id: &str, err: DomainError) -> Vec<Message> {
        let error = async_graphql::Error::from(ApiError(err)).into_server_error(async_graphql::Pos::default());
        let mut errors = vec![error];
        finalize_errors(&mut errors, &self.log_id, &self.state.limits.graphql);
        let errors = errors.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect();
        failure(self.protocol, id, errors).into_iter().map(|t| Message::Text(t.into())).collect()
    }

    async fn start(&mut self, id: String, request: async_graphql::Request) -> Result<Vec<Message>, Closing> {
        if self.viewer.is_none() {
            return Err(Closing::new(4401, "Unauthorized: send connection_init first"));
        }
        if self.operations.contains_key(&id) {
            return Err(Closing::new(4409, format!("Subscriber for {id} already exists")));
        }
        // Every operation runs with the credentials as they are now.
        self.authenticated().await?;
        let Some(viewer) = self.viewer.clone() else {
            return Err(Closing::new(4401, "Unauthorized: send connection_init first"));
        };
        // A user starting operations faster than their rate waits here: this connection
        // is not read meanwhile, and nobody else notices.
        let wait = self.state.live.shares.pace(viewer.user_id, 1);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let max = self.state.limits.ws.max_subscriptions_per_connection;
        if self.operations.len() >= max {
            let error = json!({
                "message": format!("at most {max} operations may run at once on one connection"),
                "extensions": {"code": LIMIT_EXCEEDED},
            });
            return Ok(failure(self.protocol, &id, vec![error]).into_iter().map(|t| Message::Text(t.into())).collect());
        }
        let (request, operation) = match limits::admit(request, &self.state.limits.graphql) {
            Ok(admitted) => (admitted.request, admitted.operation),
            Err(refused) => {
                let mut errors = vec![refused];
                finalize_errors(&mut errors, &self.log_id, &self.state.limits.graphql);
                let errors = errors.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect();
                return Ok(failure(self.protocol, &id, errors).into_iter().map(|t| Message::Text(t.into())).collect());
            }
        };
        let subscription = operation.as_ref().is_some_and(|o| o.ty == OperationType::Subscription);
        if subscription && !operation.as_ref().is_some_and(|o| o.single_root_field) {
            let error = json!({
                "message": "a subscription selects exactly one root field, without fragments",
                "extensions": {"code": BAD_USER_INPUT},
            });
            return Ok(failure(self.protocol, &id, vec![error]).into_iter().map(|t| Message::Text(t.into())).collect());
        }
        // A subscription is one of the user's share of them; a query or a mutation one of
        // the requests the server answers at once, as over HTTP.
        let held = if subscription {
            match self.state.live.shares.take(viewer.user_id, Share::Subscription) {
                Ok(share) => Hold::Share(share),
                Err(e) => return Ok(self.refuse(&id, e)),
            }
        } else {
            match self.state.in_flight.clone().try_acquire_owned() {
                Ok(permit) => Hold::InFlight(permit),
                Err(_) => {
                    let max = self.state.limits.max_in_flight;
                    let error = json!({
                        "message": format!("the server is answering as many requests as it may at once ({max}); retry after {} s", super::RETRY_AFTER_SECONDS),
                        "extensions": {"code": UNAVAILABLE},
                    });
                    return Ok(failure(self.protocol, &id, vec![error])
                        .into_iter()
                        .map(|t| Message::Text(t.into()))
                        .collect());
                }
            }
        };
        // Queries and mutations get the time limit they have over HTTP; a subscription runs
        // until it ends or is stopped.
        let timeout = (!subscription).then(|| Duration::from_millis(self.state.limits.request_timeout_ms));
        self.generation += 1;
        let generation = self.generation;
        let request = prepare_long_lived(request, &self.state.db, (*viewer).clone(), &self.state.limits.graphql);
        let stream = self.state.schema.execute_stream(request);
        let run = Run {
            tx: self.out_tx.clone(),
            protocol: self.protocol,
            id: id.clone(),
            generation,
            limits: self.state.limits.clone(),
        };
        let log_id = self.log_id.clone();
        let task = tokio::spawn(async move {
            let _held = held;
            match timeout {
                None => run.forward(stream, &log_id).await,
                Some(limit) => {
                    if tokio::time::timeout(limit, run.forward(stream, &log_id)).await.is_err() {
                        let error = json!({
                            "message": format!("the operation took longer than {} ms", limit.as_millis()),
                            "extensions": {"code": LIMIT_EXCEEDED},
                        });
                        run.last(failure(run.protocol, &run.id, vec![error])).await;
                    }
                }
            }
        });
        self.operations.insert(id, (generation, task.abort_handle()));
        Ok(Vec::new())
    }
}

/// What a running operation holds until it ends.
enum Hold {
    /// A subscription: one of the user's share.
    Share(#[allow(dead_code)] Held),
    /// A query or mutation: one of the requests answered at once.
    InFlight(#[allow(dead_code)] OwnedSemaphorePermit),
}

/// One running operation's way to its connection.
struct Run {
    tx: mpsc::Sender<Out>,
    protocol: Protocol,
    id: String,
    generation: u64,
    limits: Arc<crate::config::HttpLimits>,
}

impl Run {
    /// Sends each response of `stream`, then `complete`; an error that left no data ends
    /// the operation with an error message instead (refused, invalid, lagged).
    async fn forward(
        &self,
        mut stream: impl futures_util::Stream<Item = async_graphql::Response> + Unpin,
        log_id: &str,
    ) {
        let kind = if self.protocol == Protocol::Legacy { "data" } else { "next" };
        // The id once as JSON: each message is then written straight from the response.
        let id = serde_json::to_string(&self.id).unwrap_or_default();
        while let Some(mut response) = stream.next().await {
            finalize_errors(&mut response.errors, log_id, &self.limits.graphql);
            if response.data == async_graphql::Value::Null && !response.errors.is_empty() {
                let errors = response.errors.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
                self.last(failure(self.protocol, &self.id, errors.collect())).await;
                return;
            }
            let Ok(payload) = serde_json::to_string(&response) else {
                tracing::error!(connection = %log_id, "could not serialize a response");
                continue;
            };
            let text = format!(r#"{{"type":"{kind}","id":{id},"payload":{payload}}}"#);
            if self.tx.send(Out::Text(text, self.id.clone(), self.generation)).await.is_err() {
                return;
            }
        }
        self.last(vec![json!({"type": "complete", "id": self.id}).to_string()]).await;
    }

    async fn last(&self, texts: Vec<String>) {
        let _ = self.tx.send(Out::Last(texts, self.id.clone(), self.generation)).await;
    }
}

/// The messages that end operation `id` with `errors`: `error` in graphql-transport-ws
/// (which ends the operation by itself); `data` with the errors, then `complete`, in the
/// legacy protocol.
fn failure(protocol: Protocol, id: &str, errors: Vec<Value>) -> Vec<String> {
    match protocol {
        Protocol::TransportWs => vec![json!({"type": "error", "id": id, "payload": errors}).to_string()],
        Protocol::Legacy => vec![
            json!({"type": "data", "id": id, "payload": {"data": null, "errors": errors}}).to_string(),
            json!({"type": "complete", "id": id}).to_string(),
        ],
    }
}
