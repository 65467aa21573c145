//! A small GraphQL-over-WebSocket client for the tests: raw frames, so that every close
//! code and message of the protocols can be checked.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Stream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long a test waits for a message it expects.
const WAIT: Duration = Duration::from_secs(20);

pub const TRANSPORT_WS: &str = "graphql-transport-ws";
pub const LEGACY_WS: &str = "graphql-ws";

pub struct Ws {
    stream: Stream,
    /// The subprotocol the server answered with.
    pub protocol: Option<String>,
}

/// What came instead of a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Closed(u16, String),
    Silent,
}

impl Ws {
    /// Connects to `/graphql/ws` on `addr`, offering `protocol` (none when `None`).
    pub async fn connect(addr: std::net::SocketAddr, protocol: Option<&str>) -> Ws {
        let mut request = format!("ws://{addr}/graphql/ws").into_client_request().expect("request");
        if let Some(p) = protocol {
            request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_str(p).expect("header"));
        }
        let (stream, response) = tokio_tungstenite::connect_async(request).await.expect("WebSocket handshake");
        let protocol =
            response.headers().get("sec-websocket-protocol").and_then(|v| v.to_str().ok()).map(str::to_owned);
        Ws { stream, protocol }
    }

    /// Connects with graphql-transport-ws and completes `connection_init` as `token`.
    pub async fn open(addr: std::net::SocketAddr, token: &str) -> Ws {
        let mut ws = Ws::connect(addr, Some(TRANSPORT_WS)).await;
        ws.init(token).await;
        ws
    }

    pub async fn send(&mut self, message: Value) {
        self.stream.send(Message::Text(message.to_string().into())).await.expect("send");
    }

    pub async fn send_text(&mut self, text: &str) {
        self.stream.send(Message::Text(text.to_owned().into())).await.expect("send");
    }

    /// Sends `connection_init` with the token and expects `connection_ack`.
    pub async fn init(&mut self, token: &str) {
        self.send(json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {token}")}})).await;
        let ack = self.recv().await;
        assert_eq!(ack["type"], "connection_ack", "{ack}");
    }

    /// The next JSON message, or what ended the wait (a close, or nothing within `wait`).
    pub async fn next_within(&mut self, wait: Duration) -> Result<Value, Ended> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let frame = match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Err(_) => return Err(Ended::Silent),
                Ok(None) => return Err(Ended::Closed(1006, "no close frame".into())),
                Ok(Some(Err(e))) => return Err(Ended::Closed(1006, e.to_string())),
                Ok(Some(Ok(frame))) => frame,
            };
            match frame {
                Message::Text(t) => return Ok(serde_json::from_str(t.as_str()).expect("JSON message")),
                Message::Close(Some(f)) => return Err(Ended::Closed(u16::from(f.code), f.reason.to_string())),
                Message::Close(None) => return Err(Ended::Closed(1005, String::new())),
                _ => {} // pings are answered by the library
            }
        }
    }

    /// The next message; fails the test on a close or silence.
    pub async fn recv(&mut self) -> Value {
        match self.next_within(WAIT).await {
            Ok(v) => v,
            Err(e) => panic!("expected a message, got {e:?}"),
        }
    }

    /// The next message that is not a legacy keep-alive (`ka`).
    pub async fn recv_skipping_ka(&mut self) -> Value {
        loop {
            let m = self.recv().await;
            if m["type"] != "ka" {
                return m;
            }
        }
    }

    /// Waits for the server to close; returns the code and reason. Messages before the close
    /// are skipped.
    pub async fn closed(&mut self) -> (u16, String) {
        loop {
            match self.next_within(WAIT).await {
                Ok(_) => continue,
                Err(Ended::Closed(code, reason)) => return (code, reason),
                Err(Ended::Silent) => panic!("expected the server to close"),
            }
        }
    }

    /// Starts operation `id` (graphql-transport-ws `subscribe`).
    pub async fn subscribe(&mut self, id: &str, query: &str, variables: Value) {
        self.send(json!({"type": "subscribe", "id": id, "payload": {"query": query, "variables": variables}})).await;
    }

    /// The payload of the next `next` message of operation `id`; fails on anything else.
    pub async fn next_payload(&mut self, id: &str) -> Value {
        let m = self.recv().await;
        assert_eq!((m["type"].as_str(), m["id"].as_str()), (Some("next"), Some(id)), "{m}");
        m["payload"].clone()
    }

    /// The next `sessionEvents` event of operation `id`.
    pub async fn next_event(&mut self, id: &str) -> Value {
        let p = self.next_payload(id).await;
        assert!(p.get("errors").is_none(), "{p}");
        p["data"]["sessionEvents"].clone()
    }

    /// The errors of the `error` message that ends operation `id`.
    pub async fn error_of(&mut self, id: &str) -> Vec<Value> {
        let m = self.recv().await;
        assert_eq!((m["type"].as_str(), m["id"].as_str()), (Some("error"), Some(id)), "{m}");
        m["payload"].as_array().expect("errors").clone()
    }

    /// Whether nothing arrives within `wait`.
    pub async fn is_quiet(&mut self, wait: Duration) -> Result<(), Value> {
        match self.next_within(wait).await {
            Ok(m) => Err(m),
            Err(Ended::Silent) => Ok(()),
            Err(e) => panic!("closed while waiting: {e:?}"),
        }
    }
}

/// The `sessionEvents` subscription with the fields the tests look at.
pub const EVENTS: &str = "subscription($p: ID!, $scope: SessionScope, $sid: ID, $after: String) {
  sessionEvents(projectId: $p, scope: $scope, sessionId: $sid, after: $after) {
    cursor sessionId fromStatus toStatus reason occurredAt session { id name status owner { email } }
  }
}";

/// The codes of a list of GraphQL errors.
pub fn codes(errors: &[Value]) -> Vec<String> {
    errors.iter().map(|e| e["extensions"]["code"].as_str().unwrap_or("?").to_owned()).collect()
}
