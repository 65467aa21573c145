//! Idle checks on the local runtime: an interactive session without activity is warned of,
//! then reclaimed ("idle timeout"); terminal input and real use are activity; an
//! administrator's exemption keeps a session; an extension pushes an idle expiry back.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::domain::live::events::EventKind;
use sessiond::domain::model::status::SessionStatus;

use crate::db_tests;
use crate::local_runtime::{Machine, launch, session_uuid, terminal, terminal_url};
use crate::support::{TestApp, error_codes, project};

const DETAIL: &str = "query($id: ID!) { session(id: $id) {
  status statusInfo startedAt exemptIdle
  expiry { at reason extendable }
  idleChecks { check slot measured threshold active remainingSeconds }
  utilization { slot current }
  schedulingHistory { edges { node { phase message } } }
} }";

/// Every keypair's policy: reclaim after `timeout` s without activity, where activity is
/// `cpu` cores or more, and terminal input when `terminal`; one extension of up to 60 s.
async fn policy(app: &TestApp, timeout: i64, cpu: f64, terminal: bool) {
    app.db
        .execute_unprepared(&format!(
            "UPDATE keypair_resource_policies SET idle_timeout_seconds = {timeout}, \
             idle_utilization = '{{\"cpu\": {cpu}}}', idle_counts_terminal = {terminal}, \
             max_extension_seconds = 60, max_extensions = 1"
        ))
        .await
        .expect("policy");
}

fn interactive(name: &str) -> Value {
    json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12", "type": "INTERACTIVE",
        "resourceGroup": "local", "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
    })
}

async fn detail(app: &TestApp, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    app.wait_for("demo-alice", DETAIL, json!({"id": id}), |r| done(&r["data"]["session"])).await["data"]["session"]
        .clone()
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).unwrap_or_else(|| panic!("a time: {v}")).into()
}

fn phases(s: &Value) -> Vec<String> {
    s["schedulingHistory"]["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["node"]["phase"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Holds for `seconds` while `s` stays RUNNING; the last detail read.
async fn stays_running(app: &TestApp, id: &str, seconds: u64) -> Value {
    let until = Instant::now() + Duration::from_secs(seconds);
    loop {
        let s = detail(app, id, |_| true).await;
        assert_eq!(s["status"], "RUNNING", "{s}");
        if Instant::now() >= until {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A session that does nothing: its expiry is IDLE at its start + the timeout, its checks
/// say what they measure; an extension pushes it back; its owner is warned, then it ends
/// with "idle timeout".
async fn an_idle_session_is_warned_of_then_reclaimed(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    policy(&app, 4, 0.5, true).await;
    let mut events = app.bus.subscribe();
    let id = launch(&app, "demo-alice", interactive("idle")).await;
    let running = detail(&app, &id, |s| s["status"] == "RUNNING").await;
    let started = time(&running["startedAt"]);
    assert_eq!(running["expiry"]["reason"], "IDLE", "{running}");
    assert_eq!(time(&running["expiry"]["at"]) - started, chrono::TimeDelta::seconds(4), "{running}");
    let checks = running["idleChecks"].as_array().cloned().unwrap_or_default();
    assert_eq!(checks.len(), 2, "cpu, then the terminal: {running}");
    assert_eq!(
        (&checks[0]["check"], &checks[0]["slot"], &checks[0]["threshold"]),
        (&json!("UTILIZATION"), &json!("cpu"), &json!(0.5))
    );
    assert_eq!((&checks[1]["check"], &checks[1]["slot"]), (&json!("TERMINAL"), &Value::Null));
    assert!(checks.iter().all(|c| c["remainingSeconds"].as_i64().is_some_and(|r| (0..=4).contains(&r))), "{running}");

    // bob cannot push it back (it does not exist for him); alice can, once.
    const EXTEND: &str = "mutation($id: ID!) { extendSession(id: $id, seconds: 5) { expiry { at reason } } }";
    let bob = app.gql(Some("demo-bob"), EXTEND, json!({"id": id})).await;
    assert_eq!(error_codes(&bob), ["NOT_FOUND"], "{bob}");
    let extended = app.gql(Some("demo-alice"), EXTEND, json!({"id": id})).await;
    let e = &extended["data"]["extendSession"]["expiry"];
    assert_eq!(e["reason"], "IDLE", "{extended}");
    assert_eq!(time(&e["at"]) - started, chrono::TimeDelta::seconds(9), "five more seconds: {extended}");

    let ended = detail(&app, &id, |s| s["status"] == "TERMINATED").await;
    assert_eq!(ended["statusInfo"], "idle timeout", "{ended}");
    assert!(ended["idleChecks"].as_array().is_some_and(Vec::is_empty), "an ended session has no checks: {ended}");
    let history = phases(&ended);
    assert!(history.iter().any(|p| p == "expiry-warning") && history.iter().any(|p| p == "extend"), "{history:?}");

    // The warning came before the session went TERMINATING.
    let uuid = session_uuid(&id);
    let mut seen = Vec::new();
    while let Ok(Ok(e)) = tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
        if e.session.id.to_string() == uuid {
            seen.push((e.kind, e.to));
        }
    }
    let warned = seen.iter().position(|(k, _)| *k == EventKind::ExpiryWarning);
    let terminating = seen.iter().position(|(_, to)| *to == SessionStatus::Terminating);
    assert!(warned.is_some() && warned < terminating, "{seen:?}");
}

/// Input into the terminal is activity: a session typed into for twice its timeout stays,
/// and is reclaimed once the typing stops.
async fn terminal_input_postpones_the_idle_timeout(mut app: TestApp) {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    policy(&app, 4, 0.5, true).await;
    let addr = app.serve().await;
    let id = launch(&app, "demo-alice", interactive("typed")).await;
    detail(&app, &id, |s| s["status"] == "RUNNING").await;
    let url = terminal_url(&app, &id).await;
    let mut ws = terminal(addr, &url, "demo-alice").await.expect("alice opens her terminal");
    let typing = Instant::now();
    while typing.elapsed() < Duration::from_secs(9) {
        ws.send(Message::Binary(b"true\n".to_vec().into())).await.expect("send");
        let s = detail(&app, &id, |_| true).await;
        assert_eq!(s["status"], "RUNNING", "typing keeps it: {s}");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let s = detail(&app, &id, |_| true).await;
    let check = s["idleChecks"].as_array().and_then(|c| c.iter().find(|c| c["check"] == "TERMINAL")).cloned();
    assert!(check.is_some_and(|c| c["measured"].as_f64().is_some_and(|m| m < 3.0)), "input seconds ago: {s}");
    drop(ws);
    let ended = detail(&app, &id, |s| s["status"] == "TERMINATED").await;
    assert_eq!(ended["statusInfo"], "idle timeout", "{ended}");
}

/// One busy session at a time: the two databases' cases would share the cores.
static BUSY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A session that keeps a core busy is active: it outlives its idle timeout several times.
async fn a_busy_session_is_never_idle(mut app: TestApp) {
    let _alone = BUSY.lock().await;
    let machine = Machine::new();
    let images = "[images.\"python:3.12\"]\ncommand = \"exec yes > /dev/null\"\n";
    if !app.start_local_runtime(&machine.path(), 500, Some(images)).await {
        return;
    }
    policy(&app, 6, 0.05, false).await;
    let id = launch(&app, "demo-alice", interactive("busy")).await;
    detail(&app, &id, |s| s["status"] == "RUNNING").await;
    let s = stays_running(&app, &id, 18).await;
    let cpu = s["idleChecks"].as_array().and_then(|c| c.first()).cloned().unwrap_or_default();
    assert_eq!((&cpu["slot"], &cpu["active"]), (&json!("cpu"), &json!(true)), "{s}");
    assert!(cpu["measured"].as_f64().is_some_and(|m| m >= 0.05), "{s}");
}

/// An administrator's exemption: the idle session stays; its owner may not exempt it, and
/// bob does not see it. Put back under the checks, it is reclaimed.
async fn an_exempted_session_is_never_idle(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    policy(&app, 3, 0.5, false).await;
    let id = launch(&app, "demo-alice", interactive("exempt")).await;
    const EXEMPT: &str =
        "mutation($id: ID!, $e: Boolean!) { exemptFromIdle(id: $id, exempt: $e) { exemptIdle expiry { reason } } }";
    let bob = app.gql(Some("demo-bob"), EXEMPT, json!({"id": id, "e": true})).await;
    assert_eq!(error_codes(&bob), ["NOT_FOUND"], "{bob}");
    let alice = app.gql(Some("demo-alice"), EXEMPT, json!({"id": id, "e": true})).await;
    assert_eq!(error_codes(&alice), ["FORBIDDEN"], "{alice}");
    let admin = app.gql(Some("demo-admin"), EXEMPT, json!({"id": id, "e": true})).await;
    assert_eq!(admin["data"]["exemptFromIdle"]["exemptIdle"], true, "{admin}");
    detail(&app, &id, |s| s["status"] == "RUNNING").await;
    let s = stays_running(&app, &id, 9).await;
    assert_eq!((&s["expiry"], &s["idleChecks"]), (&Value::Null, &json!([])), "no expiry, no checks: {s}");
    assert!(phases(&s).iter().any(|p| p == "idle-exemption"), "{s}");

    let back = app.gql(Some("demo-admin"), EXEMPT, json!({"id": id, "e": false})).await;
    assert_eq!(back["data"]["exemptFromIdle"]["expiry"]["reason"], "IDLE", "{back}");
    let ended = detail(&app, &id, |s| s["status"] == "TERMINATED").await;
    assert_eq!(ended["statusInfo"], "idle timeout", "{ended}");
}

db_tests!(
    an_idle_session_is_warned_of_then_reclaimed,
    terminal_input_postpones_the_idle_timeout,
    a_busy_session_is_never_idle,
    an_exempted_session_is_never_idle,
);
