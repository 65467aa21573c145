//! The real binary on a real socket: `sessiond serve` started as a child process (directly,
//! or under a wrapper such as `bwrap` that gives it a file system of its own), killed when
//! the test ends, however it ends.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_sessiond");

/// A running server and its runtime directory, both gone when dropped.
pub struct Server(pub Child, #[expect(dead_code, reason = "held until the server stops")] pub tempfile::TempDir);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A GraphQL request as `token`, its answer as JSON.
pub async fn post(client: &reqwest::Client, base: &str, token: &str, query: &str) -> reqwest::Result<Value> {
    post_with(client, base, token, query, json!({})).await
}

/// [`post`] with variables.
pub async fn post_with(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    query: &str,
    variables: Value,
) -> reqwest::Result<Value> {
    client
        .post(format!("{base}/graphql"))
        .bearer_auth(token)
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await?
        .json()
        .await
}

/// Starts `sessiond serve` with `args` and `envs` and waits until it answers GraphQL at `base`.
pub async fn serve(args: &[&str], envs: &[(&str, &str)], base: &str) -> Server {
    serve_under(&[], args, envs, base).await
}

/// [`serve`], run by the command `wrapper` (its program and arguments, the server's command
/// line after them); no wrapper when empty.
pub async fn serve_under(wrapper: &[&str], args: &[&str], envs: &[(&str, &str)], base: &str) -> Server {
    let runtime = tempfile::tempdir().expect("runtime directory");
    let mut command = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    command
        .arg("serve")
        .args(args)
        .env("SESSIOND_RUNTIME_DIR", runtime.path())
        .envs(envs.iter().copied())
        .env("SESSIOND_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = Server(command.spawn().expect("start sessiond"), runtime);
    answers(base).await;
    server
}

/// Waits until a server answers GraphQL at `base`.
pub async fn answers(base: &str) {
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if post(&client, base, "demo-alice", "{ __typename }").await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("sessiond serve never answered");
}
