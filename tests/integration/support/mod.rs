//! One helper builds a test app on SQLite or PostgreSQL; `db_tests!` runs a test on both.
//!
//! A PostgreSQL case that cannot get a server is skipped, and libtest still reports it as
//! passed: it cannot be told otherwise. So each skip writes a `NOTICE` line straight to the
//! process's standard error, which libtest does not capture (it captures only the
//! `print!`/`eprint!` macros), so the line shows in the output of a plain `cargo test`
//! among the passing tests, with the running count of skips and the reason.
//! `SESSIOND_REQUIRE_POSTGRES=1` turns every skip into a failure instead.

pub mod binary;
pub mod jupyter;
pub mod pg;
pub mod registry;
pub mod required;
pub mod slurm;
pub mod ws;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use http_body_util::BodyExt;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};
use serde_json::{Value, json};
use tower::ServiceExt;

use sessiond::config::{DbArgs, HttpLimits};
use sessiond::http::{AppState, app};
use sessiond::server::open_database;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A migrated, demo-seeded database and the router serving it.
pub struct TestApp {
    pub backend: Backend,
    pub url: String,
    pub db: DatabaseConnection,
    pub router: Router,
    /// Whether opening the database seeded the demo data.
    pub seeded: bool,
    /// SQL statements the app has run (the app's connection counts them).
    pub statements: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The text of each statement run while [`TestApp::statement_texts`] records them.
    texts: std::sync::Arc<std::sync::Mutex<Option<Vec<String>>>>,
    /// The app's reads on the request's thread (SQLite), counted with the statements.
    pub inline: Option<sessiond::domain::store::inline::InlineReads>,
    /// The app's event bus: subscribe to see what it publishes.
    pub bus: sessiond::domain::live::events::EventBus,
    /// The app's live feeds (the bus among them): replays, logs, credentials, shares.
    pub live: sessiond::domain::live::Live,
    pub limits: HttpLimits,
    /// The metrics `/metrics` reports; the workers `start_workers` starts record into them.
    pub metrics: sessiond::http::metrics::Metrics,
    /// The scheduler, runtime and server, when started; stopped when the app is dropped.
    workers: Vec<tokio::task::JoinHandle<()>>,
    /// The apps' listener, once a local runtime runs (`http://` and it is the apps' URL).
    pub apps: Option<std::net::SocketAddr>,
    _dir: Option<std::sync::Arc<tempfile::TempDir>>,
}

/// A fresh, empty database URL for `backend`, or `None` to skip (with a notice) when
/// PostgreSQL cannot be had and is not required.
pub async fn fresh_database(backend: Backend) -> Option<(String, Option<tempfile::TempDir>)> {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("temporary directory");
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("sessiond.db").display());
            Some((url, Some(dir)))
        }
        Backend::Postgres => {
            let server = match pg::server() {
                Ok(s) => s,
                Err(why) => {
                    if std::env::var("SESSIOND_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                        panic!("PostgreSQL is required (SESSIOND_REQUIRE_POSTGRES=1) but unavailable: {why}");
                    }
                    notice_postgres_skip(why);
                    return None;
                }
            };
            let name = format!("t_{}", uuid::Uuid::new_v4().simple());
            let admin = Database::connect(format!("{}/{}", server.base_url, server.admin_db))
                .await
                .expect("connect to the PostgreSQL test server");
            admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create test database");
            admin.close().await.ok();
            Some((format!("{}/{name}", server.base_url), None))
        }
    }
}

/// PostgreSQL cases skipped in this process.
static POSTGRES_SKIPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Says, uncaptured, that a PostgreSQL case passed without running (see the module docs).
fn notice_postgres_skip(why: &str) {
    use std::io::Write;
    let n = POSTGRES_SKIPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    // libtest names the thread of each test after it; the test's future runs on it.
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!(
        "NOTICE: PostgreSQL case `{test}` was SKIPPED and is reported as passed ({n} skipped so far): {}. \
         Set SESSIOND_REQUIRE_POSTGRES=1 to make this a failure.\n",
        why.trim_end().replace('\n', " ")
    );
    // Not `eprintln!`: libtest would capture it and show it only for a failing test.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

impl TestApp {
    /// A new app on an empty database of `backend`, demo data seeded.
    pub async fn start(backend: Backend) -> Option<TestApp> {
        Self::start_with(backend, HttpLimits::default()).await
    }

    /// A new app with these HTTP and WebSocket limits.
    pub async fn start_with(backend: Backend, limits: HttpLimits) -> Option<TestApp> {
        let (url, dir) = fresh_database(backend).await?;
        Some(Self::open(backend, url, dir.map(std::sync::Arc::new), limits).await)
    }

    /// A second replica of this app: its own pool, bus and router on the same database.
    pub async fn replica(&self) -> TestApp {
        Self::open(self.backend, self.url.clone(), self._dir.clone(), self.limits.clone()).await
    }

    /// This app's database served anew with other limits (the old app stops).
    pub async fn reopen_with(self, limits: HttpLimits) -> TestApp {
        Self::open(self.backend, self.url.clone(), self._dir.clone(), limits).await
    }

    /// The cursor of the last status change so far: a subscription given it as `after`
    /// gets every later change, however long it takes to start.
    pub async fn last_cursor(&self) -> String {
        sessiond::domain::live::events::last_sequence(&self.db).await.expect("last sequence").to_string()
    }

    /// Waits until the bus has fanned out every committed status change (at most 10 s):
    /// a receiver subscribed afterwards gets only later ones.
    pub async fn settled(&self) {
        let last = sessiond::domain::live::events::last_sequence(&self.db).await.expect("last sequence");
        for _ in 0..1000 {
            if self.bus.fanned_out() >= last {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the bus did not fan out up to {last}");
    }

    /// Serves the router on a free loopback port until the app is dropped; returns the address.
    pub async fn serve(&mut self) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let router = self.router.clone();
        let limits = sessiond::http::serve::ConnectionLimits::of(&self.limits);
        let gauge = self.metrics.connections();
        self.workers.push(tokio::spawn(async move {
            sessiond::http::serve::serve(listener, router, limits, gauge, std::future::pending()).await;
        }));
        addr
    }

    async fn open(
        backend: Backend,
        url: String,
        dir: Option<std::sync::Arc<tempfile::TempDir>>,
        limits: HttpLimits,
    ) -> TestApp {
        let args = DbArgs { db_max_connections: 4, ..DbArgs::of(url.clone()) };
        Self::open_with(backend, args, dir, limits).await
    }

    /// An app on the database `args` name, with its pool settings.
    pub async fn open_with(
        backend: Backend,
        args: DbArgs,
        dir: Option<std::sync::Arc<tempfile::TempDir>>,
        limits: HttpLimits,
    ) -> TestApp {
        // Server logs go to the test's captured output (shown when it fails).
        let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("warn").try_init();
        let url = args.database_url.clone();
        let (mut db, seeded) = open_database(&args, true).await.expect("open the test database");
        // The live feeds read on their own clone, taken before the counter below is
        // attached: they run when they like, so their statements would blur the counts tests
        // assert. Replays read on a pool of their own, as in the server.
        let replays = sessiond::db::connect_replays(&args, limits.shares.replay_connections, &db)
            .await
            .expect("open the replays' pool");
        let connections =
            sessiond::domain::live::LiveConnections { replays, ..sessiond::domain::live::LiveConnections::shared(&db) };
        let live = sessiond::domain::live::Live::start(connections, limits.live_options())
            .await
            .expect("start the live feeds");
        let bus = live.bus.clone();
        let statements = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = statements.clone();
        // SESSIOND_TEST_SQL=1 prints each statement, numbered: for checking the statement
        // counts the tests assert.
        let print = std::env::var("SESSIOND_TEST_SQL").is_ok_and(|v| v == "1");
        let texts: std::sync::Arc<std::sync::Mutex<Option<Vec<String>>>> = Default::default();
        let recorder = texts.clone();
        let count = move |sql: &str| {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if print {
                println!("SQL {n}: {sql}");
            }
            if let Some(texts) = recorder.lock().expect("statement texts").as_mut() {
                texts.push(sql.to_owned());
            }
        };
        let pooled = count.clone();
        db.set_metric_callback(move |info| pooled(&info.statement.sql));
        let launch = sessiond::domain::launch::LaunchLimits::of(sessiond::config::DEFAULT_MAX_LAUNCH_COUNT);
        let metrics = sessiond::http::metrics::Metrics::default();
        let runtime = sessiond::domain::runtime::RuntimeInfo::simulated("tests drive their own runtime");
        let state = AppState::with_metrics(db.clone(), live.clone(), limits.clone(), launch, metrics.clone(), runtime);
        // Statements read on the request's thread (SQLite) count as those of the pool.
        if let Some(inline) = &state.inline {
            inline.observe(count);
        }
        let inline = state.inline.clone();
        let router = app(state);
        TestApp {
            backend,
            url,
            db,
            router,
            seeded,
            statements,
            texts,
            inline,
            bus,
            live,
            limits,
            metrics,
            workers: Vec::new(),
            apps: None,
            _dir: dir,
        }
    }

    /// Starts the scheduler and the simulated runtime (20 ms steps, 1.5 s batch runs).
    pub fn start_workers(&mut self) {
        let timings = sessiond::config::Timings {
            scheduler_interval_ms: 50,
            sim_step_ms: 20,
            sim_batch_ms: 1500,
            ..Default::default()
        };
        self.workers.extend(sessiond::server::spawn_workers(&self.db, &self.bus, &timings, &self.metrics, None));
    }

    /// Starts the scheduler and the runtimes with this machine as agent `local` (resource
    /// group `local`, open to every project) really running its sessions, kept in `dir`;
    /// `images` is an images file's text. Returns false (after a NOTICE) when no sandbox can
    /// start here, unless `SESSIOND_REQUIRE_SANDBOX=1` (set by `.ci/run`) makes that a
    /// failure. `Query.runtime` then reports the local runtime.
    pub async fn start_local_runtime(&mut self, dir: &std::path::Path, grace_ms: u64, images: Option<&str>) -> bool {
        let limit = sessiond::domain::runtime::local::limits::DEFAULT_WORK_DIR_LIMIT;
        self.start_local_runtime_with(dir, grace_ms, images, limit).await
    }

    /// [`Self::start_local_runtime`], each session's work directory holding at most
    /// `work_dir_limit` bytes.
    pub async fn start_local_runtime_with(
        &mut self,
        dir: &std::path::Path,
        grace_ms: u64,
        images: Option<&str>,
        work_dir_limit: u64,
    ) -> bool {
        let images_file = images.map(|text| {
            let f = dir.with_extension("images.toml");
            std::fs::write(&f, text).expect("write the images file");
            f
        });
        let args = sessiond::config::RuntimeArgs {
            choice: sessiond::config::RuntimeChoice::Local,
            images_file,
            runtime_dir: dir.to_owned(),
            terminate_grace_ms: grace_ms,
            work_dir_limit,
            ..sessiond::config::RuntimeArgs::default()
        };
        let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_sessiond"));
        let (local, info) = match sessiond::server::choose_runtime(&args, &self.db, exe).await {
            Ok(chosen) => chosen,
            Err(why) if std::env::var("SESSIOND_REQUIRE_SANDBOX").is_ok_and(|v| v == "1") => {
                panic!("the local runtime is required (SESSIOND_REQUIRE_SANDBOX=1) but cannot run: {why}")
            }
            Err(why) => {
                use std::io::Write;
                let line = format!("NOTICE: a local-runtime test was SKIPPED and is reported as passed: {why}\n");
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
                return false;
            }
        };
        let launch = sessiond::domain::launch::LaunchLimits::of(sessiond::config::DEFAULT_MAX_LAUNCH_COUNT);
        self.serve_with(launch, info, true);
        let timings = sessiond::config::Timings {
            scheduler_interval_ms: 50,
            sim_step_ms: 20,
            sim_batch_ms: 1500,
            ..Default::default()
        };
        self.workers.extend(sessiond::server::spawn_workers(&self.db, &self.bus, &timings, &self.metrics, local));
        true
    }

    /// Lets launches name the callback URLs `args` allow, and starts the callbacks'
    /// deliverer with `args`.
    pub fn start_callbacks(&mut self, args: &sessiond::config::CallbackArgs) {
        let delivery = args.delivery();
        let launch = sessiond::domain::launch::LaunchLimits {
            callbacks: delivery.allow.clone(),
            ..sessiond::domain::launch::LaunchLimits::of(sessiond::config::DEFAULT_MAX_LAUNCH_COUNT)
        };
        self.serve_with(
            launch,
            sessiond::domain::runtime::RuntimeInfo::simulated("tests drive their own runtime"),
            false,
        );
        let run = sessiond::domain::lifecycle::callbacks::deliver::run(self.db.clone(), self.bus.clone(), delivery);
        self.workers.push(tokio::spawn(run));
    }

    /// Serves the sessions' apps on a listener of their own (`apps`), as the server does,
    /// for sessions of engines other than a local runtime (a Slurm engine's).
    pub fn serve_apps(&mut self) {
        let launch = sessiond::domain::launch::LaunchLimits::of(sessiond::config::DEFAULT_MAX_LAUNCH_COUNT);
        self.serve_with(
            launch,
            sessiond::domain::runtime::RuntimeInfo::simulated("tests drive their own runtime"),
            true,
        );
    }

    /// The router anew, with these launch bounds and this runtime (and the apps' listener
    /// as the server has it, when `apps`).
    fn serve_with(
        &mut self,
        launch: sessiond::domain::launch::LaunchLimits,
        mut runtime: sessiond::domain::runtime::RuntimeInfo,
        apps: bool,
    ) {
        let apps = apps.then(|| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("an apps' port");
            listener.set_nonblocking(true).expect("non-blocking");
            let addr = listener.local_addr().expect("its address");
            runtime.apps_url = Some(format!("http://{addr}"));
            (tokio::net::TcpListener::from_std(listener).expect("a tokio listener"), addr)
        });
        let state = AppState::with_metrics(
            self.db.clone(),
            self.live.clone(),
            self.limits.clone(),
            launch,
            self.metrics.clone(),
            runtime,
        );
        if let Some((listener, addr)) = apps {
            let (router, limits) = (
                sessiond::http::apps::router(state.clone()),
                sessiond::http::serve::ConnectionLimits::of(&self.limits),
            );
            let gauge = self.metrics.connections();
            self.workers.push(tokio::spawn(async move {
                sessiond::http::serve::serve(listener, router, limits, gauge, std::future::pending()).await;
            }));
            self.apps = Some(addr);
        }
        self.router = app(state);
    }

    /// Starts the declared Slurm engines (read every few seconds), stopping jobs with `grace`
    /// between SIGTERM and cancelling.
    pub fn start_engines(&mut self, grace: std::time::Duration) {
        let run = sessiond::domain::runtime::declared::run_declared(self.db.clone(), self.bus.clone(), grace);
        self.workers.push(tokio::spawn(run));
    }

    /// Stops the scheduler and the runtimes at once, as a crash of the server would (the
    /// local runtime's supervisors go on).
    pub fn crash_workers(&mut self) {
        for w in self.workers.drain(..) {
            w.abort();
        }
    }

    /// Polls `query` until `done` holds for its answer (at most 30 s), and returns it.
    pub async fn wait_for(&self, token: &str, query: &str, vars: Value, done: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        for _ in 0..1500 {
            last = self.gql(Some(token), query, vars.clone()).await;
            if done(&last) {
                return last;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("never reached the expected state; last answer: {last}");
    }

    /// The same database opened again, as after a server restart.
    pub async fn restart(&self) -> TestApp {
        Self::open(self.backend, self.url.clone(), self._dir.clone(), self.limits.clone()).await
    }

    /// Adds `n` generated sessions (seed `seed`) to the database.
    pub async fn generate(&self, n: u64, seed: u64) -> sessiond::domain::directory::generate::GenerateReport {
        let opts = sessiond::domain::directory::generate::GenerateOptions {
            sessions: n,
            seed,
            now: sessiond::domain::model::clock::now(),
        };
        sessiond::domain::directory::generate::generate(&self.db, &opts).await.expect("generate sessions")
    }

    /// How many statements `f` ran.
    pub async fn count_statements<T>(&self, f: impl std::future::Future<Output = T>) -> (usize, T) {
        use std::sync::atomic::Ordering;
        let before = self.statements.load(Ordering::SeqCst);
        let out = f.await;
        (self.statements.load(Ordering::SeqCst) - before, out)
    }

    /// The text of every statement the app runs during `f`, in order.
    pub async fn statement_texts<T>(&self, f: impl std::future::Future<Output = T>) -> (Vec<String>, T) {
        *self.texts.lock().expect("statement texts") = Some(Vec::new());
        let out = f.await;
        (self.texts.lock().expect("statement texts").take().unwrap_or_default(), out)
    }

    pub async fn send(&self, req: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
        let resp = self.router.clone().oneshot(req).await.expect("router is infallible");
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.expect("body").to_bytes().to_vec();
        (parts.status, parts.headers, bytes)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, HeaderMap, Vec<u8>) {
        self.send(Request::get(path).body(Body::empty()).expect("request")).await
    }

    /// POSTs a GraphQL request as `token` (none when `None`) and returns the JSON answer.
    pub async fn gql(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        self.gql_full(token, query, variables).await.1
    }

    pub async fn gql_full(&self, token: Option<&str>, query: &str, variables: Value) -> (StatusCode, Value) {
        let mut req = Request::post("/graphql").header(header::CONTENT_TYPE, "application/json");
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let body = json!({"query": query, "variables": variables}).to_string();
        let (status, _, bytes) = self.send(req.body(Body::from(body)).expect("request")).await;
        (
            status,
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes))),
        )
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

/// With `--max-in-flight` at 1: holds every pooled connection (4 in tests) and sends a
/// GraphQL request that then waits for one, in flight, until the returned transactions are
/// dropped. Returns once another request is refused for the cap (its status, headers and
/// body), with the held transactions and the waiting request.
pub async fn hold_the_in_flight_cap(
    app: &std::sync::Arc<TestApp>,
) -> ((StatusCode, HeaderMap, Vec<u8>), Vec<sea_orm::DatabaseTransaction>, tokio::task::JoinHandle<Value>) {
    use sea_orm::TransactionTrait;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(app.db.begin().await.expect("hold a connection"));
    }
    let wait = || {
        let app = app.clone();
        tokio::spawn(async move { app.gql(Some("demo-alice"), "{ viewer { user { email } } }", json!({})).await })
    };
    let mut waiting = wait();
    for _ in 0..500 {
        if waiting.is_finished() {
            // It came second and was the one refused: send it again, to wait in flight.
            waiting = wait();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let refused = app.get("/graphiql").await;
        if refused.0 == StatusCode::SERVICE_UNAVAILABLE {
            return (refused, held, waiting);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no request was ever held in flight");
}

/// A session row of the demo user `email` in the demo project `project` (`domain/name`),
/// requesting `slots` and holding them unless it is PENDING, for tests that need sessions
/// in a given state without driving them there.
pub fn session_row(email: &str, project: &str, name: &str, status: &str, slots: Value) -> entity::session::ActiveModel {
    use sea_orm::Set;
    use sessiond::domain::model::ids::stable_id;
    let now = chrono::Utc::now();
    entity::session::ActiveModel {
        id: Set(uuid::Uuid::new_v4()),
        name: Set(name.to_owned()),
        session_type: Set("INTERACTIVE".into()),
        status: Set(status.into()),
        status_info: Set(None),
        result: Set("UNDEFINED".into()),
        exit_code: Set(None),
        owner_id: Set(sessiond::domain::directory::seed::demo_user_id(email)),
        keypair_id: Set(sessiond::domain::directory::seed::demo_keypair_id(email)),
        project_id: Set(sessiond::domain::directory::seed::demo_project_id(project)),
        domain_id: Set(stable_id("domain", project.split('/').next().unwrap_or(project))),
        resource_group: Set(if project.starts_with("other/") { "other" } else { "default" }.into()),
        image: Set("python:3.12".into()),
        requested_slots: Set(slots.clone()),
        occupied_slots: Set(if status == "PENDING" { json!({}) } else { slots }),
        cluster_size: Set(1),
        environment: Set(json!([])),
        startup_command: Set(None),
        batch_timeout_seconds: Set(None),
        priority: Set(0),
        agent_id: Set(None),
        launch_group_id: Set(None),
        pending_reasons: Set(json!([])),
        created_at: Set(now),
        scheduled_at: Set(None),
        started_at: Set(None),
        terminated_at: Set(["TERMINATED", "CANCELLED", "ERROR"].contains(&status).then_some(now)),
        status_changed_at: Set(now),
        queue_position: Set(None),
        lifetime_seconds: Set(None),
        extended_seconds: Set(0),
        extensions: Set(0),
        expiry_warned_for: Set(None),
        utilization: Set(json!({})),
        utilization_samples: Set(0),
        utilization_sampled_at: Set(None),
        idle: Set(None),
        active_at: Set(None),
        typed_at: Set(None),
        exempt_idle: Set(false),
        cpu_used: Set(0.0),
        mem_used: Set(0.0),
        status_actor_user_id: Set(None),
        status_actor_rule: Set(None),
        launched_from_session_id: Set(None),
        launched_from_name: Set(None),
        launched_from_template_id: Set(None),
        starts_at: Set(None),
        callback_url: Set(None),
        callback_on_running: Set(false),
        pending_digest: Set(sessiond::domain::sessions::occupancy::reasons_digest(&[])),
        pull_progress: Set(None),
        image_digest: Set(None),
        mounts: Set(None),
    }
}

/// The global id of the demo project `project` (`domain/name`).
pub fn project(project: &str) -> String {
    sessiond::graphql::ids::encode(
        sessiond::graphql::ids::NodeKind::Project,
        sessiond::domain::directory::seed::demo_project_id(project),
    )
    .0
}

/// A launch input of `cpu` CPUs and 1 GiB of python:3.12 in the demo project `default`.
pub fn launch_input(name: &str, cpu: f64) -> Value {
    json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12",
        "resources": [{"slot": "cpu", "amount": cpu}, {"slot": "mem", "amount": 1_i64 << 30}],
    })
}

/// Ends session `id` as `token` (`terminateSessions`, not forced): its outcome.
pub async fn terminate(app: &TestApp, token: &str, id: &str) -> String {
    terminate_with(app, token, id, false).await
}

/// Ends session `id` as `token` at once (`terminateSessions` with `force`): its outcome.
pub async fn force_terminate(app: &TestApp, token: &str, id: &str) -> String {
    terminate_with(app, token, id, true).await
}

async fn terminate_with(app: &TestApp, token: &str, id: &str, force: bool) -> String {
    let resp = app
        .gql(
            Some(token),
            "mutation($ids: [ID!]!, $force: Boolean) { terminateSessions(ids: $ids, force: $force) { results { outcome } } }",
            json!({"ids": [id], "force": force}),
        )
        .await;
    resp["data"]["terminateSessions"]["results"][0]["outcome"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

/// The codes of a response's errors, in order.
pub fn error_codes(resp: &Value) -> Vec<String> {
    resp["errors"]
        .as_array()
        .map(|errs| errs.iter().map(|e| e["extensions"]["code"].as_str().unwrap_or("<none>").to_owned()).collect())
        .unwrap_or_default()
}

/// Declares, for each named `async fn(TestApp)`, a test on SQLite and one on PostgreSQL.
/// A document the Sessions page itself sends: the constant `name` of `web/src/FILE`.
pub fn page_document(file: &str, name: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web/src").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = format!("const {name} = `");
    let from = text.find(&start).unwrap_or_else(|| panic!("{name} in {file}")) + start.len();
    let to = text[from..].find('`').expect("its end") + from;
    text[from..to].to_owned()
}

#[macro_export]
macro_rules! db_tests {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(app) = $crate::support::TestApp::start($crate::support::Backend::Sqlite).await {
                    super::$name(app).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(app) = $crate::support::TestApp::start($crate::support::Backend::Postgres).await {
                    super::$name(app).await
                }
            }
        }
    )+};
}

/// Adds a resource group taking `types`, with `agents` (id, available slots), offered to
/// the demo projects `projects` (`domain/name`, at the given position: 0 is the default).
pub async fn add_resource_group(
    app: &TestApp,
    name: &str,
    types: &[&str],
    agents: &[(&str, Value)],
    projects: &[(&str, i32)],
) {
    use entity::{agent, resource_group, resource_group_project};
    use sea_orm::{ActiveModelTrait, Set};
    let now = chrono::Utc::now();
    resource_group::ActiveModel {
        name: Set(name.to_owned()),
        description: Set(format!("test group {name}")),
        scheduler: Set("FIFO".to_owned()),
        pending_timeout_seconds: Set(None),
        allowed_session_types: Set(json!(types)),
        engine: Set(Some("demo".to_owned())),
        created_at: Set(now),
    }
    .insert(&app.db)
    .await
    .expect("insert a resource group");
    for (id, slots) in agents {
        agent::ActiveModel {
            id: Set((*id).to_owned()),
            resource_group: Set(name.to_owned()),
            available_slots: Set(slots.clone()),
            status: Set("ALIVE".to_owned()),
            schedulable: Set(true),
            pulled_images: Set(json!([])),
            created_at: Set(now),
            last_heartbeat_at: Set(now),
        }
        .insert(&app.db)
        .await
        .expect("insert an agent");
    }
    for (project, position) in projects {
        resource_group_project::ActiveModel {
            resource_group: Set(name.to_owned()),
            project_id: Set(sessiond::domain::directory::seed::demo_project_id(project)),
            position: Set(*position),
        }
        .insert(&app.db)
        .await
        .expect("offer the group to a project");
    }
}

/// The next event the bus broadcasts (the feed is asynchronous; at most 10 s).
pub async fn next_event(
    events: &mut tokio::sync::broadcast::Receiver<sessiond::domain::live::events::SessionEvent>,
) -> sessiond::domain::live::events::SessionEvent {
    tokio::time::timeout(std::time::Duration::from_secs(10), events.recv())
        .await
        .expect("an event within 10 s")
        .expect("the bus is open")
}

/// Every event the bus broadcasts until none comes for `quiet`.
pub async fn events_until_quiet(
    events: &mut tokio::sync::broadcast::Receiver<sessiond::domain::live::events::SessionEvent>,
    quiet: std::time::Duration,
) -> Vec<sessiond::domain::live::events::SessionEvent> {
    let mut out = Vec::new();
    while let Ok(Ok(e)) = tokio::time::timeout(quiet, events.recv()).await {
        out.push(e);
    }
    out
}

/// Whether the Node package in `dir` can run (its pinned packages installed with `npm ci`
/// when `module` is missing). Without Node it says so in a NOTICE line and returns false,
/// unless `SESSIOND_REQUIRE_NODE=1` (set by `.ci/run`) makes that a failure.
/// The system's chromium (`SESSIOND_CHROMIUM`, else `/usr/bin/chromium`); `None`, with a
/// NOTICE, when it is missing, unless `SESSIOND_REQUIRE_BROWSER=1` (set by `.ci/run`, which
/// installs it): then the test fails.
pub fn chromium() -> Option<String> {
    let chromium = std::env::var("SESSIOND_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if std::path::Path::new(&chromium).exists() {
        return Some(chromium);
    }
    if std::env::var("SESSIOND_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
        panic!("chromium is required (SESSIOND_REQUIRE_BROWSER=1) but {chromium} does not exist");
    }
    use std::io::Write;
    let line = format!("NOTICE: the browser check was SKIPPED and is reported as passed: no {chromium}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    None
}

/// Runs `script` of `tests/browser` under Node with `args`, driving `chromium`, and returns
/// the one JSON line it prints (it must exit successfully).
pub async fn browser_script(script: &str, args: &[String], chromium: &str) -> Value {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .args(args)
        .env("SESSIOND_CHROMIUM", chromium)
        .current_dir(&dir)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{script} ran: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).expect("one JSON line")
}

pub fn node_package(dir: &std::path::Path, module: &str, what: &str) -> bool {
    let ready = || -> Result<(), String> {
        let node = std::process::Command::new("node").arg("--version").output();
        if !node.is_ok_and(|o| o.status.success()) {
            return Err("`node` is not available".into());
        }
        if !dir.join("node_modules").join(module).exists() {
            let out = std::process::Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(dir)
                .output()
                .map_err(|e| format!("npm: {e}"))?;
            if !out.status.success() {
                return Err(format!("npm ci failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        Ok(())
    };
    match ready() {
        Ok(()) => true,
        Err(why) if std::env::var("SESSIOND_REQUIRE_NODE").is_ok_and(|v| v == "1") => {
            panic!("{what} is required (SESSIOND_REQUIRE_NODE=1) but cannot run: {why}")
        }
        Err(why) => {
            use std::io::Write;
            let line = format!("NOTICE: the test of {what} was SKIPPED and is reported as passed: {why}\n");
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            false
        }
    }
}

/// The demo's declaration with storage `shared` on `dir` (1 GiB a folder), open to the
/// default domain's projects.
pub async fn declare_storage(app: &TestApp, dir: &std::path::Path) {
    let text = format!(
        "{}\n[storage.shared]\npath = \"{}\"\nquota = \"1 GiB\"\nprojects = [\"default/default\", \"default/research\"]\n",
        sessiond::domain::directory::apply::DEMO,
        dir.display()
    );
    let slots = sessiond::domain::directory::apply::known_slots(&app.db).await.expect("slots");
    let declared = sessiond::domain::directory::apply::file::parse(
        &[sessiond::domain::directory::apply::Source { name: "storage.toml".into(), text }],
        &slots,
    )
    .unwrap_or_else(|p| panic!("{p:#?}"));
    sessiond::domain::directory::apply::apply(
        &app.db,
        &declared,
        sessiond::domain::directory::apply::Options::default(),
    )
    .await
    .expect("applied");
}

/// A storage's directory for one test, that sessions (an unprivileged uid) can reach; on
/// drop, every folder image still mounted under it is unmounted first (a test that keeps
/// its folders leaves no mount behind), then it goes.
pub struct StorageDir {
    dir: tempfile::TempDir,
}

impl StorageDir {
    pub fn new() -> Self {
        Self::under(&std::env::temp_dir())
    }
    /// In `parent` (a path every node of a cluster sees).
    pub fn under(parent: &std::path::Path) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir_in(parent).expect("a storage");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
        Self { dir }
    }
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for StorageDir {
    fn drop(&mut self) {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for line in mounts.lines() {
            if let Some(at) = line.split(' ').nth(4)
                && std::path::Path::new(at).starts_with(self.dir.path())
            {
                std::process::Command::new("umount").args(["-l", at]).output().ok();
            }
        }
    }
}
