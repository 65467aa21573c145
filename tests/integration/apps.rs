//! A session's apps, reached from outside its sandbox: the dialer makes sockets in the
//! session's network namespace; they reach the session's own loopback and nothing of the
//! host's.

use std::time::{Duration, Instant};

use serde_json::json;
use sessiond::domain::runtime::local::dial::Dialer;
use sessiond::domain::runtime::local::files::SessionDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::db_tests;
use crate::local_runtime::{Machine, input, launch, until};
use crate::support::TestApp;

/// The dialer of a running session of `machine` (its sandbox as its state file says).
fn dialer(machine: &Machine, id: &str) -> std::sync::Arc<Dialer> {
    let uuid: uuid::Uuid = crate::local_runtime::session_uuid(id).parse().expect("a uuid");
    let state = SessionDir::of(&machine.path(), uuid).read_state().expect("a state");
    let sandbox = state.child.expect("a sandbox");
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_sessiond"));
    std::sync::Arc::new(Dialer::start(exe, sandbox.pid, sandbox.started).expect("a dialer"))
}

/// `GET path` over `stream`, HTTP/1.0: the whole answer.
async fn get(mut stream: tokio::net::TcpStream, path: &str) -> String {
    stream.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).await.expect("asked");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("answered");
    answer
}

/// A web server in a session, on its own loopback: the server reaches it through the
/// dialer; a port nothing listens on there is refused, though the host listens on it; the
/// session's end ends the dialer.
async fn the_server_reaches_a_sessions_own_loopback(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a host port");
    let host_port = host.local_addr().expect("its address").port();
    let script = "echo from-the-session > /home/work/hello.txt; \
                  exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /home/work";
    let id = launch(&app, "demo-alice", input("web-app", script, 512, json!({}))).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    let dialer = dialer(&machine, &id);
    let deadline = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        match dialer.connect(8000).await {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline && e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the app's port: {e}"),
        }
    };
    let answer = get(stream, "/hello.txt").await;
    assert!(answer.starts_with("HTTP/1.0 200") && answer.contains("from-the-session"), "{answer}");
    let refused = dialer.connect(host_port).await.expect_err("the host's port is not the session's");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");

    crate::local_runtime::terminate(&app, &id).await;
    until(&app, &id, crate::local_runtime::ended).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while dialer.connect(8000).await.is_ok() {
        assert!(Instant::now() < deadline, "the app is gone with its session");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(host);
}

db_tests!(the_server_reaches_a_sessions_own_loopback);
