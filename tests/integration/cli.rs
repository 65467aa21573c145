//! The real binary on a real socket: `sessiond serve --demo` answers the README's curl
//! examples run by `sh`, its flags and environment variables are listed and work, and
//! `sessiond token create` prints a token that works; the operations guide's "Deploy" works as written.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};

use crate::db_tests;
use crate::support::binary::{BIN, Server, free_port, post, serve};
use crate::support::{TestApp, fresh_database};

const README: &str = include_str!("../../README.md");
const OPERATIONS: &str = include_str!("../../docs/operations.md");
const ENGINES: &str = include_str!("../../docs/engines.md");

/// The `sh` blocks of the README's "Run it" section that call curl, verbatim.
fn readme_curl_blocks() -> Vec<&'static str> {
    let start = README.find("\n## Run it\n").expect("the README has a `Run it` section") + 1;
    let section = &README[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .split("```sh\n")
        .skip(1)
        .filter_map(|block| block.split("\n```").next())
        .filter(|block| block.contains("curl "))
        .collect()
}

/// Runs a README block with `sh` against `addr` instead of the default address, and returns
/// the JSON documents it printed.
fn run_block(block: &str, addr: &str) -> Vec<Value> {
    let script = block.replace("127.0.0.1:8080", addr);
    let out = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).output().expect("run sh");
    assert!(out.status.success(), "{script}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{script}\nprinted no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

async fn serve_demo_answers_the_readme_example(app: TestApp) {
    // A database of its own: the binary seeds it, as on a fresh machine.
    let Some((url, _dir)) = fresh_database(app.backend).await else { return };
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let _server = serve(&["--demo", "--bind", &addr, "--database-url", &url], &[], &base).await;

    // The README's curl examples, run as written (only the address differs).
    let blocks = readme_curl_blocks();
    assert_eq!(blocks.len(), 4, "the viewer, launch-and-list, local-runtime and export examples: {blocks:?}");
    let documented: Value = blocks[0]
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|answer| serde_json::from_str(answer).expect("the documented answer is JSON"))
        .expect("the README shows the answer");
    assert_eq!(run_block(blocks[0], &addr), [documented]);
    let answers = run_block(blocks[1], &addr);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(
        answers[0],
        json!({"data": {"launchSessions": {"sessions": [
            {"name": "train-1", "status": "PENDING"}, {"name": "train-2", "status": "PENDING"}, {"name": "train-3", "status": "PENDING"},
        ]}}})
    );
    let list = &answers[1]["data"]["sessions"];
    assert_eq!(list["totalCount"], 3, "{answers:?}");
    let mut names: Vec<&str> =
        list["edges"].as_array().expect("edges").iter().map(|e| e["node"]["name"].as_str().expect("name")).collect();
    names.sort();
    assert_eq!(names, ["train-1", "train-2", "train-3"]);
    // The export example prints the documented header, then the three sessions.
    let script = blocks[3].replace("127.0.0.1:8080", &addr);
    let out = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).output().expect("run sh");
    let csv = String::from_utf8(out.stdout).expect("utf8");
    let documented = blocks[3].lines().find_map(|l| l.strip_prefix("# ")).expect("the README shows the header");
    assert_eq!(csv.lines().next(), Some(documented), "{csv}");
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.starts_with("train-") && l.contains(",alice@example.com,1,1.00")), "{csv}");

    // The local runtime's example, where a sandbox can start: the session really runs.
    let client = reqwest::Client::new();
    let runtime = post(&client, &base, "demo-alice", "{ runtime { kind reason } }").await.expect("runtime");
    if runtime["data"]["runtime"]["kind"] == "LOCAL" {
        let answers = run_block(blocks[2], &addr);
        let id = answers[0]["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{answers:?}"));
        let query = format!(r#"{{ session(id: "{id}") {{ status exitCode statusInfo logs }} }}"#);
        let mut s = Value::Null;
        for _ in 0..200 {
            s = post(&client, &base, "demo-alice", &query).await.expect("session");
            if s["data"]["session"]["status"] == "TERMINATED" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let session = &s["data"]["session"];
        assert_eq!((session["exitCode"].as_i64(), session["statusInfo"].as_str()), (Some(3), Some("exit 3")), "{s}");
        assert!(session["logs"].as_array().is_some_and(|l| l.iter().any(|l| l == "42")), "{s}");
    } else {
        assert!(
            !std::env::var("SESSIOND_REQUIRE_SANDBOX").is_ok_and(|v| v == "1"),
            "the local runtime is required: {runtime}"
        );
    }

    let page = client.get(format!("{base}/graphiql")).send().await.expect("graphiql");
    assert_eq!(page.status(), 200);
    let ready = client.get(format!("{base}/readyz")).send().await.expect("readyz");
    assert_eq!(ready.status(), 200);
}

/// Every flag of `serve` the operations guide documents, with its environment variable and
/// default.
const SERVE_FLAGS: &[(&str, &str, Option<&str>)] = &[
    ("--database-url", "DATABASE_URL", Some("sqlite://sessiond.db?mode=rwc")),
    ("--db-max-connections", "SESSIOND_DB_MAX_CONNECTIONS", Some("8")),
    ("--db-acquire-timeout-ms", "SESSIOND_DB_ACQUIRE_TIMEOUT_MS", Some("5000")),
    ("--db-statement-cache", "SESSIOND_DB_STATEMENT_CACHE", Some("24")),
    ("--db-idle-timeout-ms", "SESSIOND_DB_IDLE_TIMEOUT_MS", Some("20000")),
    ("--bind", "SESSIOND_BIND", Some("127.0.0.1:8080")),
    ("--apps-bind", "SESSIOND_APPS_BIND", None),
    ("--apps-url", "SESSIOND_APPS_URL", None),
    ("--demo", "SESSIOND_DEMO", None),
    ("--max-body-bytes", "SESSIOND_MAX_BODY_BYTES", Some("1048576")),
    ("--max-app-body-bytes", "SESSIOND_MAX_APP_BODY_BYTES", Some("1073741824")),
    ("--app-idle-timeout-secs", "SESSIOND_APP_IDLE_TIMEOUT_SECS", Some("3600")),
    ("--request-timeout-ms", "SESSIOND_REQUEST_TIMEOUT_MS", Some("30000")),
    ("--header-read-timeout-ms", "SESSIOND_HEADER_READ_TIMEOUT_MS", Some("10000")),
    ("--max-connections", "SESSIOND_MAX_CONNECTIONS", Some("8192")),
    ("--max-in-flight", "SESSIOND_MAX_IN_FLIGHT", Some("512")),
    ("--cors-origin", "SESSIOND_CORS_ORIGIN", None),
    ("--max-query-depth", "SESSIOND_MAX_QUERY_DEPTH", Some("24")),
    ("--max-query-cost", "SESSIOND_MAX_QUERY_COST", Some("100000")),
    ("--max-query-fields", "SESSIOND_MAX_QUERY_FIELDS", Some("10000")),
    ("--max-root-fields", "SESSIOND_MAX_ROOT_FIELDS", Some("32")),
    ("--max-aliases", "SESSIOND_MAX_ALIASES", Some("200")),
    ("--max-aggregates", "SESSIOND_MAX_AGGREGATES", Some("8")),
    ("--max-aggregate-rows", "SESSIOND_MAX_AGGREGATE_ROWS", Some("1000000")),
    ("--max-ws-connections-per-user", "SESSIOND_MAX_WS_CONNECTIONS_PER_USER", Some("32")),
    ("--max-subscriptions-per-user", "SESSIOND_MAX_SUBSCRIPTIONS_PER_USER", Some("200")),
    ("--max-terminals-per-user", "SESSIOND_MAX_TERMINALS_PER_USER", Some("8")),
    ("--max-replays-per-user", "SESSIOND_MAX_REPLAYS_PER_USER", Some("4")),
    ("--max-app-connections-per-user", "SESSIOND_MAX_APP_CONNECTIONS_PER_USER", Some("64")),
    ("--operations-per-second-per-user", "SESSIOND_OPERATIONS_PER_SECOND_PER_USER", Some("20")),
    ("--max-ws-unauthenticated", "SESSIOND_MAX_WS_UNAUTHENTICATED", Some("256")),
    ("--replay-connections", "SESSIOND_REPLAY_CONNECTIONS", Some("2")),
    ("--replay-rows-per-second", "SESSIOND_REPLAY_ROWS_PER_SECOND", Some("20000")),
    ("--ws-init-timeout-ms", "SESSIOND_WS_INIT_TIMEOUT_MS", Some("3000")),
    ("--ws-keepalive-ms", "SESSIOND_WS_KEEPALIVE_MS", Some("15000")),
    ("--ws-keepalive-timeout-ms", "SESSIOND_WS_KEEPALIVE_TIMEOUT_MS", Some("45000")),
    ("--max-ws-connections", "SESSIOND_MAX_WS_CONNECTIONS", Some("4096")),
    ("--max-subscriptions-per-connection", "SESSIOND_MAX_SUBSCRIPTIONS_PER_CONNECTION", Some("100")),
    ("--subscription-buffer", "SESSIOND_SUBSCRIPTION_BUFFER", Some("4096")),
    ("--ws-max-message-bytes", "SESSIOND_WS_MAX_MESSAGE_BYTES", Some("65536")),
    ("--max-launch-count", "SESSIOND_MAX_LAUNCH_COUNT", Some("100")),
    ("--max-mounts", "SESSIOND_MAX_MOUNTS", Some("16")),
    ("--scheduler-interval-ms", "SESSIOND_SCHEDULER_INTERVAL_MS", Some("2000")),
    ("--sim-step-ms", "SESSIOND_SIM_STEP_MS", Some("1000")),
    ("--sim-batch-ms", "SESSIOND_SIM_BATCH_MS", Some("30000")),
    ("--expiry-warning-ms", "SESSIOND_EXPIRY_WARNING_MS", Some("900000")),
    ("--runtime", "SESSIOND_RUNTIME", Some("auto")),
    ("--images-file", "SESSIOND_IMAGES_FILE", None),
    ("--runtime-dir", "SESSIOND_RUNTIME_DIR", Some("sessiond-runtime")),
    ("--local-agent", "SESSIOND_LOCAL_AGENT", Some("local")),
    ("--local-resource-group", "SESSIOND_LOCAL_RESOURCE_GROUP", Some("local")),
    ("--terminate-grace-ms", "SESSIOND_TERMINATE_GRACE_MS", Some("5000")),
    ("--work-dir-limit", "SESSIOND_WORK_DIR_LIMIT", Some("10737418240")),
    ("--image-cache-limit", "SESSIOND_IMAGE_CACHE_LIMIT", Some("53687091200")),
    ("--log-retention-days", "SESSIOND_LOG_RETENTION_DAYS", Some("30")),
    ("--log-lines-per-user", "SESSIOND_LOG_LINES_PER_USER", Some("1000000")),
    ("--callback-allow", "SESSIOND_CALLBACK_ALLOW", None),
    ("--callback-max-attempts", "SESSIOND_CALLBACK_MAX_ATTEMPTS", Some("10")),
    ("--callback-retry-ms", "SESSIOND_CALLBACK_RETRY_MS", Some("5000")),
    ("--callback-timeout-ms", "SESSIOND_CALLBACK_TIMEOUT_MS", Some("10000")),
    ("--callback-concurrency", "SESSIOND_CALLBACK_CONCURRENCY", Some("16")),
    ("--log-format", "SESSIOND_LOG_FORMAT", Some("text")),
];

#[test]
fn serve_help_lists_every_flag_with_its_environment_variable() {
    let out = Command::new(BIN).args(["serve", "--help"]).env_clear().output().expect("run sessiond serve --help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).expect("utf8");
    // One entry per option: its first line starts with `-` under a shallow indent.
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in help.lines().skip_while(|l| !l.starts_with("Options:")).skip(1) {
        let indent = line.len() - line.trim_start().len();
        if line.trim_start().starts_with('-') && indent < 8 {
            let flag = line.split_whitespace().find(|w| w.starts_with("--")).unwrap_or_default();
            entries.push((flag.to_owned(), String::new()));
        } else if let Some(last) = entries.last_mut() {
            last.1.push_str(line.trim());
            last.1.push(' ');
        }
    }
    let flags: Vec<&str> = entries.iter().map(|e| e.0.as_str()).filter(|f| *f != "--help").collect();
    let documented: Vec<&str> = SERVE_FLAGS.iter().map(|f| f.0).collect();
    let (mut a, mut b) = (flags.clone(), documented.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "the flags of `serve --help` are the documented ones:\n{help}");
    for (flag, env, _) in SERVE_FLAGS {
        assert!(OPERATIONS.contains(&format!("`{flag}`")) && OPERATIONS.contains(env), "docs/operations.md: {flag}");
    }
    for (flag, env, default) in SERVE_FLAGS {
        let text = &entries.iter().find(|e| e.0 == *flag).expect("entry").1;
        assert!(text.contains(&format!("[env: {env}=]")), "{flag} names {env}: {text}");
        if let Some(d) = default {
            assert!(text.contains(&format!("[default: {d}]")), "{flag} defaults to {d}: {text}");
        }
    }
}

/// The environment alone configures the server: address, database, demo data and the
/// largest launch count.
async fn environment_variables_configure_serve(app: TestApp) {
    let Some((url, _dir)) = fresh_database(app.backend).await else { return };
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let envs = [
        ("SESSIOND_BIND", addr.as_str()),
        ("DATABASE_URL", url.as_str()),
        ("SESSIOND_DEMO", "true"),
        ("SESSIOND_MAX_LAUNCH_COUNT", "2"),
    ];
    let _server = serve(&[], &envs, &base).await;
    let client = reqwest::Client::new();
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let launch = |n: i64| {
        let body = json!({
            "query": "mutation($i: LaunchSessionInput!, $n: Int!) { launchSessions(input: $i, count: $n) { sessions { name } } }",
            "variables": {"n": n, "i": {
                "projectId": project, "name": format!("env-{n}"),
                "image": "python:3.12", "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 1 << 30}]}},
        });
        client.post(format!("{base}/graphql")).bearer_auth("demo-alice").json(&body).send()
    };
    let three: Value = launch(3).await.expect("post").json().await.expect("json");
    assert_eq!(three["errors"][0]["extensions"]["code"], "BAD_USER_INPUT", "{three}");
    assert_eq!(three["errors"][0]["extensions"]["problems"][0]["field"], "count", "{three}");
    assert!(three["errors"][0]["message"].as_str().is_some_and(|m| m.contains("between 1 and 2")), "{three}");
    let two: Value = launch(2).await.expect("post").json().await.expect("json");
    assert_eq!(two, json!({"data": {"launchSessions": {"sessions": [{"name": "env-2-1"}, {"name": "env-2-2"}]}}}));
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

    // Listed by access key, never by secret; revoked, it authenticates no more.
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .args(["--database-url", &app.url])
            .stdin(Stdio::null())
            .output()
            .expect("run sessiond")
    };
    let out = run(&["token", "list", "--email", "carol@other.example"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8(out.stdout).expect("utf8");
    assert!(!listed.contains(&token) && !listed.contains("sd_"), "no secret is ever shown: {listed}");
    let rows: Vec<Vec<&str>> = listed.lines().skip(1).map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "the demo's keypair and the new one: {listed}");
    assert!(rows.iter().all(|r| r[1] == "default" && r[2] == "active"), "{listed}");
    let key = rows[1][0].to_owned();
    let out = run(&["token", "revoke", "--access-key", &key]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let resp = app.gql(Some(&token), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(resp["errors"][0]["extensions"]["code"], "UNAUTHENTICATED", "a revoked token: {resp}");
    let listed = String::from_utf8(run(&["token", "list", "--email", "carol@other.example"]).stdout).expect("utf8");
    assert!(listed.lines().any(|l| l.starts_with(&key) && l.contains("\trevoked\t")), "{listed}");
    let out = run(&["token", "revoke", "--access-key", "AKNOSUCHKEY"]);
    assert!(!out.status.success(), "an unknown access key is an error");
    let out = run(&["token", "list", "--email", "nobody@example.com"]);
    assert!(!out.status.success(), "an unknown user is an error");
}

/// SIGKILL of the server while a session really runs (`--runtime local`): its supervisor
/// goes on, and the restarted server records the session's real end.
async fn a_killed_server_finds_its_local_sessions_ended_as_they_really_did(app: TestApp) {
    let Some((url, _dir)) = fresh_database(app.backend).await else { return };
    let runtime = tempfile::tempdir().expect("runtime directory");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    let runtime_dir = runtime.path().join("runtime");
    let envs = [("SESSIOND_RUNTIME_DIR", runtime_dir.to_str().expect("utf8"))];
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let args =
        ["--demo", "--runtime", "local", "--bind", &addr, "--database-url", &url, "--scheduler-interval-ms", "50"];
    let Some(server) = serve_or_skip_sandbox(&args, &envs, &base).await else { return };
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let launch = format!(
        r#"mutation {{ launchSession(input: {{name: "outlives-the-server", projectId: "{project}", image: "python:3.12", type: BATCH, resourceGroup: "local", startupCommand: "sleep 2; echo finished; exit 7", resources: [{{slot: "cpu", amount: 1}}, {{slot: "mem", amount: 536870912}}]}}) {{ session {{ id }} }} }}"#
    );
    let client = reqwest::Client::new();
    let resp = post(&client, &base, "demo-alice", &launch).await.expect("launch");
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let status = format!(r#"{{ session(id: "{id}") {{ status statusInfo exitCode logs }} }}"#);
    let mut s = Value::Null;
    for _ in 0..200 {
        s = post(&client, &base, "demo-alice", &status).await.expect("status");
        if s["data"]["session"]["status"] == "RUNNING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(s["data"]["session"]["status"], "RUNNING", "{s}");
    let killed = Command::new("kill").arg("-KILL").arg(server.0.id().to_string()).status().expect("kill");
    assert!(killed.success());
    drop(server);
    tokio::time::sleep(Duration::from_secs(3)).await; // the session ends meanwhile
    let _server = serve(&args, &envs, &base).await;
    for _ in 0..200 {
        s = post(&client, &base, "demo-alice", &status).await.expect("status");
        if s["data"]["session"]["status"] == "TERMINATED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let session = &s["data"]["session"];
    assert_eq!((session["status"].as_str(), session["exitCode"].as_i64()), (Some("TERMINATED"), Some(7)), "{s}");
    assert_eq!(session["statusInfo"], "exit 7");
    assert!(session["logs"].as_array().is_some_and(|l| l.iter().any(|l| l == "finished")), "{s}");
}

/// Finding: sessions inherited the server's open descriptors (started holding one on a
/// secret file, a batch session printed it). The server and each supervisor close what
/// they inherited: the session finds nothing on that descriptor.
async fn a_session_gets_no_descriptor_of_the_server(app: TestApp) {
    let Some((url, _dir)) = fresh_database(app.backend).await else { return };
    let runtime = tempfile::tempdir().expect("runtime directory");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    let secret = runtime.path().join("secret");
    std::fs::write(&secret, "top-secret-of-the-host\n").expect("a secret");
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    // The probe of `serve_or_skip_sandbox`, without starting anything.
    let probe = tempfile::tempdir().expect("tempdir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(probe.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    if let Err(why) = sessiond::domain::runtime::local::sandbox::probe(&probe.path().join("probe")) {
        if std::env::var("SESSIOND_REQUIRE_SANDBOX").is_ok_and(|v| v == "1") {
            panic!("the local runtime is required but cannot run: {why}");
        }
        return;
    }
    // The server starts holding descriptor 7 on the secret, as a careless parent leaves it.
    let script = format!(
        "exec 7< '{}'; exec '{BIN}' serve --demo --runtime local --bind {addr} --database-url '{url}' --scheduler-interval-ms 50",
        secret.display()
    );
    let runtime_dir = runtime.path().join("runtime");
    let child = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .env("SESSIOND_RUNTIME_DIR", &runtime_dir)
        .env("SESSIOND_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sessiond");
    let _server = Server(child, runtime);
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if post(&client, &base, "demo-alice", "{ __typename }").await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let launch = format!(
        r#"mutation {{ launchSession(input: {{name: "inherits-nothing", projectId: "{project}", image: "python:3.12", type: BATCH, resourceGroup: "local", startupCommand: "cat <&7; echo cat-says $?; echo fds $(ls /proc/self/fd)", resources: [{{slot: "cpu", amount: 1}}, {{slot: "mem", amount: 536870912}}]}}) {{ session {{ id }} }} }}"#
    );
    let resp = post(&client, &base, "demo-alice", &launch).await.expect("launch");
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let status = format!(r#"{{ session(id: "{id}") {{ status logs }} }}"#);
    let mut s = Value::Null;
    for _ in 0..400 {
        s = post(&client, &base, "demo-alice", &status).await.expect("status");
        if s["data"]["session"]["status"] == "TERMINATED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = s["data"]["session"]["logs"].to_string();
    assert_eq!(s["data"]["session"]["status"], "TERMINATED", "{s}");
    assert!(!logs.contains("top-secret"), "the secret reached the session: {logs}");
    assert!(logs.contains("cat-says 1") || logs.contains("cat-says 2"), "descriptor 7 is not open: {logs}");
}

/// [`serve`], unless no sandbox can start here (`--runtime local` then refuses to start):
/// `None` after a NOTICE, or a failure with `SESSIOND_REQUIRE_SANDBOX=1`.
async fn serve_or_skip_sandbox(args: &[&str], envs: &[(&str, &str)], base: &str) -> Option<Server> {
    let scratch = tempfile::tempdir().expect("tempdir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    // The same check the server makes at start.
    if let Err(why) = sessiond::domain::runtime::local::sandbox::probe(&scratch.path().join("probe")) {
        if std::env::var("SESSIOND_REQUIRE_SANDBOX").is_ok_and(|v| v == "1") {
            panic!("the local runtime is required but cannot run: {why}");
        }
        eprintln!("NOTICE: a local-runtime test was SKIPPED and is reported as passed: {why}");
        return None;
    }
    Some(serve(args, envs, base).await)
}

/// SIGTERM stops the server cleanly: it exits with success, and on SQLite the database file
/// alone holds everything (the write-ahead log is written back and removed), so copying the
/// `.db` file is a complete backup.
async fn sigterm_leaves_a_complete_database_file(app: TestApp) {
    let Some((url, dir)) = fresh_database(app.backend).await else { return };
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let mut server = serve(&["--demo", "--bind", &addr, "--database-url", &url], &[], &base).await;
    let launch = r#"mutation { launchSessions(count: 2, input: {name: "kept", projectId: "PROJECT", image: "python:3.12", resources: [{slot: "cpu", amount: 1}, {slot: "mem", amount: 1073741824}]}) { sessions { name } } }"#
        .replace("PROJECT", &encode(NodeKind::Project, demo_project_id("default/default")).0);
    let resp = post(&reqwest::Client::new(), &base, "demo-alice", &launch).await.expect("launch");
    assert!(resp.get("errors").is_none(), "{resp}");
    let killed = Command::new("kill").arg("-TERM").arg(server.0.id().to_string()).status().expect("kill");
    assert!(killed.success());
    let mut status = None;
    for _ in 0..100 {
        status = server.0.try_wait().expect("wait");
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(status.is_some_and(|s| s.success()), "stopped cleanly: {status:?}");
    let Some(dir) = dir else { return }; // PostgreSQL: nothing more to check
    let file = dir.path().join("sessiond.db");
    let wal = dir.path().join("sessiond.db-wal");
    assert!(std::fs::metadata(&wal).map_or(true, |m| m.len() == 0), "the log is written back");
    let copy = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&file, copy.path().join("copy.db")).expect("copy the file alone");
    let db = sea_orm::Database::connect(format!("sqlite://{}?mode=ro", copy.path().join("copy.db").display()))
        .await
        .expect("open the copy");
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    let kept = entity::session::Entity::find()
        .filter(entity::session::Column::Name.starts_with("kept"))
        .count(&db)
        .await
        .expect("count");
    assert_eq!(kept, 2, "the copy of the file alone has the sessions launched before the stop");
}

/// SIGKILL at any moment: a batch launch in flight is found after the restart whole or not
/// at all, and nothing acknowledged before the kill is lost (a launch, a setting, a status
/// change); the restarted server resumes the sessions it left.
async fn sigkill_keeps_what_was_acknowledged_and_no_half_batch(app: TestApp) {
    let Some((url, _dir)) = fresh_database(app.backend).await else { return };
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let args =
        ["--demo", "--bind", &addr, "--database-url", &url, "--scheduler-interval-ms", "50", "--sim-step-ms", "20"];
    let project = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let batch = |name: &str, count: u32| {
        format!(
            r#"mutation {{ launchSessions(count: {count}, input: {{name: "{name}", projectId: "{project}", image: "python:3.12", resources: [{{slot: "cpu", amount: 0.5}}, {{slot: "mem", amount: 1073741824}}]}}) {{ sessions {{ id }} }} }}"#
        )
    };
    let client = reqwest::Client::new();
    let kill = |server: &Server| {
        let killed = Command::new("kill").arg("-KILL").arg(server.0.id().to_string()).status().expect("kill");
        assert!(killed.success());
    };

    // Acknowledged: a launch, a setting, and the first session's way to RUNNING.
    let mut server = serve(&args, &[], &base).await;
    // Room for 3 × 50 pending sessions of one keypair.
    let db = sea_orm::Database::connect(url.as_str()).await.expect("open the database");
    use sea_orm::ConnectionTrait;
    db.execute_unprepared(
        "UPDATE keypair_resource_policies SET max_pending_sessions = 1000, max_concurrent_sessions = 1000, total_resource_slots = '{}'",
    )
    .await
    .expect("raise the demo policy");
    db.close().await.expect("close");
    let resp = post(&client, &base, "demo-alice", &batch("acked", 2)).await.expect("launch");
    let first =
        resp["data"]["launchSessions"]["sessions"][0]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let resp = post(
        &client,
        &base,
        "demo-alice",
        "mutation { setResourcePanelView(view: TOTAL_IN_RESOURCE_GROUP) { resourcePanelView } }",
    )
    .await
    .expect("setting");
    assert_eq!(resp["data"]["setResourcePanelView"]["resourcePanelView"], "TOTAL_IN_RESOURCE_GROUP", "{resp}");
    let status_of = |id: String| format!(r#"{{ session(id: "{id}") {{ status statusTransitions {{ toStatus }} }} }}"#);
    let mut running = Value::Null;
    for _ in 0..300 {
        running = post(&client, &base, "demo-alice", &status_of(first.clone())).await.expect("status");
        if running["data"]["session"]["status"] == "RUNNING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(running["data"]["session"]["status"], "RUNNING", "{running}");
    let transitions_before = running["data"]["session"]["statusTransitions"].as_array().map_or(0, Vec::len);

    // Kills during batch launches of 50, each at another moment.
    for (round, wait_ms) in [0u64, 3, 10].into_iter().enumerate() {
        let request = {
            let (client, base, query) = (client.clone(), base.clone(), batch(&format!("kill{round}"), 50));
            tokio::spawn(async move { post(&client, &base, "demo-alice", &query).await })
        };
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
        kill(&server);
        let _ = server.0.wait();
        let _ = request.await;
        server = serve(&args, &[], &base).await;
    }

    // After the last restart: every batch whole or absent, everything acknowledged kept.
    let db = sea_orm::Database::connect(url.as_str()).await.expect("open the database");
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    for round in 0..3 {
        let n = entity::session::Entity::find()
            .filter(entity::session::Column::Name.starts_with(format!("kill{round}-")))
            .count(&db)
            .await
            .expect("count");
        assert!(n == 0 || n == 50, "round {round}: {n} of 50 sessions after the kill");
    }
    let acked = entity::session::Entity::find()
        .filter(entity::session::Column::Name.starts_with("acked-"))
        .count(&db)
        .await
        .expect("count");
    assert_eq!(acked, 2);
    let resp =
        post(&client, &base, "demo-alice", "{ viewer { settings { resourcePanelView } } }").await.expect("settings");
    assert_eq!(resp["data"]["viewer"]["settings"]["resourcePanelView"], "TOTAL_IN_RESOURCE_GROUP", "{resp}");
    let after = post(&client, &base, "demo-alice", &status_of(first)).await.expect("status");
    let transitions_after = after["data"]["session"]["statusTransitions"].as_array().map_or(0, Vec::len);
    assert!(transitions_after >= transitions_before, "{running} then {after}");
    // The second acknowledged session was resumed by the restarted server.
    let resp = post(&client, &base, "demo-alice", &format!(r#"{{ sessions(projectId: "{project}", filter: {{nameContains: "acked-"}}) {{ edges {{ node {{ status }} }} }} }}"#))
        .await
        .expect("list");
    assert_eq!(resp["data"]["sessions"]["edges"].as_array().map_or(0, Vec::len), 2, "{resp}");
}

/// The fenced blocks of `lang` in the section `title` of the guide `doc`, verbatim.
fn doc_blocks(doc: &'static str, title: &str, lang: &str) -> Vec<&'static str> {
    let start = doc.find(&format!("\n## {title}\n")).expect("the guide has the section") + 1;
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section.split(&format!("```{lang}\n")).skip(1).filter_map(|block| block.split("\n```").next()).collect()
}

/// A working directory for a README's commands, and a `PATH` on which `sessiond` is this
/// build's binary.
fn work_dir_with_sessiond() -> (tempfile::TempDir, String) {
    let work = tempfile::tempdir().expect("work directory");
    let bin_dir = work.path().join("bin");
    std::fs::create_dir(&bin_dir).expect("bin");
    std::os::unix::fs::symlink(BIN, bin_dir.join("sessiond")).expect("symlink");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    (work, path)
}

/// The README's "Deploy" section, done as written on an empty database: the example file
/// applied (dry run, apply, apply again), a token made, the server started, and the
/// declared user's first launch runs on the declared agent. A bad file changes nothing.
async fn deploy_as_the_readme_says(app: TestApp) {
    let Some((url, _db_dir)) = fresh_database(app.backend).await else { return };
    let (work, path) = work_dir_with_sessiond();
    let toml = doc_blocks(OPERATIONS, "Deploy", "toml");
    assert_eq!(toml.len(), 1, "one example file");
    std::fs::write(work.path().join("team.toml"), toml[0]).expect("team.toml");
    let sh = doc_blocks(OPERATIONS, "Deploy", "sh");
    assert_eq!(sh.len(), 2, "the apply commands, then serve: {sh:?}");
    let run = |script: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(work.path())
            .env("PATH", &path)
            .env("DATABASE_URL", &url)
            .env("SESSIOND_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("run sh")
    };
    // The example's own database URL stands for the test's.
    let script: String =
        sh[0].lines().filter(|l| !l.starts_with("export DATABASE_URL=")).collect::<Vec<_>>().join("\n");
    let out = run(&script);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script}\n{stdout}\n{stderr}");
    assert_eq!(
        stdout.matches("+ domain lab").count(),
        2,
        "the dry run wrote nothing, so the apply plans it again: {stdout}"
    );
    assert!(stdout.contains("+ agent local: in cpu; slots: cpu "), "this machine, its capacity detected: {stdout}");
    assert!(stderr.contains("planned; nothing written (--dry-run)"), "{stderr}");
    assert!(stderr.contains("no changes"), "the second apply changes nothing: {stderr}");
    let token = std::fs::read_to_string(work.path().join("tom.token")).expect("tom.token").trim().to_owned();
    assert!(token.starts_with("sd_"), "{token}");

    // A bad file: every problem with its line, and nothing written.
    std::fs::write(
        work.path().join("bad.toml"),
        "[domains.lab]\nlimits = { cpu = -1 }\n[users.\"x@lab.example\"]\ndomain = \"lab\"\nrole = \"owner\"\n",
    )
    .expect("bad.toml");
    let out = run("sessiond apply -f bad.toml --prune");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("bad.toml:2: domains.lab.limits.cpu: must not be negative"), "{stderr}");
    assert!(stderr.contains("bad.toml:5: users.\"x@lab.example\".role: unknown role"), "{stderr}");
    let out = run("sessiond apply -f team.toml");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no changes"), "the bad file wrote nothing");

    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    assert_eq!(sh[1].trim(), "sessiond serve --bind 0.0.0.0:8080");
    let _server = serve(&["--bind", &addr, "--database-url", &url], &[], &base).await;
    // The server registered this machine as the declared agent: applying again changes nothing.
    let out = run("sessiond apply -f team.toml");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no changes"), "{}", String::from_utf8_lossy(&out.stdout));
    let client = reqwest::Client::new();
    let me = post(&client, &base, &token, "{ viewer { projects { id name } } }").await.expect("viewer");
    let projects = me["data"]["viewer"]["projects"].as_array().expect("projects").clone();
    assert_eq!(projects.len(), 1, "{me}");
    let nlp = projects[0]["id"].as_str().expect("id");
    let launch = format!(
        r#"mutation {{ launchSession(input: {{projectId: "{nlp}", name: "first", image: "python:3.12", type: BATCH,
            startupCommand: "echo first", resources: [{{slot: "cpu", amount: 1}}, {{slot: "mem", amount: 536870912}}]}})
            {{ session {{ id status resourceGroup {{ name }} }} }} }}"#
    );
    let launched = post(&client, &base, &token, &launch).await.expect("launch");
    assert_eq!(launched["data"]["launchSession"]["session"]["resourceGroup"]["name"], "cpu", "{launched}");
    let id = launched["data"]["launchSession"]["session"]["id"].as_str().expect("id").to_owned();
    let query = format!(r#"{{ session(id: "{id}") {{ status agent statusInfo }} }}"#);
    let mut seen = Value::Null;
    for _ in 0..300 {
        seen = post(&client, &base, &token, &query).await.expect("session");
        if matches!(seen["data"]["session"]["status"].as_str(), Some("RUNNING" | "TERMINATED" | "ERROR")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = seen["data"]["session"]["status"].as_str();
    assert!(matches!(status, Some("RUNNING" | "TERMINATED")), "it runs on the declared machine: {seen}");
    assert_eq!(seen["data"]["session"]["agent"], "local", "{seen}");
}

/// The engine `slurm` in a `{ runtime { engines } }` answer.
fn slurm_engine(answer: &Value) -> Value {
    let engines = answer["data"]["runtime"]["engines"].as_array().cloned().unwrap_or_default();
    engines.into_iter().find(|e| e["name"] == "slurm").unwrap_or_default()
}

/// The README's "Run on a Slurm cluster", done as written on an empty database against the
/// tests' cluster (its address, user, partition, token file and output directory stand for
/// the example's): the token made, the file applied, a token for Ana, the server started,
/// and her first batch launch runs as a Slurm job that ends with exit 3 and its output.
async fn slurm_as_the_readme_says(app: TestApp) {
    let Some(cluster) = crate::support::slurm::cluster() else { return };
    let _one = crate::support::slurm::lock().await;
    cluster.cancel_all();
    let Some((url, _db_dir)) = fresh_database(app.backend).await else { return };
    let (work, path) = work_dir_with_sessiond();
    let token_file = work.path().join("slurm.jwt");
    let output_dir = work.path().join("shared");
    let ours = |text: &str| {
        text.replace("http://slurm-head:6820", &cluster.url)
            .replace("svc-sessiond", crate::support::slurm::USER)
            .replace("partition = \"batch\"", &format!("partition = \"{}\"", crate::support::slurm::PARTITION))
            .replace("/etc/sessiond/slurm.jwt", &token_file.display().to_string())
            .replace("/shared/sessiond", &output_dir.display().to_string())
            .replace("/etc/slurm/slurm.conf", &cluster.conf.display().to_string())
            .replace("/usr/local/bin/sessiond", &cluster.sessiond.display().to_string())
    };
    let toml = doc_blocks(ENGINES, "Run on a Slurm cluster", "toml");
    assert_eq!(toml.len(), 1, "one example file");
    std::fs::write(work.path().join("slurm.toml"), ours(toml[0])).expect("slurm.toml");
    let sh = doc_blocks(ENGINES, "Run on a Slurm cluster", "sh");
    assert_eq!(sh.len(), 1, "{sh:?}");
    let lines: Vec<&str> = sh[0].lines().collect();
    assert_eq!(lines.last().map(|l| l.trim()), Some("sessiond serve --bind 0.0.0.0:8080"));
    let script = ours(&lines[..lines.len() - 1].join("\n"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())
        .env("PATH", &path)
        .env("DATABASE_URL", &url)
        .env("SLURM_CONF", &cluster.conf)
        .env("SESSIOND_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run sh");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script}\n{stdout}\n{stderr}");
    assert!(stdout.contains("+ engine slurm: kind slurm"), "{stdout}");
    assert!(!stdout.contains("eyJ"), "the token itself is never shown or stored: {stdout}");
    let token = std::fs::read_to_string(work.path().join("ana.token")).expect("ana.token").trim().to_owned();

    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let _server = serve(&["--bind", &addr, "--database-url", &url], &[], &base).await;
    let client = reqwest::Client::new();
    // The partition's nodes become the group's agents within a look or two.
    let engines = "{ runtime { engines { name kind answering nodes } } }";
    let mut seen = Value::Null;
    for _ in 0..200 {
        seen = post(&client, &base, &token, engines).await.expect("runtime");
        if slurm_engine(&seen)["nodes"] == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(slurm_engine(&seen), json!({"name": "slurm", "kind": "SLURM", "answering": true, "nodes": 2}));
    let me = post(&client, &base, &token, "{ viewer { projects { id name } } }").await.expect("viewer");
    let ml = me["data"]["viewer"]["projects"][0]["id"].as_str().expect("the project").to_owned();
    let launch = format!(
        r#"mutation {{ launchSession(input: {{projectId: "{ml}", name: "first", image: "python:3.12", type: BATCH,
            startupCommand: "echo hello; exit 3", resources: [{{slot: "cpu", amount: 1}}, {{slot: "mem", amount: 536870912}}]}})
            {{ session {{ id }} }} }}"#
    );
    let launched = post(&client, &base, &token, &launch).await.expect("launch");
    let id =
        launched["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{launched}")).to_owned();
    let query = format!(r#"{{ session(id: "{id}") {{ status agent statusInfo exitCode logs }} }}"#);
    let mut seen = Value::Null;
    for _ in 0..600 {
        seen = post(&client, &base, &token, &query).await.expect("session");
        if matches!(seen["data"]["session"]["status"].as_str(), Some("TERMINATED" | "ERROR")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = &seen["data"]["session"];
    assert_eq!(
        (s["status"].as_str(), s["exitCode"].as_i64(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some(3), Some("exit 3")),
        "{seen}"
    );
    assert!(s["logs"].to_string().contains("hello"), "{seen}");
    assert!(["n1", "n2"].contains(&s["agent"].as_str().unwrap_or("")), "{seen}");
}

/// Logs on a stderr that is not a terminal are plain text, without colour codes; with
/// `--log-format json` each line is one JSON object.
async fn logs_are_plain_text_off_a_terminal_or_json_lines(app: TestApp) {
    for format in ["text", "json"] {
        let Some((url, _dir)) = fresh_database(app.backend).await else { return };
        let addr = format!("127.0.0.1:{}", free_port());
        let runtime = tempfile::tempdir().expect("runtime directory");
        let mut child = Command::new(BIN)
            .args(["serve", "--demo", "--runtime", "simulated", "--bind", &addr, "--database-url", &url])
            .args(["--log-format", format])
            .env("SESSIOND_RUNTIME_DIR", runtime.path())
            .env("SESSIOND_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sessiond");
        let client = reqwest::Client::new();
        let base = format!("http://{addr}");
        let mut up = false;
        for _ in 0..200 {
            if post(&client, &base, "demo-alice", "{ __typename }").await.is_ok() {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let out = child.wait_with_output().expect("its stderr");
        assert!(up, "sessiond serve never answered");
        let text = String::from_utf8(out.stderr).expect("UTF-8");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() >= 2, "{format}: the start-up is logged: {text}");
        assert!(!text.contains('\u{1b}'), "{format}: no colour codes off a terminal: {text}");
        if format == "json" {
            for line in lines {
                let entry: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
                assert!(entry["level"].is_string() && entry["timestamp"].is_string(), "{line}");
            }
        }
    }
}

db_tests!(
    logs_are_plain_text_off_a_terminal_or_json_lines,
    slurm_as_the_readme_says,
    deploy_as_the_readme_says,
    serve_demo_answers_the_readme_example,
    sigterm_leaves_a_complete_database_file,
    sigkill_keeps_what_was_acknowledged_and_no_half_batch,
    a_killed_server_finds_its_local_sessions_ended_as_they_really_did,
    a_session_gets_no_descriptor_of_the_server,
    environment_variables_configure_serve,
    token_create_prints_a_working_token
);
