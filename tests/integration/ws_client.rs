//! The reference client: npm `graphql-ws` (pinned in `tests/ws-client/package-lock.json`)
//! follows a launched session from PENDING to TERMINATED.
//!
//! Needs Node and npm: the test installs the pinned packages with `npm ci` when they are
//! missing. Without Node it is skipped with a NOTICE line, unless `SESSIOND_REQUIRE_NODE=1`
//! (set by `.ci/run`) makes that a failure.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::db_tests;
use crate::support::{TestApp, launch_input, node_package, project};

fn client_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ws-client")
}

async fn the_reference_client_follows_a_session_to_its_end(mut app: TestApp) {
    if !node_package(&client_dir(), "graphql-ws", "the graphql-ws client") {
        return;
    }
    app.start_workers();
    let addr = app.serve().await;
    let after = app.last_cursor().await;
    let mut child = tokio::process::Command::new("node")
        .arg("follow.mjs")
        .args([format!("ws://{addr}/graphql/ws"), "demo-alice".into(), project("default/default"), after])
        .current_dir(client_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start node");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": launch_input("npm-client", 1.0)}),
        )
        .await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let mut events: Vec<Value> = Vec::new();
    let mut terminated = false;
    loop {
        let line =
            tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await.expect("an event within 60 s");
        let Some(line) = line.expect("read the client's output") else { break };
        let event: Value = serde_json::from_str(&line).expect("one JSON event per line");
        let status = event["toStatus"].as_str().unwrap_or_default().to_owned();
        events.push(event);
        if status == "RUNNING" && !terminated {
            terminated = true;
            let resp = app
                .gql(
                    Some("demo-alice"),
                    "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }",
                    json!({"ids": [id]}),
                )
                .await;
            assert_eq!(resp["data"]["terminateSessions"]["results"][0]["outcome"], "TERMINATING", "{resp}");
        }
    }
    let out = child.wait_with_output().await.expect("the client ends");
    assert!(out.status.success(), "client failed: {}", String::from_utf8_lossy(&out.stderr));
    let statuses: Vec<&str> = events.iter().filter_map(|e| e["toStatus"].as_str()).collect();
    assert_eq!(statuses.first(), Some(&"PENDING"), "{statuses:?}");
    assert!(statuses.ends_with(&["RUNNING", "TERMINATING", "TERMINATED"]), "{statuses:?}");
    for pair in events.windows(2) {
        assert_eq!(pair[1]["fromStatus"], pair[0]["toStatus"], "no change missed: {statuses:?}");
    }
    assert!(events.iter().all(|e| e["sessionId"] == json!(id) && e["session"]["name"] == "npm-client"));
}

db_tests!(the_reference_client_follows_a_session_to_its_end);
