//! Faults: the database going away while requests flow, and the server killed in the
//! middle of a write.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use sessiond::config::{DbArgs, HttpLimits};

use crate::support::{Backend, TestApp, error_codes, fresh_database, launch_input, project};

/// A TCP relay in front of the test PostgreSQL server. `down` is the server stopping: open
/// connections are cut and new ones refused (nothing listens); `up` is it coming back on
/// the same address.
struct Relay {
    addr: SocketAddr,
    upstream: SocketAddr,
    accepting: Mutex<Option<JoinHandle<()>>>,
    open: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    async fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let relay = Relay {
            addr: listener.local_addr().expect("addr"),
            upstream,
            accepting: Mutex::new(None),
            open: Arc::new(Mutex::new(Vec::new())),
        };
        relay.accept_on(listener);
        relay
    }

    fn accept_on(&self, listener: TcpListener) {
        let (upstream, open) = (self.upstream, self.open.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let relay = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                open.lock().expect("lock").push(relay);
            }
        });
        *self.accepting.lock().expect("lock") = Some(task);
    }

    fn down(&self) {
        if let Some(task) = self.accepting.lock().expect("lock").take() {
            task.abort();
        }
        for relay in self.open.lock().expect("lock").drain(..) {
            relay.abort();
        }
    }

    async fn up(&self) {
        // The listener was dropped with its task; the address is free to listen on again.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("listen again on {}: {e}", self.addr),
            }
        };
        self.accept_on(listener);
    }
}

const LIST: &str = "query($p: ID!) { sessions(projectId: $p, first: 5) { edges { node { id status } } } }";

async fn list(app: &TestApp) -> (StatusCode, axum::http::HeaderMap, Value) {
    let body = json!({"query": LIST, "variables": {"p": project("default/default")}}).to_string();
    let request = Request::post("/graphql")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, "Bearer demo-alice")
        .body(Body::from(body))
        .expect("request");
    let (status, headers, bytes) = app.send(request).await;
    (status, headers, serde_json::from_slice(&bytes).expect("JSON"))
}

/// PostgreSQL stops while requests flow: each is answered UNAVAILABLE with 503,
/// `Retry-After` and a request id (none hangs past the pool's acquire timeout), `/readyz`
/// fails, the process and its workers stay up, and everything recovers by itself when the
/// database is back. (PostgreSQL only: SQLite lives in the process and cannot go away.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_going_away_is_unavailable_then_recovered() {
    let Some((url, _)) = fresh_database(Backend::Postgres).await else { return };
    let rest = url.strip_prefix("postgres://postgres@").expect("a test server URL");
    let (host, database) = rest.split_once('/').expect("a database");
    let relay = Relay::start(host.parse().expect("host:port")).await;
    let args = DbArgs {
        db_max_connections: 4,
        db_acquire_timeout_ms: 1_000,
        ..DbArgs::of(format!("postgres://postgres@{}/{database}", relay.addr))
    };
    let mut app = TestApp::open_with(Backend::Postgres, args, None, HttpLimits::default()).await;
    app.start_workers();
    let (status, _, resp) = list(&app).await;
    assert_eq!(status, StatusCode::OK, "{resp}");

    relay.down();
    let app = Arc::new(app);
    let flowing: Vec<_> = (0..6)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { list(&app).await })
        })
        .collect();
    for request in flowing {
        let (status, headers, resp) = request.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{resp}");
        assert_eq!(headers[header::RETRY_AFTER], "1");
        assert_eq!(error_codes(&resp), ["UNAVAILABLE"], "{resp}");
        let id = resp["errors"][0]["extensions"]["requestId"].as_str().unwrap_or_default();
        assert_eq!(id.len(), 36, "a request id to report: {resp}");
        assert!(!resp.to_string().to_lowercase().contains("sqlx"), "no driver text: {resp}");
    }
    assert_eq!(app.get("/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK, "the process is up");

    relay.up().await;
    let mut recovered = false;
    for _ in 0..300 {
        if list(&app).await.0 == StatusCode::OK && app.get("/readyz").await.0 == StatusCode::OK {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "requests succeed again once the database is back");
    // The scheduler and the runtime carried on: a new launch runs.
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let resp = app.gql(Some("demo-alice"), launch, json!({"i": launch_input("after-outage", 1.0)})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    app.wait_for("demo-alice", "query($id: ID!) { session(id: $id) { status } }", json!({"id": id}), |r| {
        r["data"]["session"]["status"] == "RUNNING"
    })
    .await;
}
