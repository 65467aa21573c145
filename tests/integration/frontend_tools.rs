//! Frontend teams' own tools on the schema and the server, each from npm under its own name
//! (pinned in `tests/frontend-tools/package-lock.json`): relay-compiler compiles the page's
//! documents with `nonNodeIdFields` strict; a relay-runtime store and Apollo Client's cache
//! keep a session whole through a rename and a terminate, and the settings through their
//! mutations; Apollo's persisted-query link falls back once, then sends hashes alone;
//! `nodes(ids:)` finds every record again. graphql-schema-linter's description rules pass.
//!
//! Needs Node and npm (the packages are installed with `npm ci` when missing); without Node
//! the tests are skipped with a NOTICE, unless `SESSIOND_REQUIRE_NODE=1` (set by `.ci/run`).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, node_package, project};

fn tools_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/frontend-tools")
}

fn schema_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema.graphql")
}

async fn relay_and_apollo_keep_the_page_whole(mut app: TestApp) {
    if !node_package(&tools_dir(), "relay-compiler", "relay-compiler, relay-runtime and Apollo Client") {
        return;
    }
    let addr = app.serve().await;
    let out = tokio::process::Command::new("node")
        .arg("run.mjs")
        .arg(schema_file())
        .arg(format!("http://{addr}/graphql"))
        .arg("demo-alice")
        .arg(project("default/default"))
        .current_dir(tools_dir())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "run.mjs: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");

    let compiler = &seen["relayCompiler"];
    assert_eq!(compiler["ok"], true, "relay-compiler: {}", compiler["output"].as_str().unwrap_or_default());
    let documents = std::fs::read_dir(tools_dir().join("documents")).expect("documents").count();
    assert_eq!(compiler["artifacts"].as_u64(), Some(documents as u64), "an artifact per document");

    // The session's record stays a Session through the results that name it, and the list and
    // the detail read it back renamed and ended (no scheduler runs: it was still PENDING).
    let relay = &seen["relay"];
    assert_eq!(relay["terminateOutcome"], "CANCELLED", "{relay}");
    assert_eq!(relay["terminateSessionId"], true, "{relay}");
    assert_eq!(relay["recordTypename"], "Session", "{relay}");
    let whole = json!({"name": "relay-renamed", "status": "CANCELLED"});
    assert_eq!((&relay["listed"], &relay["detail"]), (&whole, &whole), "{relay}");
    assert_eq!(relay["settingsFollow"], true, "{relay}");
    assert_eq!(relay["nodes"], json!(["Session", "UserSettings", "SchedulingHistoryEntry", "User", null]), "{relay}");

    let apollo = &seen["apollo"];
    assert_eq!(
        apollo["persisted"],
        json!([
            {"query": false, "hash": true, "code": "PERSISTED_QUERY_NOT_FOUND"},
            {"query": true, "hash": true, "code": null},
            {"query": false, "hash": true, "code": null},
        ]),
        "the hash alone, the fallback with the document, then the hash alone answered: {apollo}"
    );
    assert_eq!(apollo["listed"], json!({"name": "apollo-renamed", "status": "CANCELLED"}), "{apollo}");
    assert_eq!(apollo["resultKeys"], json!([]), "no per-id result is an entity of the cache: {apollo}");
    assert_eq!(apollo["settingsFollow"], true, "{apollo}");
}

db_tests!(relay_and_apollo_keep_the_page_whole);

/// Every type, field, argument, enum value and input field of the schema has a description.
#[test]
fn the_schema_linter_finds_every_description() {
    if !node_package(&tools_dir(), "graphql-schema-linter", "graphql-schema-linter") {
        return;
    }
    let rules = [
        "types-have-descriptions",
        "fields-have-descriptions",
        "arguments-have-descriptions",
        "enum-values-have-descriptions",
        "input-object-values-have-descriptions",
    ];
    let out = std::process::Command::new(tools_dir().join("node_modules/.bin/graphql-schema-linter"))
        .args(["--rules", &rules.join(","), "--format", "compact"])
        .arg(schema_file())
        .current_dir(tools_dir())
        .output()
        .expect("run graphql-schema-linter");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "graphql-schema-linter:\n{report}");
}
