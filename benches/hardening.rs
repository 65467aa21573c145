//! A bounded load test with an attacker among the clients. A release server (its own
//! process) on a demo database with 20 000 generated sessions serves, for 60 s:
//! - 100 honest clients in a closed loop, as the three demo members of project `default`: a list
//!   page with its counts (7 in 10), a launch (3 in 20) and the termination of their last
//!   launched session (3 in 20);
//! - 200 WebSocket subscribers to the project's status changes;
//! - one attacker repeating the fragment fan-out (2^28 fields once expanded) and 2 000
//!   aliased `checkLaunch` fields in one request.
//!
//! Reports the honest clients' throughput, p50/p99 latency and error count (must be 0), the
//! attacker's answers (all `LIMIT_EXCEEDED`), `/healthz` p99 during the load, the events
//! the subscribers got, and the server's memory (`VmRSS`, `RssAnon`) at the start, at its
//! peak, and 60 s after the end. `cargo bench --bench hardening [-- --runs N] [--backend
//! sqlite|postgres]`; figures are medians over the runs.

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

use sessiond::domain::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, over_runs, runs, stamp, status_kib};

const LOAD: Duration = Duration::from_secs(60);
const AFTER: Duration = Duration::from_secs(60);
const CLIENTS: usize = 100;
const SUBSCRIBERS: usize = 200;
/// The members of project `default` (root is in no project: its MINE list is refused).
const TOKENS: [&str; 3] = ["demo-alice", "demo-bob", "demo-admin"];

const PAGE: &str = "query($p: ID!) {
  sessions(projectId: $p, first: 50) { edges { node { id name status type elapsedSeconds
    owner { email } requestedSlots { cpu memory } } } pageInfo { hasNextPage endCursor } }
  sessionCounts(projectId: $p) { running finished all } }";
const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const TERMINATE: &str = "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }";

fn stamp_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

fn project() -> String {
    encode(NodeKind::Project, demo_project_id("default/default")).0
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
    let p = project();
    let mut launched: Vec<String> = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let roll = (i * 7 + n as u64 * 13) % 20;
        let (query, vars) = if roll < 14 || (roll >= 17 && launched.is_empty()) {
            (PAGE, json!({"p": p}))
        } else if roll < 17 {
            // Unique over phases and runs: a name is refused while its session is alive.
            let name = format!("load-{}-{n}-{i}", stamp_ms());
            let input = json!({"projectId": p, "name": name, "image": "python:3.12",
                "resources": [{"slot": "cpu", "amount": 0.5}, {"slot": "mem", "amount": 1_i64 << 30}]});
            (LAUNCH, json!({"i": input}))
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

/// Sends the budget-breaking requests in turn; returns (answers, of which LIMIT_EXCEEDED).
async fn attacker(base: String, stop: Arc<AtomicBool>) -> (u64, u64) {
    let http = reqwest::Client::new();
    let input = json!({"i": {"projectId": project(), "name": "attack", "image": "python:3.12",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 1_i64 << 30}]}});
    let (fan, many) = (fan_out(), aliases());
    let (mut answers, mut refused) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        for (query, vars) in [(&fan, json!({})), (&many, input.clone())] {
            if let Ok(v) = post(&http, &base, "demo-bob", query, vars).await {
                answers += 1;
                if v["errors"][0]["extensions"]["code"] == "LIMIT_EXCEEDED" {
                    refused += 1;
                }
            }
        }
    }
    (answers, refused)
}

async fn subscriber(base: String, stop: Arc<AtomicBool>, events: Arc<AtomicU64>) {
    let mut request = format!("ws://{base}/graphql/ws").into_client_request().expect("request");
    request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static("graphql-transport-ws"));
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4 << 10);
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await else {
        return;
    };
    let init = json!({"type": "connection_init", "payload": {"authorization": "Bearer demo-admin"}});
    let sub = json!({"type": "subscribe", "id": "s", "payload": {
        "query": "subscription($p: ID!) { sessionEvents(projectId: $p, scope: PROJECT) { cursor toStatus } }",
        "variables": {"p": project()}}});
    let _ = ws.send(Message::Text(init.to_string().into())).await;
    let _ = ws.send(Message::Text(sub.to_string().into())).await;
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(500), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.as_str().contains("\"next\"") => {
                events.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(Some(Err(_)) | None) => return,
        }
    }
}

struct Figures {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
    first_error: Option<String>,
    codes: std::collections::BTreeMap<String, u64>,
    attacks: (u64, u64),
    health_p99_ms: f64,
    events: u64,
    /// (start, peak, 60 s after the end) of VmRSS and of RssAnon, MiB.
    rss: [f64; 3],
    anon: [f64; 3],
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

async fn run_once(backend: &str) -> Figures {
    let server = Server::start(backend, &[&["generate", "--sessions", "20000"]]).await;
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
    // With `--phases N`, the same server takes the load N times: memory that returns to
    // the same level after each phase is bounded caching, memory that climbs is a leak.
    let mut last = None;
    for phase in 1..=phases() {
        let f = load_phase(&server).await;
        // What is still open 60 s after the clients left, as the server reports it.
        let metrics = reqwest::get(format!("http://{}/metrics", server.base))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        let open: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("sessiond_connections_open ") || l.starts_with("sessiond_websockets_open "))
            .collect();
        println!(
            "<!-- {backend}, phase {phase}: VmRSS {:.0} / {:.0} / {:.0} MiB, RssAnon {:.0} / {:.0} / {:.0} MiB (start / peak / +60 s); {} -->",
            f.rss[0],
            f.rss[1],
            f.rss[2],
            f.anon[0],
            f.anon[1],
            f.anon[2],
            open.join(", ")
        );
        last = Some(f);
    }
    last.expect("at least one phase")
}

fn phases() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == "--phases").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(1).max(1)
}

async fn load_phase(server: &Server) -> Figures {
    let pid = server.pid();
    let kib = |f| status_kib(pid, f) as f64 / 1024.0;
    let (rss0, anon0) = (kib("VmRSS"), kib("RssAnon"));
    let stop = Arc::new(AtomicBool::new(false));
    let peaks = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let sampler = {
        let (stop, peaks) = (stop.clone(), peaks.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peaks[0].fetch_max(status_kib(pid, "VmRSS"), Ordering::Relaxed);
                peaks[1].fetch_max(status_kib(pid, "RssAnon"), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let events = Arc::new(AtomicU64::new(0));
    let subscribers: Vec<_> =
        (0..SUBSCRIBERS).map(|_| tokio::spawn(subscriber(server.base.clone(), stop.clone(), events.clone()))).collect();
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let clients: Vec<_> =
        (0..CLIENTS).map(|n| tokio::spawn(honest(server.base.clone(), n, stop.clone(), tally.clone()))).collect();
    let attack = tokio::spawn(attacker(server.base.clone(), stop.clone()));
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
    let attacks = attack.await.expect("attacker");
    let mut health = health.await.expect("health");
    for s in subscribers {
        let _ = s.await;
    }
    let _ = sampler.await;
    tokio::time::sleep(AFTER).await;
    let (rss1, anon1) = (kib("VmRSS"), kib("RssAnon"));
    let mut latencies = std::mem::take(&mut *tally.latencies_us.lock().expect("lock"));
    latencies.sort_unstable();
    health.sort_unstable();
    Figures {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        errors: tally.errors.load(Ordering::Relaxed),
        first_error: tally.first_error.lock().expect("lock").clone(),
        codes: tally.codes.lock().expect("lock").clone(),
        attacks,
        health_p99_ms: percentile(&health, 0.99),
        events: events.load(Ordering::Relaxed),
        rss: [rss0, peaks[0].load(Ordering::Relaxed) as f64 / 1024.0, rss1],
        anon: [anon0, peaks[1].load(Ordering::Relaxed) as f64 / 1024.0, anon1],
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
        "| database | honest req/s | p50 ms | p99 ms | errors | attacker answers (LIMIT_EXCEEDED) | /healthz p99 ms | events received | VmRSS MiB start / peak / +60 s | RssAnon MiB start / peak / +60 s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for backend in backends {
        let mut all = Vec::new();
        for _ in 0..runs() {
            let f = run_once(backend).await;
            if let Some(e) = &f.first_error {
                eprintln!("{backend}: honest errors by code {:?}; the first: {e}", f.codes);
            }
            all.push(f);
        }
        let med = |get: &dyn Fn(&Figures) -> f64, d: usize| over_runs(&all.iter().map(get).collect::<Vec<_>>(), d).0;
        let errors: u64 = all.iter().map(|f| f.errors).sum();
        let attacks = all.iter().fold((0, 0), |a, f| (a.0 + f.attacks.0, a.1 + f.attacks.1));
        let (rps, rps_runs) = over_runs(&all.iter().map(|f| f.per_second).collect::<Vec<_>>(), 0);
        println!(
            "| {backend} | {rps:.0} ({rps_runs}) | {:.1} | {:.1} | {errors} | {} ({}) | {:.1} | {:.0} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} |",
            med(&|f| f.p50_ms, 1),
            med(&|f| f.p99_ms, 1),
            attacks.0,
            attacks.1,
            med(&|f| f.health_p99_ms, 1),
            med(&|f| f.events as f64, 0),
            med(&|f| f.rss[0], 0),
            med(&|f| f.rss[1], 0),
            med(&|f| f.rss[2], 0),
            med(&|f| f.anon[0], 0),
            med(&|f| f.anon[1], 0),
            med(&|f| f.anon[2], 0),
        );
    }
}
