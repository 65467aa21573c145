//! `GET /sessions/<id>/terminal`: the `terminal` app of a running interactive session, a
//! shell in its sandbox over a WebSocket.
//!
//! The client's first message authenticates it, as `connection_init` does on the GraphQL
//! WebSocket: `{"type": "connection_init", "payload": {"authorization": "Bearer <token>"},
//! "cols": 80, "rows": 24}`; the server answers `{"type": "connection_ack"}`. Then the
//! shell's output comes as binary messages; the client sends input as binary messages (or
//! `{"type": "input", "data": "…"}`) and `{"type": "resize", "cols": C, "rows": R}`. The
//! server closes with 1000 when the shell ends, 4403 for a bad token (or, later, one
//! revoked, or a session no longer visible), 4404 for a session that is not the caller's
//! (or does not exist: the same), 4409 when the session offers no terminal now, 4408
//! without `connection_init` in time, 4400 for a message it cannot read, 1009 for one too
//! big, 1013 over the server's connections or the user's share of connections or
//! terminals. An authenticated terminal counts as a WebSocket connection
//! (`--max-ws-connections`, the user's share) and as one of the user's terminals; its
//! processes count against the session's process limit. Closing it hangs the shell up.

use std::collections::VecDeque;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::waiting::{EVICTED, too_big};
use super::{AppState, bearer_token};
use crate::domain::directory::auth;
use crate::domain::live::shares::Share;
use crate::domain::model::ids::{NodeKind, decode_uuid};
use crate::domain::runtime::local::terminal as local_terminal;
use crate::domain::runtime::terminal;
use crate::domain::{DomainError, model::clock, reclaim::idle};

/// Largest message a client may send (input, resize).
const MAX_MESSAGE: usize = 64 << 10;
/// Input waiting for the shell to read it, at most; past it the socket is not read.
const MAX_PENDING_INPUT: usize = 64 << 10;

pub async fn upgrade(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !super::origins::websocket_allowed(&headers, &state.limits.cors_origins) {
        return super::ws::foreign_origin();
    }
    ws.max_message_size(MAX_MESSAGE).max_frame_size(MAX_MESSAGE).on_upgrade(move |mut socket| async move {
        if let Err((code, reason)) = serve(&state, &id, &mut socket).await {
            close(&mut socket, code, &reason).await;
        }
    })
}

async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason[..end].into() }))).await;
}

type Refusal = (u16, String);

fn dimension(v: &Value, key: &str, default: u16) -> u16 {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (1..=1000).contains(n))
        .unwrap_or(default)
}

async fn serve(state: &AppState, id: &str, socket: &mut WebSocket) -> Result<(), Refusal> {
    let mut arrival = state.ws_waiting.arrive();
    let evicted = arrival.evicted.take();
    let wait = Duration::from_millis(state.limits.ws.ws_init_timeout_ms);
    let first = tokio::select! {
        first = tokio::time::timeout(wait, socket.recv()) => first,
        Ok(()) = async { evicted.expect("taken once").await } => return Err((EVICTED.0, EVICTED.1.to_owned())),
    };
    let first = match first {
        Err(_) => return Err((4408, "connection_init timeout".into())),
        Ok(Some(Err(e))) if too_big(&e) => return Err((1009, format!("Message too big: at most {MAX_MESSAGE} bytes"))),
        Ok(Some(Ok(Message::Text(text)))) => serde_json::from_str::<Value>(&text).ok(),
        Ok(_) => None,
    }
    .filter(|m| m["type"] == "connection_init")
    .ok_or((
        4400,
        "send {\"type\": \"connection_init\", \"payload\": {\"authorization\": \"Bearer <token>\"}} first".into(),
    ))?;
    let token = first["payload"]["authorization"].as_str().and_then(bearer_token).ok_or((4403, "Forbidden".into()))?;
    let credentials = &state.live.credentials;
    // Before the first check: a change from here on is seen, and checked again.
    let mut changes = credentials.changes();
    changes.mark_unchanged();
    let viewer =
        credentials.viewer_of_token(&auth::hash_token(token)).await.map_err(|_| (4403, "Forbidden".to_owned()))?;
    drop(arrival);
    let busy = |e: DomainError| (1013, e.to_string());
    let _permit = state.ws_connections.clone().try_acquire_owned().map_err(|_| {
        let max = state.limits.ws.max_ws_connections;
        (1013, format!("too many WebSocket connections (at most {max}); try again later"))
    })?;
    let _connection = state.live.shares.take(viewer.user_id, Share::Connection).map_err(busy)?;
    let _terminal = state.live.shares.take(viewer.user_id, Share::Terminal).map_err(busy)?;
    // Opening terminals faster than the user's rate is refused (each starts processes).
    state.live.shares.pace(viewer.user_id, crate::domain::live::shares::TERMINAL_OPERATIONS).map_err(busy)?;
    let not_found = || (4404, "session not found".to_owned());
    let session = decode_uuid(id, NodeKind::Session).ok_or_else(not_found)?;
    let (cols, rows) = (dimension(&first, "cols", 80), dimension(&first, "rows", 24));
    let shell = terminal::open(&state.db, &viewer, state.runtime.local.as_ref(), session, cols, rows).await.map_err(
        |e| match e {
            DomainError::NotFound(_) => not_found(),
            DomainError::BadInput(p) => (4409, p.first().map(|p| p.message.clone()).unwrap_or_default()),
            e => {
                tracing::error!(error = ?e, "opening a terminal failed");
                (1011, "internal error".to_owned())
            }
        },
    )?;
    let ended = match socket.send(Message::Text(json!({"type": "connection_ack"}).to_string().into())).await {
        Ok(()) => pump(state, &viewer, session, &shell, socket, &mut changes).await,
        Err(_) => Ok(()),
    };
    shell.hang_up();
    ended
}

/// Copies the shell's output to the socket and the socket's input to the shell until
/// either ends, or the viewer may no longer use the terminal.
async fn pump(
    state: &AppState,
    viewer: &auth::Viewer,
    session: uuid::Uuid,
    shell: &local_terminal::Shell,
    socket: &mut WebSocket,
    changes: &mut tokio::sync::watch::Receiver<i64>,
) -> Result<(), Refusal> {
    let mut output = vec![0u8; 8192];
    let silence = Duration::from_millis(state.limits.ws.ws_keepalive_timeout_ms.max(1));
    // Input the shell has not read yet: while it is full, the socket is not read.
    let mut pending: VecDeque<u8> = VecDeque::new();
    // When input was last written down (for idle checks): at most once a second.
    let mut noted: Option<tokio::time::Instant> = None;
    loop {
        if !pending.is_empty() && noted.is_none_or(|at| at.elapsed() >= idle::TYPED_EVERY.to_std().unwrap_or_default())
        {
            noted = Some(tokio::time::Instant::now());
            if let Err(e) = idle::typed(&state.db, session, clock::now()).await {
                tracing::warn!(error = ?e, "noting terminal input failed");
            }
        }
        tokio::select! {
            read = shell.pty.read(&mut output) => match read {
                Ok(n) if n > 0 => {
                    // A client that reads nothing for the keepalive timeout is gone.
                    let send = socket.send(Message::Binary(output[..n].to_vec().into()));
                    if !matches!(tokio::time::timeout(silence, send).await, Ok(Ok(()))) {
                        return Ok(());
                    }
                }
                _ => return Err((1000, "the shell ended".to_owned())),
            },
            written = shell.pty.write(pending.make_contiguous()), if !pending.is_empty() => match written {
                Ok(n) => {
                    pending.drain(..n);
                }
                Err(_) => return Err((1000, "the shell ended".to_owned())),
            },
            msg = socket.recv(), if pending.len() < MAX_PENDING_INPUT => match msg {
                Some(Ok(Message::Binary(bytes))) => pending.extend(bytes.iter()),
                Some(Ok(Message::Text(text))) => {
                    let Ok(m) = serde_json::from_str::<Value>(&text) else {
                        return Err((4400, "a text message is a JSON object".to_owned()));
                    };
                    match m["type"].as_str() {
                        Some("input") => pending.extend(m["data"].as_str().unwrap_or_default().as_bytes()),
                        Some("resize") => shell.pty.resize(dimension(&m, "cols", 80), dimension(&m, "rows", 24)),
                        _ => return Err((4400, "messages are input, resize or binary input".to_owned())),
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Err(e)) if too_big(&e) => return Err((1009, format!("Message too big: at most {MAX_MESSAGE} bytes"))),
                _ => return Ok(()),
            },
            Ok(()) = changes.changed() => {
                // Credentials changed somewhere: is this still the owner's, with a valid token?
                changes.mark_unchanged();
                let still = match state.live.credentials.viewer_of_keypair(viewer.keypair_id).await {
                    Ok(Some(v)) => local_terminal::allowed(&state.db, &v, session).await.map(drop),
                    Ok(None) => Err(DomainError::Unauthenticated),
                    Err(e) => Err(e),
                };
                match still {
                    Ok(()) | Err(DomainError::Unavailable(_) | DomainError::Internal(_)) => {}
                    Err(_) => return Err((4403, "Forbidden: this terminal's credentials no longer allow it".to_owned())),
                }
            }
        }
    }
}
