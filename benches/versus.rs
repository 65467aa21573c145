//! sessiond side by side with a generic GraphQL-over-PostgreSQL server and with the floor.
//!
//! One page, "the first 50 sessions of a project, newest first, with owner email, project
//! name, status, type, requested cpu and memory, created time and elapsed seconds", asked
//! as the project's administrator, on 100 000 generated sessions (project `default` holds
//! ~43 % of them). The contenders, each in its own process on this machine:
//! - `sessiond-pg` and `sessiond-sqlite`: release builds of `sessiond serve`, default flags;
//! - `postgraphile` and `postgraphile-2w`: PostGraphile 4.14 (pinned in
//!   `benches/postgraphile/`), one process and a 2-worker cluster, on the same database,
//!   with three computed columns for what its generic schema lacks (elapsed seconds,
//!   requested cpu and memory); it runs no authentication or visibility;
//! - `floor`: an axum handler on a sqlx pool that runs one statement (token, visibility,
//!   page and relations) and returns sessiond's JSON (`benches/floor/`).
//!
//! The load generator checks every answer (not JSON, an `errors` member or other than 50
//! sessions is an error). Closed loop at 16 and 64 connections, then a fixed rate of half
//! the slowest contender's maximum (latency counted from when each request was due);
//! contenders alternate run by run; figures are medians over the runs. CPU is read from
//! `/proc` (the contender's process tree, and every `postgres` process for the database),
//! per 1 000 answers. Start-up is from spawn to the first good answer of the page.
//!
//! `--page full` asks instead for the page with every column the Sessions page shows: also
//! the resource group, the image, and the requested and occupied slots with accelerators
//! (PostGraphile through its foreign keys and the slots' JSON; the floor serves only the
//! plain page and sits this one out). `--page use` asks for the full page with what each
//! session uses (`utilization { slot current average maximum } utilizationSampledAt`, the
//! UTILIZATION column): sessiond alone, to set against its `--page full`.
//!
//! The Sessions page's own documents, read from `web/src` as the page sends them, never a
//! copy: `--page page` is its list (`SessionsPage`, page.ts `LIST`, with the tab counts) on
//! the Finished tab, its first page of `PAGE_SIZE` in its first order, as the project's
//! administrator (`--scope MINE --token demo-alice` for a user's own page); `--page viewer`
//! (`PageViewer`), `--page panel` (`PagePanel`, MY_TOTAL) and `--page detail` (`PageDetail`
//! of the project's newest finished session, given a history of 20 lines). PostGraphile
//! answers the same from the same tables with the documents and SQL of
//! `benches/postgraphile/` (`page.sql`: computed columns and the panel as a custom query)
//! and the connection-filter plugin for the tab; the floor answers the list (one statement,
//! the counts from the same tallies) and sits the others out. Every contender's answers
//! must agree (`essence`: the sessions, the counts, the projects, the panel's figures, the
//! history).
//!
//! `cargo bench --bench versus [-- --runs N] [--seconds S] [--sessions N] [--only a,b]
//! [--page plain|full|use|page|viewer|panel|detail] [--scope PROJECT|MINE] [--token T]
//! [--sessiond PATH] [--connections 16,64]` (defaults: 3 runs of 20 s, 100 000 sessions,
//! every contender, the plain page, closed loops at 16 and 64 connections; the ratios are
//! taken at the first). `--sessiond` runs another build of sessiond (the `release`
//! build's binary) in place of this `bench` build's. PostgreSQL as in the tests; Node and
//! npm for PostGraphile (its packages installed from the lockfile).

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

#[allow(dead_code)]
mod floor;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{cpu_seconds, over_runs, runs, stamp, tree};

const SESSIOND_PAGE: &str = "query($p: ID!) { sessions(projectId: $p, scope: PROJECT, first: 50) { edges { node {
  id name status type createdAt elapsedSeconds owner { email } project { name } requestedSlots { cpu memory } } } } }";

const POSTGRAPHILE_PAGE: &str = "query($p: UUID!) { allSessions(condition: {projectId: $p}, first: 50,
  orderBy: [CREATED_AT_DESC, ID_DESC]) { edges { node { id name status sessionType createdAt elapsedSeconds
  userByOwnerId { email } projectByProjectId { name } requestedCpu requestedMemory } } } }";

/// The page with every column of the Sessions page (`--page full`).
const SESSIOND_FULL_PAGE: &str = "query($p: ID!) { sessions(projectId: $p, scope: PROJECT, first: 50) { edges { node {
  id name status type createdAt elapsedSeconds owner { email } project { name } resourceGroup { name } image { name }
  requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { cpu memory accelerators { slot amount } } } } } }";

const POSTGRAPHILE_FULL_PAGE: &str = "query($p: UUID!) { allSessions(condition: {projectId: $p}, first: 50,
  orderBy: [CREATED_AT_DESC, ID_DESC]) { edges { node { id name status sessionType createdAt elapsedSeconds
  userByOwnerId { email } projectByProjectId { name } resourceGroupByResourceGroup { name } imageByImage { name }
  requestedCpu requestedMemory requestedSlots occupiedSlots } } } }";

/// The full page with the use columns (`--page use`).
const SESSIOND_USE_PAGE: &str = "query($p: ID!) { sessions(projectId: $p, scope: PROJECT, first: 50) { edges { node {
  id name status type createdAt elapsedSeconds owner { email } project { name } resourceGroup { name } image { name }
  requestedSlots { cpu memory accelerators { slot amount } } occupiedSlots { cpu memory accelerators { slot amount } }
  utilization { slot current average maximum } utilizationSampledAt } } } }";

/// What is asked (`--page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Page {
    /// A hand-written plain list (the first benchmark's page).
    Plain,
    /// A hand-written list with every column.
    Full,
    /// `Full` with the use columns (sessiond alone).
    Use,
    /// The Sessions page's own list document (`SessionsPage`, web/src/page.ts) with its
    /// counts, on the Finished tab, as `--token` sends it (`--scope`, default PROJECT).
    List,
    /// The page's `PageViewer` (web/src/page.ts).
    Viewer,
    /// The page's `PagePanel` (web/src/panel.ts), in the MY_TOTAL view.
    Panel,
    /// The page's `PageDetail` (web/src/detail.ts) of a finished session with history.
    Detail,
}

impl Page {
    fn parse() -> Page {
        match flag("--page").as_deref() {
            None | Some("plain") => Page::Plain,
            Some("full") => Page::Full,
            Some("use") => Page::Use,
            Some("page") => Page::List,
            Some("viewer") => Page::Viewer,
            Some("panel") => Page::Panel,
            Some("detail") => Page::Detail,
            Some(other) => panic!("--page {other}: plain, full, use, page, viewer, panel or detail"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Page::Plain => "plain",
            Page::Full => "full",
            Page::Use => "use",
            Page::List => "page (SessionsPage)",
            Page::Viewer => "viewer (PageViewer)",
            Page::Panel => "panel (PagePanel)",
            Page::Detail => "detail (PageDetail)",
        }
    }

    /// Whether `kind` runs this page: the floor serves the hand-written plain page and the
    /// page's list only; PostGraphile has no use columns.
    fn runs(self, kind: Kind) -> bool {
        match kind {
            Kind::Floor => matches!(self, Page::Plain | Page::List),
            Kind::PostGraphile | Kind::PostGraphile2 => self != Page::Use,
            _ => true,
        }
    }
}

/// A string constant of one of the page's modules (`const NAME = \`…\`;`), as the page sends it.
fn page_constant(file: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web/src").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = format!("const {name} = `");
    let from = text.find(&start).unwrap_or_else(|| panic!("no {start} in {}", path.display())) + start.len();
    let to = text[from..].find('`').expect("the constant's end") + from;
    text[from..to].to_owned()
}

/// A number constant of web/src/page.ts (`const NAME = 20;`).
fn page_number(name: &str) -> i64 {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web/src/page.ts");
    let text = std::fs::read_to_string(&path).expect("page.ts");
    let start = format!("const {name} = ");
    let from = text.find(&start).unwrap_or_else(|| panic!("no {start} in page.ts")) + start.len();
    text[from..].split(';').next().and_then(|n| n.trim().parse().ok()).expect("a number")
}

/// The list's first order as page.ts starts it (`order: { field: 'X', direction: 'Y' }`).
fn page_order() -> Value {
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("web/src/page.ts")).expect("page.ts");
    let from = text.find("order: { field: '").expect("the page's first order") + "order: { field: '".len();
    let field = text[from..].split('\'').next().expect("a field");
    let rest = &text[from..];
    let dir_from = rest.find("direction: '").expect("a direction") + "direction: '".len();
    let direction = rest[dir_from..].split('\'').next().expect("a direction");
    json!([{"field": field, "direction": direction}])
}

/// A document of `benches/postgraphile/` (its comment lines left out).
fn postgraphile_document(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/postgraphile").join(format!("{name}.graphql"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n")
}

/// The token `--token` (default the project's administrator) and the scope of the page's
/// list (`--scope`, PROJECT; MINE for a user's own page).
fn token() -> String {
    flag("--token").unwrap_or_else(|| TOKEN.to_owned())
}

fn scope() -> String {
    flag("--scope").map(|s| s.to_uppercase()).unwrap_or_else(|| "PROJECT".to_owned())
}

/// What PostGraphile's generic schema lacks, as computed columns and a custom query it
/// exposes (`benches/postgraphile/page.sql`).
const POSTGRAPHILE_COLUMNS: &str = include_str!("postgraphile/page.sql");

const TOKEN: &str = "demo-admin";
const PAGE_SIZE: usize = 50;
const WARM_UP: Duration = Duration::from_secs(2);

fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port()
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    SessiondPg,
    SessiondSqlite,
    PostGraphile,
    PostGraphile2,
    Floor,
}

impl Kind {
    const ALL: [Kind; 5] =
        [Kind::SessiondPg, Kind::SessiondSqlite, Kind::PostGraphile, Kind::PostGraphile2, Kind::Floor];

    fn name(self) -> &'static str {
        match self {
            Kind::SessiondPg => "sessiond-pg",
            Kind::SessiondSqlite => "sessiond-sqlite",
            Kind::PostGraphile => "postgraphile",
            Kind::PostGraphile2 => "postgraphile-2w",
            Kind::Floor => "floor",
        }
    }

    /// Whether its database work runs in other processes (PostgreSQL's).
    fn on_postgres(self) -> bool {
        self != Kind::SessiondSqlite
    }
}

/// Where the data lives.
struct Data {
    pg_url: String,
    sqlite_url: String,
    project: uuid::Uuid,
    /// The session `--page detail` asks for: the project's newest finished one, given a
    /// history of 20 lines on both databases.
    detail: uuid::Uuid,
    _dir: tempfile::TempDir,
}

/// History lines given to the detail's session (generated sessions have none).
const DETAIL_HISTORY: usize = 20;

async fn prepare(sessions: u64) -> Data {
    let (pg_url, _) = support::database("postgres").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite_url = format!("sqlite://{}?mode=rwc", dir.path().join("versus.db").display());
    let project = demo_project_id("default/default");
    let mut detail = None;
    for url in [&pg_url, &sqlite_url] {
        let t = Instant::now();
        let status = Command::new(sessiond_binary())
            .args(["generate", "--sessions", &sessions.to_string(), "--database-url", url])
            .env("SESSIOND_LOG", "error")
            .stdout(Stdio::null())
            .status()
            .expect("run sessiond generate");
        assert!(status.success(), "sessiond generate");
        eprintln!("generated {sessions} sessions in {:.1}s", t.elapsed().as_secs_f64());
        // The same generation on both: the same newest finished session, given a history.
        let db = Database::connect(url.as_str()).await.expect("connect");
        // Nothing moves while the contenders take turns (minutes apart), so that their
        // answers can be compared: the generated live sessions end now (12 of 100 000),
        // without events; the tallies follow, as for any change.
        db.execute_unprepared(
            "UPDATE sessions SET status = 'TERMINATED', terminated_at = coalesce(terminated_at, created_at)
             WHERE status NOT IN ('TERMINATED', 'CANCELLED', 'ERROR')",
        )
        .await
        .expect("end the live sessions");
        let newest = {
            use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
            entity::session::Entity::find()
                .filter(entity::session::Column::ProjectId.eq(project))
                .filter(entity::session::Column::Status.is_in(["TERMINATED", "CANCELLED", "ERROR"]))
                .order_by_desc(entity::session::Column::CreatedAt)
                .order_by_desc(entity::session::Column::Id)
                .one(&db)
                .await
                .expect("read")
                .expect("a finished session")
        };
        assert!(detail.is_none_or(|d| d == newest.id), "both databases hold the same sessions");
        detail = Some(newest.id);
        let lines = (0..DETAIL_HISTORY).map(|i| entity::scheduling_history::ActiveModel {
            id: sea_orm::ActiveValue::NotSet,
            session_id: sea_orm::Set(newest.id),
            phase: sea_orm::Set("schedule".into()),
            from_status: sea_orm::Set(Some("PENDING".into())),
            to_status: sea_orm::Set(Some("PENDING".into())),
            result: sea_orm::Set("NEED_RETRY".into()),
            error_code: sea_orm::Set(Some(["NO_CAPACITY", "QUEUED_BEHIND"][i % 2].into())),
            message: sea_orm::Set(format!("no agent of resource group `default` has room for this request now ({i})")),
            sub_steps: sea_orm::Set(json!([{"name": "capacity", "result": "FAILURE", "errorCode": "NO_CAPACITY"}])),
            attempts: sea_orm::Set(i as i32 + 1),
            created_at: sea_orm::Set(newest.created_at),
            updated_at: sea_orm::Set(newest.created_at),
            actor_user_id: sea_orm::Set(None),
            actor_rule: sea_orm::Set(Some("scheduler".into())),
            pass: sea_orm::Set(None),
            last_tried_at: sea_orm::Set(None),
        });
        use sea_orm::EntityTrait;
        entity::scheduling_history::Entity::insert_many(lines).exec(&db).await.expect("history");
    }
    let db = Database::connect(&pg_url).await.expect("connect");
    db.execute_unprepared(POSTGRAPHILE_COLUMNS).await.expect("computed columns");
    // Steady state: what autovacuum would have done after the bulk load.
    db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
    Data { pg_url, sqlite_url, project, detail: detail.expect("a detail"), _dir: dir }
}

/// The sessiond that runs: this build's, or another build's (`--sessiond PATH`, say the
/// `release` build's, to set beside this `bench` one).
fn sessiond_binary() -> PathBuf {
    flag("--sessiond").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sessiond")))
}

/// Which build of sessiond runs, as a table says it: `bench` (this one) or the profile
/// directory of the one given (`release`).
fn sessiond_build() -> String {
    match flag("--sessiond") {
        None => "bench".to_owned(),
        Some(path) => PathBuf::from(path)
            .parent()
            .and_then(|p| p.file_name())
            .map_or_else(|| "another".to_owned(), |n| n.to_string_lossy().into_owned()),
    }
}

/// What each contender is asked, and where its answer's main list is: (query, variables,
/// JSON pointer of the list, its expected length; none: not empty).
fn document(page: Page, kind: Kind, data: &Data) -> (String, Value, &'static str, Option<usize>) {
    let postgraphile = matches!(kind, Kind::PostGraphile | Kind::PostGraphile2);
    let relay_project = encode(NodeKind::Project, data.project).0;
    match (page, postgraphile) {
        (Page::Plain, true) => {
            (POSTGRAPHILE_PAGE.into(), json!({"p": data.project}), "/data/allSessions/edges", Some(PAGE_SIZE))
        }
        (Page::Full, true) => {
            (POSTGRAPHILE_FULL_PAGE.into(), json!({"p": data.project}), "/data/allSessions/edges", Some(PAGE_SIZE))
        }
        (Page::Plain, false) => {
            (SESSIOND_PAGE.into(), json!({"p": relay_project}), "/data/sessions/edges", Some(PAGE_SIZE))
        }
        (Page::Full, false) => {
            (SESSIOND_FULL_PAGE.into(), json!({"p": relay_project}), "/data/sessions/edges", Some(PAGE_SIZE))
        }
        (Page::Use, _) => {
            (SESSIOND_USE_PAGE.into(), json!({"p": relay_project}), "/data/sessions/edges", Some(PAGE_SIZE))
        }
        // The page's list as refresh() sends it on the Finished tab: its first page, its
        // first order, the tab as the filter, the counts without it.
        (Page::List, false) => {
            let first = page_number("PAGE_SIZE");
            let variables = json!({
                "p": relay_project, "scope": scope(), "filter": {"tab": "FINISHED"}, "counted": {},
                "order": page_order(), "first": first,
            });
            (page_constant("page.ts", "LIST"), variables, "/data/sessions/edges", Some(first as usize))
        }
        (Page::List, true) => {
            let first = page_number("PAGE_SIZE");
            let variables =
                json!({"p": data.project, "statuses": ["TERMINATED", "CANCELLED", "ERROR"], "first": first});
            (postgraphile_document("SessionsPage"), variables, "/data/allSessions/edges", Some(first as usize))
        }
        (Page::Viewer, false) => (page_constant("page.ts", "VIEWER"), json!({}), "/data/viewer/projects", None),
        (Page::Viewer, true) => (
            postgraphile_document("PageViewer"),
            json!({"email": "admin@example.com"}),
            "/data/userByEmail/projectAccessList",
            None,
        ),
        (Page::Panel, false) => (
            page_constant("panel.ts", "PANEL"),
            json!({"p": relay_project, "view": "MY_TOTAL"}),
            "/data/resourcePanel/slots",
            None,
        ),
        (Page::Panel, true) => (
            postgraphile_document("PagePanel"),
            json!({"keypair": sessiond::domain::directory::seed::demo_keypair_id("admin@example.com"), "p": data.project, "view": "MY_TOTAL"}),
            "/data/resourcePanel/slots",
            None,
        ),
        (Page::Detail, false) => (
            page_constant("detail.ts", "DETAIL"),
            json!({"id": encode(NodeKind::Session, data.detail).0}),
            "/data/session/schedulingHistory/edges",
            Some(DETAIL_HISTORY),
        ),
        (Page::Detail, true) => (
            postgraphile_document("PageDetail"),
            json!({"id": data.detail}),
            "/data/sessionById/schedulingHistoriesBySessionId/edges",
            Some(DETAIL_HISTORY),
        ),
    }
}

fn postgraphile_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/postgraphile");
    if !dir.join("node_modules/.bin/postgraphile").exists()
        || !dir.join("node_modules/postgraphile-plugin-connection-filter").exists()
    {
        let status =
            Command::new("npm").args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"]).current_dir(&dir).status();
        assert!(status.is_ok_and(|s| s.success()), "npm ci in {}", dir.display());
    }
    dir
}

/// What the load generator sends to a contender, and how it checks the answer.
#[derive(Clone)]
struct Target {
    kind: Kind,
    url: String,
    body: axum::body::Bytes,
    /// Where the answer's main list is, and how long it must be (none: not empty).
    list: &'static str,
    len: Option<usize>,
}

/// A contender's running process (its whole tree is stopped on drop).
struct Running {
    target: Target,
    child: Child,
    started_in: Duration,
    /// Resident memory (`VmRSS`) and its anonymous part (`RssAnon`, the heap) 2 s after
    /// the first answer, KiB.
    idle_rss_kib: u64,
    idle_anon_kib: u64,
    /// The first good answer.
    answer: Value,
}

impl Drop for Running {
    fn drop(&mut self) {
        for pid in tree(self.child.id()).into_iter().rev() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().pool_max_idle_per_host(64).build().expect("client")
}

async fn spawn(kind: Kind, data: &Data) -> Running {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let mut cmd = match kind {
        Kind::SessiondPg | Kind::SessiondSqlite => {
            let url = if kind == Kind::SessiondPg { &data.pg_url } else { &data.sqlite_url };
            let mut c = Command::new(sessiond_binary());
            c.args(["serve", "--database-url", url, "--bind", &bind, "--runtime", "simulated"]);
            c
        }
        Kind::PostGraphile | Kind::PostGraphile2 => {
            let dir = postgraphile_dir();
            let mut c = Command::new("node");
            c.arg(dir.join("node_modules/.bin/postgraphile"))
                .args(["--connection", &data.pg_url, "--schema", "public", "--host", "127.0.0.1"])
                .args(["--port", &port.to_string(), "--disable-query-log"])
                // The page's tab filter (`status: {in: …}`) needs the connection-filter plugin.
                .args(["--append-plugins", "postgraphile-plugin-connection-filter"])
                .env("NODE_ENV", "production");
            if kind == Kind::PostGraphile2 {
                c.args(["--cluster-workers", "2"]);
            }
            c
        }
        Kind::Floor => {
            let mut c = Command::new(std::env::current_exe().expect("own path"));
            let which = if Page::parse() == Page::List { "floor-page" } else { "floor" };
            c.args([which, &data.pg_url, &bind]);
            c
        }
    };
    let (query, variables, list, len) = document(Page::parse(), kind, data);
    let target = Target {
        kind,
        url: format!("http://{bind}/graphql"),
        body: json!({"query": query, "variables": variables}).to_string().into(),
        list,
        len,
    };
    let t = Instant::now();
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn contender");
    let http = client();
    let answer = loop {
        assert!(t.elapsed() < Duration::from_secs(60), "{} did not answer within 60 s", kind.name());
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{} exited at start: {status}", kind.name());
        }
        match ask(&http, &target).await {
            Ok(answer) => break answer,
            Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    };
    let started_in = t.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let processes = tree(child.id());
    let idle_rss_kib = processes.iter().map(|p| support::rss_kib(*p)).sum();
    let idle_anon_kib = processes.iter().map(|p| support::status_kib(*p, "RssAnon")).sum();
    Running { target, child, started_in, idle_rss_kib, idle_anon_kib, answer }
}

/// One request, its answer checked: JSON, no `errors`, a full page.
async fn ask(http: &reqwest::Client, target: &Target) -> Result<Value, String> {
    let resp = http
        .post(&target.url)
        .header("content-type", "application/json")
        .bearer_auth(token())
        .body(target.body.clone())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let bytes = resp.bytes().await.map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| "not JSON".to_owned())?;
    if v.get("errors").is_some() {
        return Err(v.to_string().chars().take(300).collect());
    }
    match (v.pointer(target.list).and_then(Value::as_array).map(Vec::len), target.len) {
        (Some(n), Some(len)) if n == len => Ok(v),
        (Some(n), None) if n > 0 => Ok(v),
        (n, len) => Err(format!("{n:?} in {} instead of {len:?}", target.list)),
    }
}

/// Peak resident memory of the tree at `root`, KiB (each process's high-water mark).
fn peak_rss_kib(root: u32) -> u64 {
    tree(root).iter().map(|p| support::status_kib(*p, "VmHWM")).sum()
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn record(&mut self, took: Duration, result: Result<Value, String>) {
        self.latencies_us.push(took.as_micros() as u64);
        if let Err(e) = result {
            self.errors += 1;
            self.first_error.get_or_insert(e);
        }
    }
}

/// One run's figures.
struct Run {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
    first_error: Option<String>,
    /// CPU seconds per 1 000 answers: the contender's processes, and those plus PostgreSQL's.
    cpu: f64,
    cpu_with_db: f64,
    peak_rss_kib: u64,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize] as f64 / 1e3
}

/// How the load is offered.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// That many connections, each sending its next request when the answer came.
    Closed(usize),
    /// That many requests a second, whatever the answers; latency counts from when each
    /// request was due (at most 256 in flight).
    Rate(f64),
}

async fn load(running: &Running, how: Load, seconds: Duration) -> Run {
    let target = running.target.clone();
    let from = Instant::now() + WARM_UP;
    let until = from + seconds;
    let tallies: Vec<tokio::task::JoinHandle<Tally>> = match how {
        Load::Closed(connections) => (0..connections)
            .map(|_| {
                let target = target.clone();
                tokio::spawn(async move {
                    let http = client();
                    let mut tally = Tally::default();
                    loop {
                        let t = Instant::now();
                        if t >= until {
                            return tally;
                        }
                        let result = ask(&http, &target).await;
                        if t >= from {
                            tally.record(t.elapsed(), result);
                        }
                    }
                })
            })
            .collect(),
        Load::Rate(rate) => {
            let target = target.clone();
            vec![tokio::spawn(async move {
                let http = client();
                let slots = Arc::new(tokio::sync::Semaphore::new(256));
                let start = Instant::now();
                let mut inflight = Vec::new();
                for i in 0u64.. {
                    let due = start + Duration::from_secs_f64(i as f64 / rate);
                    if due >= until {
                        break;
                    }
                    tokio::time::sleep_until(due.into()).await;
                    let permit = slots.clone().acquire_owned().await.expect("semaphore");
                    let (http, target) = (http.clone(), target.clone());
                    inflight.push(tokio::spawn(async move {
                        let result = ask(&http, &target).await;
                        drop(permit);
                        (due, due.elapsed(), result)
                    }));
                }
                let mut tally = Tally::default();
                for h in inflight {
                    let (due, took, result) = h.await.expect("request task");
                    if due >= from {
                        tally.record(took, result);
                    }
                }
                tally
            })]
        }
    };
    tokio::time::sleep_until(from.into()).await;
    let before = cpu_seconds(running.child.id());
    tokio::time::sleep_until(until.into()).await;
    let after = cpu_seconds(running.child.id());
    let mut tally = Tally::default();
    for t in tallies {
        tally.merge(t.await.expect("load task"));
    }
    let answers = tally.latencies_us.len() as f64;
    tally.latencies_us.sort_unstable();
    let ours = after.0 - before.0;
    let db = if running.target.kind.on_postgres() { after.1 - before.1 } else { 0.0 };
    Run {
        per_second: answers / seconds.as_secs_f64(),
        p50_ms: percentile(&tally.latencies_us, 0.50),
        p99_ms: percentile(&tally.latencies_us, 0.99),
        errors: tally.errors,
        first_error: tally.first_error,
        cpu: ours / answers * 1e3,
        cpu_with_db: (ours + db) / answers * 1e3,
        peak_rss_kib: peak_rss_kib(running.child.id()),
    }
}

/// The answer's sessions by name, in order, whatever the contender's shape.
fn names(answer: &Value) -> Vec<String> {
    let edges = answer["data"]["sessions"]["edges"].as_array().or(answer["data"]["allSessions"]["edges"].as_array());
    edges.into_iter().flatten().filter_map(|e| e["node"]["name"].as_str().map(str::to_owned)).collect()
}

/// What every contender must agree on in its answer to `page`, whatever its shape.
fn essence(page: Page, answer: &Value) -> Value {
    let d = &answer["data"];
    let number = |v: &Value| v.as_f64().or_else(|| v.as_str().and_then(|s| s.parse().ok()));
    match page {
        Page::Plain | Page::Full | Page::Use => json!(names(answer)),
        Page::List => json!({
            "names": names(answer),
            "running": number(&d["sessionCounts"]["running"]).or_else(|| number(&d["running"]["totalCount"])),
            "finished": number(&d["sessionCounts"]["finished"]).or_else(|| number(&d["finished"]["totalCount"])),
        }),
        Page::Viewer => {
            let projects = d["viewer"]["projects"].as_array().or(d["userByEmail"]["projectAccessList"].as_array());
            json!(projects.into_iter().flatten().map(|p| json!([p["name"], p["sessionScopes"]])).collect::<Vec<_>>())
        }
        Page::Panel => json!(
            d["resourcePanel"]["slots"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| json!([
                    s["slot"],
                    number(&s["used"]),
                    number(&s["limit"]),
                    number(&s["remaining"]),
                    s["bindingLayer"]
                ]))
                .collect::<Vec<_>>()
        ),
        Page::Detail => {
            let edges = d["session"]["schedulingHistory"]["edges"]
                .as_array()
                .or(d["sessionById"]["schedulingHistoriesBySessionId"]["edges"].as_array());
            json!(edges.into_iter().flatten().map(|e| e["node"]["message"].clone()).collect::<Vec<_>>())
        }
    }
}

/// An answer without what changes by the second (sessiond's scheduler and runtime move
/// the generated live sessions along while the contenders take turns).
fn steady(answer: &Value) -> Value {
    let mut a = answer.clone();
    for e in a["data"]["sessions"]["edges"].as_array_mut().into_iter().flatten() {
        e["node"]["elapsedSeconds"] = Value::Null;
        e["node"]["status"] = Value::Null;
    }
    a
}

#[derive(Default)]
struct Figures {
    runs: Vec<Run>,
    started_ms: Vec<f64>,
    idle_rss_mib: Vec<f64>,
    idle_anon_mib: Vec<f64>,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("floor") {
        floor::serve(&args[2], args[3].parse().expect("bind address")).await;
        return;
    }
    if args.get(1).map(String::as_str) == Some("floor-page") {
        floor::serve_page(&args[2], args[3].parse().expect("bind address")).await;
        return;
    }
    let seconds = Duration::from_secs(flag("--seconds").and_then(|s| s.parse().ok()).unwrap_or(20));
    let sessions: u64 = flag("--sessions").and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let only = flag("--only");
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| only.as_deref().is_none_or(|o| o.split(',').any(|n| n == k.name())))
        .filter(|k| Page::parse().runs(*k))
        .collect();
    let loads: Vec<usize> = flag("--connections")
        .map(|c| c.split(',').map(|n| n.parse().expect("--connections 16,64")).collect())
        .unwrap_or_else(|| vec![16, 64]);
    let first = loads[0];
    stamp("cargo bench --bench versus");
    let page = Page::parse();
    let data = prepare(sessions).await;

    // Closed loops at 16 and 64 connections, alternating contenders run by run.
    let mut closed: HashMap<(Kind, usize), Figures> = HashMap::new();
    let mut answers: HashMap<Kind, Value> = HashMap::new();
    for round in 0..runs() {
        for &connections in &loads {
            for &kind in &kinds {
                let running = spawn(kind, &data).await;
                let run = load(&running, Load::Closed(connections), seconds).await;
                eprintln!(
                    "round {} {} at {connections}: {:.0} req/s, p99 {:.1} ms, {} errors",
                    round + 1,
                    kind.name(),
                    run.per_second,
                    run.p99_ms,
                    run.errors
                );
                let f = closed.entry((kind, connections)).or_default();
                f.started_ms.push(running.started_in.as_secs_f64() * 1e3);
                f.idle_rss_mib.push(mib(running.idle_rss_kib));
                f.idle_anon_mib.push(mib(running.idle_anon_kib));
                f.runs.push(run);
                answers.entry(kind).or_insert_with(|| running.answer.clone());
            }
        }
    }
    // Everyone answered the same page.
    if let Some(reference) = answers.get(&Kind::SessiondPg) {
        for (kind, answer) in &answers {
            assert_eq!(essence(page, answer), essence(page, reference), "{} answered another page", kind.name());
        }
        if let Some(floor) = answers.get(&Kind::Floor).filter(|_| page == Page::Plain) {
            let (ours, floors) = (steady(reference), steady(floor));
            let edges = |a: &Value| a["data"]["sessions"]["edges"].as_array().cloned().unwrap_or_default();
            for (a, b) in edges(&ours).iter().zip(edges(&floors).iter()) {
                assert_eq!(a, b, "the floor's JSON differs from sessiond's");
            }
            assert_eq!(ours, floors, "the floor's JSON differs from sessiond's");
        }
    }

    // A fixed rate of half the slowest contender's maximum.
    let slowest = kinds
        .iter()
        .map(|k| over_runs(&closed[&(*k, first)].runs.iter().map(|r| r.per_second).collect::<Vec<_>>(), 0).0)
        .fold(f64::INFINITY, f64::min);
    let rate = (slowest / 2.0).floor().max(1.0);
    let mut fixed: HashMap<Kind, Figures> = HashMap::new();
    for _ in 0..runs() {
        for &kind in &kinds {
            let running = spawn(kind, &data).await;
            let run = load(&running, Load::Rate(rate), seconds).await;
            fixed.entry(kind).or_default().runs.push(run);
        }
    }

    println!(
        "{sessions} sessions, the {} page as `{}` asks it{}; sessiond `{}`; closed loops of {}s after {}s of warm-up; fixed rate {rate:.0} req/s (half of the slowest at {first} connections)",
        page.name(),
        token(),
        if page == Page::List { format!(" (scope {}, the Finished tab)", scope()) } else { String::new() },
        sessiond_build(),
        seconds.as_secs(),
        WARM_UP.as_secs()
    );
    println!();
    println!(
        "| contender | load | req/s | p50 ms | p99 ms | errors | server CPU s / 1 000 req | + database | peak RSS MiB | start-up ms | idle RSS (heap) MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let med = |xs: Vec<f64>| over_runs(&xs, 2).0;
    let row = |kind: Kind, load: &str, f: &Figures, startup: Option<&Figures>| {
        let errors: u64 = f.runs.iter().map(|r| r.errors).sum();
        let (rps, rps_runs) = over_runs(&f.runs.iter().map(|r| r.per_second).collect::<Vec<_>>(), 0);
        println!(
            "| {} | {load} | {rps:.0} ({rps_runs}) | {:.1} | {:.1} | {errors} | {:.2} | {:.2} | {:.0} | {} | {} |",
            kind.name(),
            med(f.runs.iter().map(|r| r.p50_ms).collect()),
            med(f.runs.iter().map(|r| r.p99_ms).collect()),
            med(f.runs.iter().map(|r| r.cpu).collect()),
            med(f.runs.iter().map(|r| r.cpu_with_db).collect()),
            med(f.runs.iter().map(|r| mib(r.peak_rss_kib)).collect()),
            startup.map_or(String::new(), |s| format!("{:.0}", med(s.started_ms.clone()))),
            startup.map_or(String::new(), |s| format!(
                "{:.0} ({:.0})",
                med(s.idle_rss_mib.clone()),
                med(s.idle_anon_mib.clone())
            )),
        );
        if let Some(e) = f.runs.iter().find_map(|r| r.first_error.as_deref()) {
            println!("<!-- {} {load}: first error: {e} -->", kind.name());
        }
    };
    for &kind in &kinds {
        for (i, &connections) in loads.iter().enumerate() {
            let f = &closed[&(kind, connections)];
            row(kind, &format!("{connections} connections"), f, (i == 0).then_some(f));
        }
        row(kind, &format!("{rate:.0} req/s"), &fixed[&kind], None);
    }

    // The targets, as ratios within each round, then their median.
    println!();
    let ratio = |a: Kind, b: Kind, of: &dyn Fn(&Run) -> f64| -> Option<f64> {
        let (x, y) = (closed.get(&(a, first))?, closed.get(&(b, first))?);
        Some(med(x.runs.iter().zip(&y.runs).map(|(p, q)| of(p) / of(q)).collect()))
    };
    let report = |what: &str, value: Option<f64>, target: &str, met: &dyn Fn(f64) -> bool| {
        if let Some(v) = value {
            println!("- {what}: **{v:.2}** (target {target}: {})", if met(v) { "met" } else { "missed" });
        }
    };
    use Kind::*;
    report(
        &format!("sessiond-pg CPU per request ÷ PostGraphile's ({first} connections)"),
        ratio(SessiondPg, PostGraphile, &|r| r.cpu),
        "≤ 0.5",
        &|v| v <= 0.5,
    );
    // The page's documents' goal: database included, on both databases.
    for (kind, name) in [(SessiondPg, "sessiond-pg"), (SessiondSqlite, "sessiond-sqlite")] {
        report(
            &format!("{name} CPU per request ÷ PostGraphile's, database included ({first} connections)"),
            ratio(kind, PostGraphile, &|r| r.cpu_with_db),
            "≤ 0.5",
            &|v| v <= 0.5,
        );
    }
    report("sessiond-pg CPU per request ÷ the floor's", ratio(SessiondPg, Floor, &|r| r.cpu), "≤ 1.5", &|v| {
        v <= 1.5
    });
    report(
        &format!("sessiond-pg throughput ÷ PostGraphile 2 workers' ({first} connections)"),
        ratio(SessiondPg, PostGraphile2, &|r| r.per_second),
        "≥ 1",
        &|v| v >= 1.0,
    );
    report(
        "sessiond-sqlite CPU per request ÷ sessiond-pg's, database included",
        ratio(SessiondSqlite, SessiondPg, &|r| r.cpu_with_db),
        "≤ 1.2",
        &|v| v <= 1.2,
    );
    report(
        &format!("sessiond-sqlite server CPU per page, ms ({first} connections)"),
        closed.get(&(SessiondSqlite, first)).map(|f| med(f.runs.iter().map(|r| r.cpu).collect())),
        "≤ 1.0",
        &|v| v <= 1.0,
    );
    report(
        "sessiond-pg p99 at the fixed rate (ms)",
        fixed.get(&SessiondPg).map(|f| med(f.runs.iter().map(|r| r.p99_ms).collect())),
        "< 20",
        &|v| v < 20.0,
    );
    report(
        "sessiond-sqlite start-up (ms)",
        closed.get(&(SessiondSqlite, first)).map(|f| med(f.started_ms.clone())),
        "< 300",
        &|v| v < 300.0,
    );
    report(
        "sessiond-sqlite idle memory, VmRSS (MiB)",
        closed.get(&(SessiondSqlite, first)).map(|f| med(f.idle_rss_mib.clone())),
        "< 30",
        &|v| v < 30.0,
    );
    report(
        "sessiond-sqlite idle heap, RssAnon (MiB)",
        closed.get(&(SessiondSqlite, first)).map(|f| med(f.idle_anon_mib.clone())),
        "< 30",
        &|v| v < 30.0,
    );
}
