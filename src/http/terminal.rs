//! `GET /sessions/<id>/terminal`: the `terminal` app of a running interactive session, a
//! shell in its sandbox over a WebSocket.
//!
//! The client's first message authenticates it, as `connection_init` does on the GraphQL
//! WebSocket: `{"type": "connection_init", "payload": {"authorization": "Bearer <token>"},
//! "cols": 80, "rows": 24}`; the server answers `{"type": "connection_ack"}`. Then the
//! shell's output comes as binary messages; the client sends input as binary messages (or
//! `{"type": "input", "data": "…"}`) and `{"type": "resize", "cols": C, "rows": R}`. The
//! server closes with 1000 when the shell ends, 4403 for a bad token, 4404 for a session
//! that is not the caller's (or does not exist: the same), 4409 when the session offers no
//! terminal now, 4408 without `connection_init` in time, 4400 for a message it cannot read.
//! Every terminal counts as a WebSocket connection (`--max-ws-connections`); its processes
//! count against the session's process limit.

use std::io::{Read, Write};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{AppState, bearer_token};
use crate::domain::DomainError;
use crate::domain::auth;
use crate::domain::runtime::local::terminal;
use crate::graphql::ids::{NodeKind, decode_uuid};

/// Largest message a client may send (input, resize).
const MAX_MESSAGE: usize = 64 << 10;

pub async fn upgrade(State(state): State<AppState>, Path(id): Path<String>, ws: WebSocketUpgrade) -> Response {
    let permit = state.ws_connections.clone().try_acquire_owned().ok();
    ws.max_message_size(MAX_MESSAGE).on_upgrade(move |mut socket| async move {
        if permit.is_none() {
            close(&mut socket, 1013, "too many WebSocket connections; try again later").await;
            return;
        }
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
    let wait = Duration::from_millis(state.limits.ws.ws_init_timeout_ms);
    let first = match tokio::time::timeout(wait, socket.recv()).await {
        Err(_) => return Err((4408, "connection_init timeout".into())),
        Ok(Some(Ok(Message::Text(text)))) => serde_json::from_str::<Value>(&text).ok(),
        Ok(_) => None,
    }
    .filter(|m| m["type"] == "connection_init")
    .ok_or((
        4400,
        "send {\"type\": \"connection_init\", \"payload\": {\"authorization\": \"Bearer <token>\"}} first".into(),
    ))?;
    let token = first["payload"]["authorization"].as_str().and_then(bearer_token).ok_or((4403, "Forbidden".into()))?;
    let viewer = auth::authenticate(&state.db, token).await.map_err(|_| (4403, "Forbidden".to_owned()))?;
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
    socket
        .send(Message::Text(json!({"type": "connection_ack"}).to_string().into()))
        .await
        .map_err(|_| (1000, String::new()))?;
    pump(shell, socket).await
}

/// Copies the shell's output to the socket and the socket's input to the shell until
/// either ends.
async fn pump(shell: terminal::Shell, socket: &mut WebSocket) -> Result<(), Refusal> {
    let terminal::Shell { pty, mut child, mut output, mut input } = shell;
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(16);
    let reader = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = output.read(&mut buf) {
            if n == 0 || out_tx.blocking_send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // Bounded: a client typing faster than the shell reads waits (the socket is not read).
    let (in_tx, mut in_rx) = mpsc::channel::<Vec<u8>>(16);
    std::thread::spawn(move || {
        while let Some(bytes) = in_rx.blocking_recv() {
            if input.write_all(&bytes).and_then(|()| input.flush()).is_err() {
                break;
            }
        }
    });
    let ended = loop {
        tokio::select! {
            out = out_rx.recv() => match out {
                Some(bytes) => {
                    if socket.send(Message::Binary(bytes.into())).await.is_err() {
                        break Ok(());
                    }
                }
                None => break Err((1000, "the shell ended".to_owned())),
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Binary(bytes))) => {
                    let _ = in_tx.send(bytes.to_vec()).await;
                }
                Some(Ok(Message::Text(text))) => {
                    let Ok(m) = serde_json::from_str::<Value>(&text) else {
                        break Err((4400, "a text message is a JSON object".to_owned()));
                    };
                    match m["type"].as_str() {
                        Some("input") => {
                            let _ = in_tx.send(m["data"].as_str().unwrap_or_default().as_bytes().to_vec()).await;
                        }
                        Some("resize") => terminal::resize(pty.as_ref(), dimension(&m, "cols", 80), dimension(&m, "rows", 24)),
                        _ => break Err((4400, "messages are input, resize or binary input".to_owned())),
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => break Ok(()),
            },
        }
    };
    // The terminal hangs up: the shell and what it started in the foreground get SIGHUP.
    // The reader and writer threads end when the last of the session's processes holding
    // the terminal does (at the latest with the session); nothing here waits for them.
    let _ = child.kill();
    drop(pty);
    drop(in_tx);
    drop(reader);
    tokio::task::spawn_blocking(move || {
        let _ = child.wait();
    });
    ended
}
