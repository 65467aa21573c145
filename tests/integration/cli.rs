//! The real binary on a real socket: `sessiond serve --demo` answers the README's curl
//! example, and `sessiond token create` prints a token that works.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, fresh_database};

const BIN: &str = env!("CARGO_BIN_EXE_sessiond");

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

async fn post(client: &reqwest::Client, base: &str, token: &str, query: &str) -> reqwest::Result<Value> {
    client.post(format!("{base}/graphql")).bearer_auth(token).json(&json!({"query": query})).send().await?.json().await
}

async fn serve_demo_answers_the_readme_example(app: TestApp) {
    // A database of its own: the binary seeds it, as on a fresh machine.
    let Some((url, _dir)) = fresh_database(app.backend).await else { return };
    let port = free_port();
    let _server = Server(
        Command::new(BIN)
            .args(["serve", "--demo", "--bind", &format!("127.0.0.1:{port}"), "--database-url", &url])
            .env("SESSIOND_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sessiond"),
    );
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut answer = None;
    for _ in 0..200 {
        if let Ok(v) = post(&client, &base, "demo-alice", "{ viewer { user { email } } }").await {
            answer = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer.expect("sessiond serve never answered");
    assert_eq!(answer, json!({"data": {"viewer": {"user": {"email": "alice@example.com"}}}}));
    let page = client.get(format!("{base}/graphiql")).send().await.expect("graphiql");
    assert_eq!(page.status(), 200);
    let ready = client.get(format!("{base}/readyz")).send().await.expect("readyz");
    assert_eq!(ready.status(), 200);
}

async fn token_create_prints_a_working_token(app: TestApp) {
    let out = Command::new(BIN)
        .args(["token", "create", "--email", "carol@other.example", "--database-url", &app.url])
        .stdin(Stdio::null())
        .output()
        .expect("run sessiond token create");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).expect("utf8").trim().to_owned();
    assert!(token.starts_with("sd_"), "{token}");
    let resp = app.gql(Some(&token), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(resp["data"]["viewer"]["user"]["email"], "carol@other.example");

    let out = Command::new(BIN)
        .args(["token", "create", "--email", "nobody@example.com", "--database-url", &app.url])
        .stdin(Stdio::null())
        .output()
        .expect("run sessiond token create");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no token for an unknown user");
}

db_tests!(serve_demo_answers_the_readme_example, token_create_prints_a_working_token);
