//! A bounded load test with attackers among the clients. A release server (its own process,
//! `--runtime auto`: this machine's sandbox where it starts) on a demo database with 20 000
//! generated sessions and 200 watchers declared with `sessiond apply`, serves the same load
//! twice, 60 s each, 60 s apart:
//!
//! - 100 honest clients in a closed loop, as the three demo members of project `default`: a
//!   list page with its counts (7 in 10), a launch (3 in 20) and the termination of their
//!   last launched session (3 in 20);
//! - 200 honest subscribers to the project's status changes, one per watcher (each an
//!   administrator of the domain, with a token of their own);
//! - a probe of `/healthz` every 100 ms.
//!
//! The first time alone; the second time beside the attackers:
//! - the fragment fan-out (2^28 fields once expanded) and 2 000 aliased `checkLaunch`
//!   fields in one request, repeated (bob);
//! - **replay**: carol, on 5 connections, 100 × `sessionEvents(after: "0")` each, read as
//!   fast as they come, and subscribed again whenever one ends or is refused;
//! - **fan-out**: alice, 40 connections × 100 `sessionEvents { session { owner project } }`,
//!   and 5 launches a second;
//! - **log subscribers**: bob, 10 connections × 100 `sessionLogs` of one running session;
//! - **abandoned terminals**: bob opens terminals of his running interactive session on
//!   this machine, starts `sleep 1000 &` in each and drops the connection, over and over
//!   (only where a sandbox starts).
//!
//! Reports, per database, the honest clients' throughput, p50/p99 and errors in each phase
//! and the ratio of the p99s (target ≤ 2), what the attackers were granted and refused, the
//! events the honest subscribers got, and the server's memory (`RssAnon`), threads and open
//! descriptors before the attack, at its peak and 60 s after it.
//! `cargo bench --bench hardening [-- --runs N] [--backend sqlite|postgres]`; figures are
//! medians over the runs.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, over_runs, runs, stamp, status_kib};

const LOAD: Duration = Duration::from_secs(60);
const AFTER: Duration = Duration::from_secs(60);
const CLIENTS: usize = 100;
const WATCHERS: usize = 200;
/// The members of project `default` (root is in no project: its MINE list is refused).
const TOKENS: [&str; 3] = ["demo-alice", "demo-bob", "demo-admin"];

const PAGE: &str = "query($p: ID!) {
  sessions(projectId: $p, first: 50) { edges { node { id name status type elapsedSeconds
    owner { email } requestedSlots { cpu memory } } } pageInfo { hasNextPage endCursor } }
  sessionCounts(projectId: $p) { running finished all } }";
const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const TERMINATE: &str = "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }";

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn stamp_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

fn project(name: &str) -> String {
    encode(NodeKind::Project, demo_project_id(name)).0
}

fn launch_input(name: &str, group: Option<&str>, kind: &str) -> Value {
    let mut input = json!({"projectId": project("default/default"), "name": name, "image": "python:3.12", "type": kind,
        "resources": [{"slot": "cpu", "amount": 0.5}, {"slot": "mem", "amount": 1_i64 << 30}]});
    if let Some(g) = group {
        input["resourceGroup"] = json!(g);
    }
    input
}

#[derive(Default)]
struct Tally {
    latencies_us: std::sync::Mutex<Vec<u64>>,
    errors: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
    /// Errors by code (`HTTP` for a transport failure).
    codes: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Tally {
    fn record(&self, took: Duration, error: Option<(String, String)>) {
        self.latencies_us.lock().expect("lock").push(took.as_micros() as u64);
        if let Some((code, e)) = error {
            self.errors.fetch_add(1, Ordering::Relaxed);
            *self.codes.lock().expect("lock").entry(code).or_default() += 1;
            self.first_error.lock().expect("lock").get_or_insert(e);
        }
    }
}

/// What the attackers got: messages or connections granted, and refusals.
#[derive(Default)]
struct Attacks {
    /// Fragment and alias requests answered, and of those refused with LIMIT_EXCEEDED.
    budget: Counter,
    /// Events replayed to carol, and her subscriptions refused.
    replay: Counter,
    /// Events delivered to alice's fan-out, and her subscriptions or connections refused.
    fanout: Counter,
    /// Log lines delivered to bob's followers, and his subscriptions refused.
    logs: Counter,
    /// Terminals opened and dropped by bob, and terminals refused.
    terminals: Counter,
}

/// Granted and refused, of one kind of attack.
type Counter = (AtomicU64, AtomicU64);
/// Which counter of [`Attacks`] an attacker adds to.
type Pick = fn(&Attacks) -> &Counter;

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

async fn post(http: &reqwest::Client, base: &str, token: &str, query: &str, variables: Value) -> Result<Value, String> {
    let resp = http
        .post(format!("http://{base}/graphql"))
        .bearer_auth(token)
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| format!("{status}: {e}"))?;
    Ok(body)
}

async fn honest(base: String, n: usize, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let http = reqwest::Client::new();
    let token = TOKENS[n % TOKENS.len()];
    let p = project("default/default");
    let mut launched: Vec<String> = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let roll = (i * 7 + n as u64 * 13) % 20;
        let (query, vars) = if roll < 14 || (roll >= 17 && launched.is_empty()) {
            (PAGE, json!({"p": p}))
        } else if roll < 17 {
            // Unique over phases and runs: a name is refused while its session is alive.
            (LAUNCH, json!({"i": launch_input(&format!("load-{}-{n}-{i}", stamp_ms()), None, "INTERACTIVE")}))
        } else {
            let id = launched.pop().expect("a launched session");
            (TERMINATE, json!({"ids": [id]}))
        };
        let started = Instant::now();
        let answer = post(&http, &base, token, query, vars).await;
        let took = started.elapsed();
        let error = match &answer {
            Err(e) => Some(("HTTP".to_owned(), e.clone())),
            Ok(v) if v.get("errors").is_some() => {
                Some((v["errors"][0]["extensions"]["code"].as_str().unwrap_or("?").to_owned(), v["errors"].to_string()))
            }
            Ok(v) => {
                if let Some(id) = v["data"]["launchSession"]["session"]["id"].as_str() {
                    launched.push(id.to_owned());
                }
                None
            }
        };
        tally.record(took, error);
    }
}

fn fan_out() -> String {
    let mut q = String::from("{ viewer { user { ...F28 } } } fragment F0 on User { email } ");
    for i in 1..=28 {
        q.push_str(&format!("fragment F{i} on User {{ ...F{} ...F{} }} ", i - 1, i - 1));
    }
    q
}

fn aliases() -> String {
    let checks: String = (0..2000).map(|i| format!("c{i}: checkLaunch(input: $i) {{ valid }} ")).collect();
    format!("query($i: LaunchSessionInput!) {{ {checks} }}")
}

/// Sends the budget-breaking requests in turn.
async fn budget_attacker(base: String, stop: Arc<AtomicBool>, attacks: Arc<Attacks>) {
    let http = reqwest::Client::new();
    let input = json!({"i": launch_input("attack", None, "INTERACTIVE")});
    let (fan, many) = (fan_out(), aliases());
    while !stop.load(Ordering::Relaxed) {
        for (query, vars) in [(&fan, json!({})), (&many, input.clone())] {
            if let Ok(v) = post(&http, &base, "demo-bob", query, vars).await {
                add(&attacks.budget.0);
                if v["errors"][0]["extensions"]["code"] == "LIMIT_EXCEEDED" {
                    add(&attacks.budget.1);
                }
            }
        }
    }
}

/// A graphql-transport-ws connection authenticated as `token`, or `None` when refused.
async fn open(base: &str, token: &str) -> Option<Socket> {
    let mut request = format!("ws://{base}/graphql/ws").into_client_request().expect("request");
    request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static("graphql-transport-ws"));
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4 << 10);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await.ok()?;
    let init = json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {token}")}});
    ws.send(Message::Text(init.to_string().into())).await.ok()?;
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
        Ok(Some(Ok(Message::Text(t)))) if t.as_str().contains("connection_ack") => Some(ws),
        _ => None,
    }
}

async fn subscribe(ws: &mut Socket, id: &str, query: &str, variables: Value) {
    let m = json!({"type": "subscribe", "id": id, "payload": {"query": query, "variables": variables}});
    let _ = ws.send(Message::Text(m.to_string().into())).await;
}

/// One connection of subscriptions `query` (ids 0..n), read as fast as messages come; an
/// operation that ends (refused, lagged, complete) is subscribed again after `again`.
/// Counts `next` messages and refusals.
#[allow(clippy::too_many_arguments)]
async fn subscriber_flood(
    base: String,
    token: &'static str,
    n: usize,
    query: &'static str,
    variables: Value,
    again: Option<Duration>,
    stop: Arc<AtomicBool>,
    counters: (Arc<Attacks>, Pick),
) {
    let (attacks, pick) = counters;
    let Some(mut ws) = open(&base, token).await else {
        add(&pick(&attacks).1);
        return;
    };
    for i in 0..n {
        subscribe(&mut ws, &i.to_string(), query, variables.clone()).await;
    }
    let mut retry: Vec<(Instant, String)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = retry.into_iter().partition(|(at, _)| *at <= now);
        retry = later;
        for (_, id) in due {
            subscribe(&mut ws, &id, query, variables.clone()).await;
        }
        match tokio::time::timeout(Duration::from_millis(200), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                let m: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                match m["type"].as_str() {
                    Some("next") => add(&pick(&attacks).0),
                    Some("error" | "complete") => {
                        if m["type"] == "error" {
                            add(&pick(&attacks).1);
                        }
                        if let (Some(after), Some(id)) = (again, m["id"].as_str()) {
                            retry.push((Instant::now() + after, id.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(Some(Err(_)) | None) => return,
        }
    }
}

/// Alice launches 5 sessions a second (and ends them a little later).
async fn launcher(base: String, stop: Arc<AtomicBool>) {
    let http = reqwest::Client::new();
    let mut launched = std::collections::VecDeque::new();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let vars = json!({"i": launch_input(&format!("flood-{}-{i}", stamp_ms()), None, "INTERACTIVE")});
        if let Ok(v) = post(&http, &base, "demo-alice", LAUNCH, vars).await
            && let Some(id) = v["data"]["launchSession"]["session"]["id"].as_str()
        {
            launched.push_back(id.to_owned());
        }
        if launched.len() > 10
            && let Some(id) = launched.pop_front()
        {
            let _ = post(&http, &base, "demo-alice", TERMINATE, json!({"ids": [id]})).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Bob opens terminals of session `id`, starts a background job in each and drops it.
async fn terminal_attacker(base: String, id: String, stop: Arc<AtomicBool>, attacks: Arc<Attacks>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut ws, _)) = tokio_tungstenite::connect_async(format!("ws://{base}/sessions/{id}/terminal")).await
        else {
            add(&attacks.terminals.1);
            continue;
        };
        let init = json!({"type": "connection_init", "payload": {"authorization": "Bearer demo-bob"}});
        let _ = ws.send(Message::Text(init.to_string().into())).await;
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.as_str().contains("connection_ack") => {
                let _ = ws.send(Message::Binary(b"sleep 1000 &\n".to_vec().into())).await;
                add(&attacks.terminals.0);
            }
            _ => {
                add(&attacks.terminals.1);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        drop(ws); // no close frame: the connection just goes
    }
}

/// A watcher: one connection, the project's status changes, counted. As the page does, it
/// resumes after the last cursor it got when its subscription ends (fallen behind:
/// `LAGGED`), and counts that.
async fn watcher(base: String, n: usize, stop: Arc<AtomicBool>, events: Arc<AtomicU64>, resumed: Arc<AtomicU64>) {
    let token: &'static str = Box::leak(format!("watch-{n}").into_boxed_str());
    let Some(mut ws) = open(&base, token).await else { return };
    let q = "subscription($p: ID!, $after: String) { sessionEvents(projectId: $p, scope: PROJECT, after: $after) { cursor toStatus } }";
    let p = project("default/default");
    subscribe(&mut ws, "s", q, json!({"p": p})).await;
    let mut last: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(500), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                let m: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                match m["type"].as_str() {
                    Some("next") => {
                        events.fetch_add(1, Ordering::Relaxed);
                        last = m["payload"]["data"]["sessionEvents"]["cursor"].as_str().map(str::to_owned);
                    }
                    Some("error" | "complete") => {
                        resumed.fetch_add(1, Ordering::Relaxed);
                        let after =
                            m["payload"][0]["extensions"]["cursor"].as_str().map(str::to_owned).or(last.clone());
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        subscribe(&mut ws, "s", q, json!({"p": p, "after": after})).await;
                    }
                    _ => {}
                }
            }
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(Some(Err(_)) | None) => return,
        }
    }
}

/// What one phase of load measured.
#[derive(Default)]
struct Phase {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
    first_error: Option<String>,
    codes: std::collections::BTreeMap<String, u64>,
    health_p99_ms: f64,
    events: u64,
    /// Times the watchers resumed after falling behind.
    resumed: u64,
    /// RssAnon MiB, threads and open descriptors: before, at the peak, 60 s after.
    anon: [f64; 3],
    threads: [f64; 3],
    fds: [f64; 3],
}

struct Figures {
    quiet: Phase,
    attacked: Phase,
    attacks: [(u64, u64); 5],
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// The watchers, as declared in a file for `sessiond apply`: the demo, plus 200 domain
/// administrators, members of `default`, each with a token of their own.
fn watchers_declaration() -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut text = sessiond::domain::directory::apply::DEMO.to_owned();
    for n in 0..WATCHERS {
        text.push_str(&format!(
            "\n[users.\"watcher-{n}@example.com\"]\ndomain = \"default\"\nrole = \"ADMIN\"\nprojects = [\"default\"]\n\
             keypairs = [{{ access_key = \"AKWATCH{n}\", policy = \"default\", secret = \"watch-{n}\" }}]\n"
        ));
    }
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().expect("a file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

async fn run_once(backend: &str) -> Figures {
    let declaration = watchers_declaration();
    let path = declaration.path().to_str().expect("utf8").to_owned();
    let runtime = tempfile::tempdir().expect("runtime directory");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    let runtime_dir = runtime.path().join("runtime").display().to_string();
    let flags =
        ["--runtime", "auto", "--runtime-dir", &runtime_dir, "--max-ws-connections", "5000", "--sim-step-ms", "20"];
    let server =
        Server::start_with(backend, &[&["generate", "--sessions", "20000"], &["apply", "-f", &path]], &flags).await;
    // Room for every client's launches: the demo keypair policy allows 20 pending sessions.
    {
        use sea_orm::ConnectionTrait;
        let db = sea_orm::Database::connect(server.url.as_str()).await.expect("connect");
        db.execute_unprepared(
            "UPDATE keypair_resource_policies SET max_pending_sessions = 100000, max_concurrent_sessions = 100000, total_resource_slots = '{}'",
        )
        .await
        .expect("raise the policy");
        db.close().await.expect("close");
    }
    // Bob's targets run before any load: an idle session of the simulated agents (its log
    // is what his followers follow) and one on this machine (its terminal).
    let targets = Targets {
        logs: running_session(&server.base, "default").await,
        terminal: running_session(&server.base, "local").await,
    };
    let quiet = load_phase(&server, None).await;
    let attacks = Arc::new(Attacks::default());
    let attacked = load_phase(&server, Some((attacks.clone(), &targets))).await;
    let pair = |p: &Counter| (p.0.load(Ordering::Relaxed), p.1.load(Ordering::Relaxed));
    Figures {
        quiet,
        attacked,
        attacks: [
            pair(&attacks.budget),
            pair(&attacks.replay),
            pair(&attacks.fanout),
            pair(&attacks.logs),
            pair(&attacks.terminals),
        ],
    }
}

/// Bob's running interactive session in `group` (launched and waited for), or `None`.
async fn running_session(base: &str, group: &str) -> Option<String> {
    let http = reqwest::Client::new();
    let input = launch_input(&format!("target-{group}-{}", stamp_ms()), Some(group), "INTERACTIVE");
    let v = post(&http, base, "demo-bob", LAUNCH, json!({"i": input})).await.ok()?;
    let id = v["data"]["launchSession"]["session"]["id"].as_str()?.to_owned();
    for _ in 0..600 {
        let s = post(&http, base, "demo-bob", "query($id: ID!) { session(id: $id) { status } }", json!({"id": id}))
            .await
            .ok()?;
        match s["data"]["session"]["status"].as_str() {
            Some("RUNNING") => return Some(id),
            Some("ERROR" | "CANCELLED" | "TERMINATED") => return None,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    None
}

/// Bob's running sessions the attacks aim at (`None` where it could not run).
struct Targets {
    logs: Option<String>,
    terminal: Option<String>,
}

async fn load_phase(server: &Server, attackers: Option<(Arc<Attacks>, &Targets)>) -> Phase {
    let pid = server.pid();
    let anon = || status_kib(pid, "RssAnon") as f64 / 1024.0;
    let threads = || status_kib(pid, "Threads") as f64; // a count, not KiB: read the same way
    let start = [anon(), threads(), open_fds(pid) as f64];
    let stop = Arc::new(AtomicBool::new(false));
    let peaks = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let sampler = {
        let (stop, peaks) = (stop.clone(), peaks.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peaks[0].fetch_max(status_kib(pid, "RssAnon"), Ordering::Relaxed);
                peaks[1].fetch_max(status_kib(pid, "Threads"), Ordering::Relaxed);
                peaks[2].fetch_max(open_fds(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut tasks = Vec::new();
    if let Some((attacks, targets)) = &attackers {
        let base = server.base.clone();
        tasks.push(tokio::spawn(budget_attacker(base.clone(), stop.clone(), attacks.clone())));
        let events = "subscription($p: ID!, $after: String) { sessionEvents(projectId: $p, after: $after) { cursor toStatus session { id name status } } }";
        for _ in 0..5 {
            let counters = (attacks.clone(), (|a: &Attacks| &a.replay) as Pick);
            let vars = json!({"p": project("other/other"), "after": "0"});
            let again = Some(Duration::from_millis(100));
            tasks.push(tokio::spawn(subscriber_flood(
                base.clone(),
                "demo-carol",
                100,
                events,
                vars,
                again,
                stop.clone(),
                counters,
            )));
        }
        let fanout = "subscription($p: ID!) { sessionEvents(projectId: $p) { cursor session { id name owner { email } project { name } } } }";
        for _ in 0..40 {
            let counters = (attacks.clone(), (|a: &Attacks| &a.fanout) as Pick);
            let vars = json!({"p": project("default/default")});
            tasks.push(tokio::spawn(subscriber_flood(
                base.clone(),
                "demo-alice",
                100,
                fanout,
                vars,
                None,
                stop.clone(),
                counters,
            )));
        }
        tasks.push(tokio::spawn(launcher(base.clone(), stop.clone())));
        if let Some(id) = &targets.logs {
            let logs = "subscription($id: ID!) { sessionLogs(sessionId: $id, tail: 10) }";
            for _ in 0..10 {
                let counters = (attacks.clone(), (|a: &Attacks| &a.logs) as Pick);
                let vars = json!({"id": id});
                tasks.push(tokio::spawn(subscriber_flood(
                    base.clone(),
                    "demo-bob",
                    100,
                    logs,
                    vars,
                    None,
                    stop.clone(),
                    counters,
                )));
            }
        }
        match &targets.terminal {
            Some(id) => {
                tasks.push(tokio::spawn(terminal_attacker(base.clone(), id.clone(), stop.clone(), attacks.clone())))
            }
            None => eprintln!("no sandbox here: the terminal attack does not run"),
        }
    }
    let (events, resumed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|n| tokio::spawn(watcher(server.base.clone(), n, stop.clone(), events.clone(), resumed.clone())))
        .collect();
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let clients: Vec<_> =
        (0..CLIENTS).map(|n| tokio::spawn(honest(server.base.clone(), n, stop.clone(), tally.clone()))).collect();
    let health = {
        let (stop, base) = (stop.clone(), server.base.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                if http.get(format!("http://{base}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
                    took.push(t.elapsed().as_micros() as u64);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            took
        })
    };
    tokio::time::sleep(LOAD).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.await;
    }
    let elapsed = started.elapsed();
    let mut health = health.await.expect("health");
    for t in watchers.into_iter().chain(tasks) {
        let _ = t.await;
    }
    let _ = sampler.await;
    tokio::time::sleep(AFTER).await;
    let end = [anon(), threads(), open_fds(pid) as f64];
    let mut latencies = std::mem::take(&mut *tally.latencies_us.lock().expect("lock"));
    latencies.sort_unstable();
    health.sort_unstable();
    let peak = |i: usize| peaks[i].load(Ordering::Relaxed) as f64;
    Phase {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        errors: tally.errors.load(Ordering::Relaxed),
        first_error: tally.first_error.lock().expect("lock").clone(),
        codes: tally.codes.lock().expect("lock").clone(),
        health_p99_ms: percentile(&health, 0.99),
        events: events.load(Ordering::Relaxed),
        resumed: resumed.load(Ordering::Relaxed),
        anon: [start[0], peak(0) / 1024.0, end[0]],
        threads: [start[1], peak(1), end[1]],
        fds: [start[2], peak(2), end[2]],
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let backends: Vec<&str> = match args.iter().position(|a| a == "--backend").and_then(|i| args.get(i + 1)) {
        Some(b) => vec![b.as_str()],
        None => vec!["sqlite", "postgres"],
    };
    stamp("cargo bench --bench hardening");
    println!(
        "| database | load | honest req/s | p50 ms | p99 ms | errors | /healthz p99 ms | events to watchers (resumed) | RssAnon MiB before / peak / +60 s | threads | open descriptors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut granted = Vec::new();
    for backend in backends {
        let mut all = Vec::new();
        for _ in 0..runs() {
            let f = run_once(backend).await;
            for (phase, p) in [("quiet", &f.quiet), ("attacked", &f.attacked)] {
                if let Some(e) = &p.first_error {
                    eprintln!("{backend} {phase}: honest errors by code {:?}; the first: {e}", p.codes);
                }
            }
            all.push(f);
        }
        for (name, pick) in
            [("alone", (|f: &Figures| &f.quiet) as fn(&Figures) -> &Phase), ("with the attackers", |f| &f.attacked)]
        {
            let phases: Vec<&Phase> = all.iter().map(pick).collect();
            let med = |get: &dyn Fn(&Phase) -> f64, d: usize| {
                over_runs(&phases.iter().map(|p| get(p)).collect::<Vec<_>>(), d)
            };
            let triple = |get: &dyn Fn(&Phase) -> [f64; 3]| {
                let m = |i: usize| med(&|p| get(p)[i], 0).0;
                format!("{:.0} / {:.0} / {:.0}", m(0), m(1), m(2))
            };
            let errors: u64 = phases.iter().map(|p| p.errors).sum();
            println!(
                "| {backend} | {name} | {:.0} ({}) | {:.1} | {:.1} ({}) | {errors} | {:.1} | {:.0} ({:.0}) | {} | {} | {} |",
                med(&|p| p.per_second, 0).0,
                med(&|p| p.per_second, 0).1,
                med(&|p| p.p50_ms, 1).0,
                med(&|p| p.p99_ms, 1).0,
                med(&|p| p.p99_ms, 1).1,
                med(&|p| p.health_p99_ms, 1).0,
                med(&|p| p.events as f64, 0).0,
                med(&|p| p.resumed as f64, 0).0,
                triple(&|p| p.anon),
                triple(&|p| p.threads),
                triple(&|p| p.fds),
            );
        }
        let ratio =
            over_runs(&all.iter().map(|f| f.attacked.p99_ms / f.quiet.p99_ms.max(0.001)).collect::<Vec<_>>(), 2);
        let sum = |i: usize| all.iter().fold((0, 0), |a, f| (a.0 + f.attacks[i].0, a.1 + f.attacks[i].1));
        granted.push((backend, ratio, [sum(0), sum(1), sum(2), sum(3), sum(4)]));
    }
    println!();
    println!(
        "| database | honest p99 attacked ÷ alone | budget requests (LIMIT_EXCEEDED) | replayed events to carol (refused) | fan-out events to alice (refused) | log lines to bob's followers (refused) | terminals dropped by bob (refused) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (backend, ratio, a) in granted {
        println!(
            "| {backend} | {:.2} ({}) | {} ({}) | {} ({}) | {} ({}) | {} ({}) | {} ({}) |",
            ratio.0, ratio.1, a[0].0, a[0].1, a[1].0, a[1].1, a[2].0, a[2].1, a[3].0, a[3].1, a[4].0, a[4].1
        );
    }
}
