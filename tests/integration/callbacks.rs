//! Completion callbacks: a receiver on an allowed loopback port gets one signed POST per
//! event; one that is down gets its retries, across a restart; hosts not allowed are refused
//! at launch, and addresses not allowed when called; a receiver that never answers holds up
//! no request and no scheduling.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::{Value, json};

use sessiond::config::CallbackArgs;
use sessiond::domain::lifecycle::callbacks::Allow;

use crate::db_tests;
use crate::support::{TestApp, error_codes, launch_input, terminate};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const CALLBACKS: &str = "query($id: ID!) { session(id: $id) { status callbacks { event url state nextAttemptAt
  finishedAt attempts { attempt outcome statusCode error } } } }";

/// How the receiver answers.
const ANSWER_OK: u8 = 0;
const ANSWER_HANG: u8 = 2;

/// One POST a receiver got.
#[derive(Clone, Debug)]
struct Got {
    uri: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

#[derive(Clone, Default)]
struct Shared {
    got: Arc<Mutex<Vec<Got>>>,
    answer: Arc<AtomicU8>,
    answered: Arc<AtomicUsize>,
}

/// A callback receiver on a loopback port, until dropped.
struct Receiver {
    addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn hook(State(s): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    s.got.lock().expect("not poisoned").push(Got { uri: uri.to_string(), headers, body: body.to_vec() });
    if s.answer.load(Ordering::SeqCst) == ANSWER_HANG {
        std::future::pending::<()>().await;
    }
    s.answered.fetch_add(1, Ordering::SeqCst);
    StatusCode::NO_CONTENT
}

impl Receiver {
    async fn start(answer: u8) -> Self {
        Self::on(tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind"), answer)
    }

    fn on(listener: tokio::net::TcpListener, answer: u8) -> Self {
        let addr = listener.local_addr().expect("address");
        let shared = Shared::default();
        shared.answer.store(answer, Ordering::SeqCst);
        let router = axum::Router::new().route("/hook", axum::routing::post(hook)).with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.ok();
        });
        Self { addr, shared, task }
    }

    fn got(&self) -> Vec<Got> {
        self.shared.got.lock().expect("not poisoned").clone()
    }
}

/// Callbacks to `allow`, retried quickly.
fn args(allow: &str, retry_ms: u64, timeout_ms: u64) -> CallbackArgs {
    CallbackArgs {
        callback_allow: Allow::parse(allow).expect("allow list"),
        callback_retry_ms: retry_ms,
        callback_timeout_ms: timeout_ms,
        ..CallbackArgs::default()
    }
}

fn with_callback(name: &str, url: &str, on_running: bool) -> Value {
    let mut i = launch_input(name, 0.5);
    i["callbackUrl"] = json!(url);
    i["callbackOnRunning"] = json!(on_running);
    i
}

async fn launch(app: &TestApp, token: &str, input: Value) -> String {
    let resp = app.gql(Some(token), LAUNCH, json!({"i": input})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

/// The session's callbacks once `done` holds for them.
async fn callbacks_when(app: &TestApp, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let resp =
        app.wait_for("demo-alice", CALLBACKS, json!({"id": id}), |r| done(&r["data"]["session"]["callbacks"])).await;
    resp["data"]["session"]["callbacks"].clone()
}

fn all_delivered(n: usize) -> impl Fn(&Value) -> bool {
    move |c| c.as_array().is_some_and(|a| a.len() == n && a.iter().all(|c| c["state"] == "DELIVERED"))
}

fn hmac_hex(key: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).expect("any key length");
    mac.update(body);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

async fn signing_key(app: &TestApp, token: &str) -> String {
    let resp = app.gql(Some(token), "{ viewer { callbackSigningKey } }", json!({})).await;
    resp["data"]["viewer"]["callbackSigningKey"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn a_receiver_gets_one_signed_post_per_event(mut app: TestApp) {
    let receiver = Receiver::start(ANSWER_OK).await;
    let port = receiver.addr.port();
    app.start_callbacks(&args(&format!("127.0.0.1:{port}"), 100, 5_000));
    app.start_workers();
    let url = format!("http://127.0.0.1:{port}/hook?token=receiver-secret");

    // Told of its start and its end.
    let both = launch(&app, "demo-alice", with_callback("told-twice", &url, true)).await;
    app.wait_for("demo-alice", CALLBACKS, json!({"id": both}), |r| r["data"]["session"]["status"] == "RUNNING").await;
    assert_eq!(terminate(&app, "demo-alice", &both).await, "TERMINATING");
    let shown = callbacks_when(&app, &both, all_delivered(2)).await;
    assert_eq!(shown[0]["event"], "RUNNING", "{shown}");
    assert_eq!(shown[1]["event"], "TERMINATED", "{shown}");
    for c in shown.as_array().expect("present") {
        // The query may hold the receiver's secret: not shown.
        assert_eq!(c["url"], format!("http://127.0.0.1:{port}/hook"), "{c}");
        assert_eq!(c["attempts"], json!([{"attempt": 1, "outcome": "DELIVERED", "statusCode": 204, "error": null}]));
        assert!(c["nextAttemptAt"].is_null() && c["finishedAt"].is_string(), "{c}");
    }

    // Told of its end only: a session cancelled before it ran.
    let end = launch(&app, "demo-alice", with_callback("told-once", &url, false)).await;
    crate::support::force_terminate(&app, "demo-alice", &end).await;
    let shown = callbacks_when(&app, &end, all_delivered(1)).await;
    assert!(["TERMINATED", "CANCELLED"].contains(&shown[0]["event"].as_str().expect("present")), "{shown}");

    // Exactly one POST per event, each signed with its owner's key.
    let got = receiver.got();
    assert_eq!(got.len(), 3, "{got:?}");
    let key = signing_key(&app, "demo-alice").await;
    assert_eq!(key.len(), 64);
    assert_eq!(key, signing_key(&app, "demo-alice").await, "the key is stable");
    assert_ne!(key, signing_key(&app, "demo-bob").await, "each owner has a key of their own");
    let mut seen = Vec::new();
    for g in &got {
        assert_eq!(g.uri, "/hook?token=receiver-secret");
        let signature = g.headers["x-sessiond-signature-256"].to_str().expect("present");
        assert_eq!(signature, format!("sha256={}", hmac_hex(&key, &g.body)), "{g:?}");
        assert!(g.headers.get("x-sessiond-signature-256-previous").is_none(), "never rotated: {g:?}");
        assert_eq!(g.headers["content-type"], "application/json");
        let body: Value = serde_json::from_slice(&g.body).expect("a JSON body");
        assert_eq!(
            g.headers["x-sessiond-delivery"].to_str().expect("present"),
            body["delivery"].as_str().expect("present")
        );
        assert_eq!(g.headers["x-sessiond-event"].to_str().expect("present"), body["event"].as_str().expect("present"));
        assert_eq!(body["session"]["status"], body["event"]);
        seen.push((
            body["session"]["id"].as_str().expect("present").to_owned(),
            body["event"].as_str().expect("present").to_owned(),
        ));
        if body["session"]["id"] == json!(both) && body["event"] == "TERMINATED" {
            let s = &body["session"];
            assert_eq!(s["name"], "told-twice");
            assert_eq!(s["type"], "INTERACTIVE");
            assert!(s["result"].is_string(), "{body}");
            assert!(
                s["createdAt"].is_string() && s["startedAt"].is_string() && s["terminatedAt"].is_string(),
                "{body}"
            );
            assert!(body["occurredAt"].is_string());
        }
    }
    seen.sort();
    let mut expected = vec![
        (both.clone(), "RUNNING".to_owned()),
        (both.clone(), "TERMINATED".to_owned()),
        (end.clone(), shown[0]["event"].as_str().expect("present").to_owned()),
    ];
    expected.sort();
    assert_eq!(seen, expected);

    // Bob sees no callbacks of Alice's: her session does not exist for him.
    let resp = app.gql(Some("demo-bob"), CALLBACKS, json!({"id": both})).await;
    assert!(resp["data"]["session"].is_null(), "{resp}");
}

const ROTATE: &str = "mutation { rotateCallbackSigningKey }";

async fn rotate(app: &TestApp, token: &str) -> String {
    let resp = app.gql(Some(token), ROTATE, json!({})).await;
    resp["data"]["rotateCallbackSigningKey"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

/// Finding (D52): the callback key could not be rotated. Now its owner replaces it; for a
/// day the old key signs beside the new one, so a receiver switches without refusing one.
async fn a_callback_key_is_rotated_without_a_refused_callback(mut app: TestApp) {
    let receiver = Receiver::start(ANSWER_OK).await;
    let port = receiver.addr.port();
    app.start_callbacks(&args(&format!("127.0.0.1:{port}"), 100, 5_000));
    let url = format!("http://127.0.0.1:{port}/hook");
    let (old, bobs) = (signing_key(&app, "demo-alice").await, signing_key(&app, "demo-bob").await);
    let new = rotate(&app, "demo-alice").await;
    assert_eq!(new.len(), 64);
    assert_ne!(new, old);
    assert_eq!(signing_key(&app, "demo-alice").await, new, "the key from now on");
    assert_eq!(signing_key(&app, "demo-bob").await, bobs, "nobody else's");

    // A callback after the rotation: signed with the new key, and with the old beside it.
    let signatures = |n: usize| {
        let got = receiver.got();
        assert_eq!(got.len(), n, "{got:?}");
        let g = &got[n - 1];
        let header = |name: &str| g.headers.get(name).map(|v| v.to_str().expect("text").to_owned());
        (g.body.clone(), header("x-sessiond-signature-256"), header("x-sessiond-signature-256-previous"))
    };
    let cancel = |name: &'static str| {
        let app = &app;
        let url = url.clone();
        async move {
            let id = launch(app, "demo-alice", with_callback(name, &url, false)).await;
            crate::support::force_terminate(app, "demo-alice", &id).await;
            callbacks_when(app, &id, all_delivered(1)).await;
        }
    };
    cancel("after-rotation").await;
    let (body, current, previous) = signatures(1);
    assert_eq!(current, Some(format!("sha256={}", hmac_hex(&new, &body))));
    assert_eq!(previous, Some(format!("sha256={}", hmac_hex(&old, &body))));

    // Rotated again within the day: the first key signs no more.
    let newer = rotate(&app, "demo-alice").await;
    cancel("after-two").await;
    let (body, current, previous) = signatures(2);
    assert_eq!(current, Some(format!("sha256={}", hmac_hex(&newer, &body))));
    assert_eq!(previous, Some(format!("sha256={}", hmac_hex(&new, &body))));

    // A day on, the key rotated out signs nothing; the new one stays, on every replica.
    let alice = sessiond::domain::directory::seed::demo_user_id("alice@example.com");
    let later = chrono::Utc::now() + chrono::Duration::hours(25);
    let keys = sessiond::domain::lifecycle::callbacks::owner_keys(&app.db, alice, later).await.expect("the keys");
    assert_eq!((keys.current, keys.previous), (newer, None));
}

async fn a_receiver_down_gets_its_retries_across_a_restart(mut app: TestApp) {
    // A port nothing listens on, for now.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("present").port();
    drop(listener);
    let callbacks = args(&format!("127.0.0.1:{port}"), 50, 1_000);
    app.start_callbacks(&callbacks);
    let id =
        launch(&app, "demo-alice", with_callback("retried", &format!("http://127.0.0.1:{port}/hook"), false)).await;
    // Cancelled while pending: its end is its event.
    assert_eq!(terminate(&app, "demo-alice", &id).await, "CANCELLED");
    let tried = |c: &Value| c[0]["attempts"].as_array().is_some_and(|a| a.len() >= 2);
    let shown = callbacks_when(&app, &id, tried).await;
    assert_eq!(shown[0]["state"], "PENDING", "{shown}");
    assert!(shown[0]["nextAttemptAt"].is_string(), "{shown}");
    for a in shown[0]["attempts"].as_array().expect("present") {
        assert_eq!((&a["outcome"], &a["statusCode"]), (&json!("UNREACHABLE"), &Value::Null), "{a}");
        assert_eq!(a["error"], "the connection failed");
    }

    // The server restarts; the receiver comes up meanwhile.
    let mut again = app.restart().await;
    drop(app);
    let receiver =
        Receiver::on(tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind again"), ANSWER_OK);
    again.start_callbacks(&callbacks);
    let resp = again
        .wait_for("demo-alice", CALLBACKS, json!({"id": id}), |r| {
            r["data"]["session"]["callbacks"][0]["state"] == "DELIVERED"
        })
        .await;
    let attempts = resp["data"]["session"]["callbacks"][0]["attempts"].as_array().expect("present").clone();
    let last = attempts.last().expect("present");
    assert_eq!((&last["outcome"], &last["statusCode"]), (&json!("DELIVERED"), &json!(204)), "{resp}");
    assert!(attempts.len() >= 3, "{resp}");
    let numbers: Vec<i64> = attempts.iter().map(|a| a["attempt"].as_i64().expect("present")).collect();
    assert_eq!(numbers, (1..=attempts.len() as i64).collect::<Vec<_>>());
    let got = receiver.got();
    assert_eq!(got.len(), 1, "{got:?}");
    let body: Value = serde_json::from_slice(&got[0].body).expect("present");
    assert_eq!((&body["event"], &body["session"]["id"]), (&json!("CANCELLED"), &json!(id)));
}

async fn hosts_not_allowed_are_refused(mut app: TestApp) {
    let problem = |resp: &Value| {
        let p = &resp["errors"][0]["extensions"]["problems"][0];
        (p["code"].as_str().unwrap_or("-").to_owned(), p["field"].as_str().unwrap_or("-").to_owned())
    };
    // By default no callback is allowed at all.
    let resp =
        app.gql(Some("demo-alice"), LAUNCH, json!({"i": with_callback("a-cb", "https://example.com/", false)})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(problem(&resp), ("CALLBACKS_DISABLED".to_owned(), "input.callbackUrl".to_owned()), "{resp}");

    let receiver = Receiver::start(ANSWER_OK).await;
    let port = receiver.addr.port();
    app.start_callbacks(&args(&format!("*.example.com,127.0.0.*,*:{port}"), 50, 1_000));
    let cases = [
        ("http://evil.test/hook", "CALLBACK_NOT_ALLOWED"),
        ("https://example.com/", "CALLBACK_NOT_ALLOWED"),
        // A wildcard is no pass to a loopback address.
        ("http://127.0.0.5/hook", "CALLBACK_NOT_ALLOWED"),
        ("ftp://a.example.com/", "INVALID_CALLBACK_URL"),
        ("https://user:pw@a.example.com/", "INVALID_CALLBACK_URL"),
        ("not a url", "INVALID_CALLBACK_URL"),
    ];
    for (url, code) in cases {
        let i = with_callback("refused", url, false);
        let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
        assert_eq!(problem(&resp), (code.to_owned(), "input.callbackUrl".to_owned()), "{url}: {resp}");
        let check = app
            .gql(
                Some("demo-alice"),
                "query($i: LaunchSessionInput!) { checkLaunch(input: $i) { valid problems { code field } } }",
                json!({"i": i}),
            )
            .await;
        assert_eq!(
            check["data"]["checkLaunch"]["problems"][0],
            json!({"code": code, "field": "input.callbackUrl"}),
            "{check}"
        );
    }
    let mut no_url = launch_input("no-url", 0.5);
    no_url["callbackOnRunning"] = json!(true);
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": no_url})).await;
    assert_eq!(problem(&resp), ("CALLBACK_URL_REQUIRED".to_owned(), "input.callbackOnRunning".to_owned()), "{resp}");
    // A template keeps no callback: it belongs to one run.
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { saveSessionTemplate(name: \"t\", input: $i) { id } }",
            json!({"i": with_callback("tpl", "https://a.example.com/", false)}),
        )
        .await;
    assert_eq!(problem(&resp), ("NOT_IN_TEMPLATE".to_owned(), "input.callbackUrl".to_owned()), "{resp}");
    assert_eq!(count_sessions(&app).await, 0, "nothing refused was written");

    // A name allowed by a wildcard is called only at public addresses: `localhost` is not.
    let id =
        launch(&app, "demo-alice", with_callback("blocked", &format!("http://localhost:{port}/hook"), false)).await;
    assert_eq!(terminate(&app, "demo-alice", &id).await, "CANCELLED");
    let shown = callbacks_when(&app, &id, |c| c[0]["state"] == "FAILED").await;
    let attempts = shown[0]["attempts"].as_array().expect("present");
    assert_eq!(attempts.len(), 1, "a blocked callback is not tried again: {shown}");
    assert_eq!(attempts[0]["outcome"], "BLOCKED");
    let error = attempts[0]["error"].as_str().expect("present");
    assert!(error.contains("a non-public address"), "{shown}");
    // What an internal name resolves to is not told to the user (it is logged).
    assert!(!error.contains("127.0.0.1") && !error.contains("::1"), "{shown}");
    assert!(receiver.got().is_empty(), "the receiver was never called");
}

async fn count_sessions(app: &TestApp) -> u64 {
    use sea_orm::{EntityTrait, PaginatorTrait};
    entity::session::Entity::find().count(&app.db).await.expect("count")
}

async fn a_receiver_that_never_answers_holds_up_nothing(mut app: TestApp) {
    let receiver = Receiver::start(ANSWER_HANG).await;
    let port = receiver.addr.port();
    // Each call waits a minute for an answer that never comes.
    app.start_callbacks(&args(&format!("127.0.0.1:{port}"), 50, 60_000));
    app.start_workers();
    let url = format!("http://127.0.0.1:{port}/hook");
    let first = launch(&app, "demo-alice", with_callback("stuck-1", &url, true)).await;
    // Its start is being told, and the receiver holds that call.
    for _ in 0..1500 {
        if !receiver.got().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(receiver.got().len(), 1, "the receiver was called");

    // Meanwhile launches return, the scheduler schedules and sessions end: none waits.
    let mut ids = Vec::new();
    for n in 2..=6 {
        ids.push(launch(&app, "demo-alice", with_callback(&format!("stuck-{n}"), &url, false)).await);
    }
    for id in &ids {
        app.wait_for("demo-alice", CALLBACKS, json!({"id": id}), |r| r["data"]["session"]["status"] == "RUNNING").await;
        assert_eq!(terminate(&app, "demo-alice", id).await, "TERMINATING");
    }
    assert_eq!(receiver.shared.answered.load(Ordering::SeqCst), 0, "the receiver never answered");
    let resp = app.gql(Some("demo-alice"), CALLBACKS, json!({"id": first})).await;
    let c = &resp["data"]["session"]["callbacks"][0];
    assert_eq!(
        (&c["event"], &c["state"], &c["attempts"]),
        (&json!("RUNNING"), &json!("PENDING"), &json!([])),
        "{resp}"
    );
}

/// A wrapper that runs the server with `hosts` as its `/etc/hosts` (a mount namespace of its
/// own; the network is the test's), or `None` after a NOTICE where bubblewrap cannot run.
fn with_hosts_file(hosts: &std::path::Path) -> Option<Vec<String>> {
    let works = std::process::Command::new("bwrap")
        .args(["--dev-bind", "/", "/", "--", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        assert!(
            !std::env::var("SESSIOND_REQUIRE_SANDBOX").is_ok_and(|v| v == "1"),
            "bubblewrap is required to give the server a hosts file of its own"
        );
        eprintln!("NOTICE: a callbacks test was SKIPPED and is reported as passed: bubblewrap cannot run here");
        return None;
    }
    let hosts = hosts.to_str().expect("a UTF-8 path").to_owned();
    // `--die-with-parent`: killing the wrapper stops the server too (it outlived its test).
    let args = ["bwrap", "--die-with-parent", "--dev-bind", "/", "/", "--bind", &hosts, "/etc/hosts", "--"];
    Some(args.map(str::to_owned).to_vec())
}

/// The server connects only to the addresses it checked, however the host is spelt and
/// whatever the name resolves to later: a final dot that resolves elsewhere than the name
/// without it, a name with a public and a loopback address, and a name that moves to
/// loopback between two tries never reach the receiver on loopback. Names resolve through
/// the server's own hosts file.
async fn callbacks_reach_only_the_addresses_checked(app: TestApp) {
    use crate::support::binary::{free_port, post_with, serve_under};
    let receiver = Receiver::start(ANSWER_OK).await;
    let port = receiver.addr.port();
    let dir = tempfile::tempdir().expect("tempdir");
    let hosts = dir.path().join("hosts");
    // 93.184.216.34 is public, and unreachable from here: a try there fails, nothing more.
    let public = "93.184.216.34";
    let names = |moves_to: &str| {
        format!(
            "127.0.0.1 localhost\n{public} dot.hooks.test\n127.0.0.1 dot.hooks.test.\n\
             {public} two.hooks.test\n127.0.0.1 two.hooks.test\n{moves_to} moves.hooks.test\n"
        )
    };
    std::fs::write(&hosts, names(public)).expect("write hosts");
    let Some(wrapper) = with_hosts_file(&hosts) else { return };
    let Some((url, _db_dir)) = crate::support::fresh_database(app.backend).await else { return };
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let allow = format!("*.hooks.test:{port}");
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let args = [
        "--demo",
        "--runtime",
        "simulated",
        "--bind",
        &addr,
        "--database-url",
        &url,
        "--callback-allow",
        &allow,
        "--callback-timeout-ms",
        "500",
        "--callback-retry-ms",
        "300",
        "--callback-max-attempts",
        "3",
    ];
    let _server = serve_under(&wrapper, &args, &[], &base).await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for name in ["dot.hooks.test.", "two.hooks.test", "moves.hooks.test"] {
        let input = with_callback(name.trim_end_matches('.'), &format!("http://{name}:{port}/hook"), false);
        let resp = post_with(&client, &base, "demo-alice", LAUNCH, json!({"i": input})).await.expect("launch");
        let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
        let end = "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }";
        post_with(&client, &base, "demo-alice", end, json!({"ids": [id]})).await.expect("terminate");
        ids.push(id);
    }
    let callbacks = |id: String| {
        let client = client.clone();
        let base = base.clone();
        async move {
            let resp = post_with(&client, &base, "demo-alice", CALLBACKS, json!({"id": id})).await.expect("callbacks");
            resp["data"]["session"]["callbacks"][0].clone()
        }
    };
    // The moving name's first try goes to its public address; then it moves to loopback.
    for _ in 0..200 {
        if callbacks(ids[2].clone()).await["attempts"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    std::fs::write(&hosts, names("127.0.0.1")).expect("write hosts");
    let mut shown = Vec::new();
    for id in &ids {
        let mut c = Value::Null;
        for _ in 0..400 {
            c = callbacks(id.clone()).await;
            if c["state"] == "FAILED" || c["state"] == "DELIVERED" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        shown.push(c);
    }
    assert!(receiver.got().is_empty(), "a callback reached loopback: {:?} {shown:?}", receiver.got());
    let outcomes = |c: &Value| -> Vec<String> {
        c["attempts"]
            .as_array()
            .expect("attempts")
            .iter()
            .map(|a| a["outcome"].as_str().expect("outcome").to_owned())
            .collect()
    };
    assert!(shown.iter().all(|c| c["state"] == "FAILED"), "{shown:?}");
    // The final dot is the name without it: tried at its public address alone.
    assert!(outcomes(&shown[0]).iter().all(|o| o == "UNREACHABLE" || o == "TIMEOUT"), "{shown:?}");
    // A name with a non-public address is not called at all.
    assert_eq!(outcomes(&shown[1]), ["BLOCKED"], "{shown:?}");
    // A name is checked again at each try: the moved one is blocked once it moved.
    let moved = outcomes(&shown[2]);
    assert!(moved.len() >= 2 && moved.last().is_some_and(|o| o == "BLOCKED"), "{shown:?}");
}

/// One owner's receivers that never answer take that owner's share of the deliverer's slots
/// and no more: another owner's callback is delivered while they all still hang.
async fn one_owners_hanging_receivers_delay_no_one_else(mut app: TestApp) {
    let hanging = Receiver::start(ANSWER_HANG).await;
    let ok = Receiver::start(ANSWER_OK).await;
    let mut callbacks = args(&format!("127.0.0.1:{},127.0.0.1:{}", hanging.addr.port(), ok.addr.port()), 50, 60_000);
    callbacks.callback_concurrency = 8;
    let share = sessiond::domain::lifecycle::callbacks::deliver::share(8);
    assert_eq!(share, 2);
    app.start_callbacks(&callbacks);
    let stuck = format!("http://127.0.0.1:{}/hook", hanging.addr.port());
    for n in 0..12 {
        let id = launch(&app, "demo-alice", with_callback(&format!("stuck-{n}"), &stuck, false)).await;
        assert_eq!(terminate(&app, "demo-alice", &id).await, "CANCELLED");
    }
    for _ in 0..1500 {
        if hanging.got().len() >= share {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let id =
        launch(&app, "demo-bob", with_callback("bobs", &format!("http://127.0.0.1:{}/hook", ok.addr.port()), false))
            .await;
    assert_eq!(terminate(&app, "demo-bob", &id).await, "CANCELLED");
    let resp = app
        .wait_for("demo-bob", CALLBACKS, json!({"id": id}), |r| all_delivered(1)(&r["data"]["session"]["callbacks"]))
        .await;
    assert_eq!(ok.got().len(), 1, "{resp}");
    // Alice's calls all still hang (a minute each), and she has her share of them, no more.
    assert_eq!(hanging.got().len(), share, "alice's calls under way");
    assert_eq!(hanging.shared.answered.load(Ordering::SeqCst), 0);
}

db_tests!(
    one_owners_hanging_receivers_delay_no_one_else,
    callbacks_reach_only_the_addresses_checked,
    a_receiver_gets_one_signed_post_per_event,
    a_callback_key_is_rotated_without_a_refused_callback,
    a_receiver_down_gets_its_retries_across_a_restart,
    hosts_not_allowed_are_refused,
    a_receiver_that_never_answers_holds_up_nothing,
);
