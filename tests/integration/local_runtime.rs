//! The local runtime with a real sandbox: sessions of resource group `local` run on this
//! machine under bubblewrap, each with its supervisor. Skipped (with a NOTICE) where no
//! sandbox can start, unless `SESSIOND_REQUIRE_SANDBOX=1` (`.ci/run` installs bubblewrap
//! and sets it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, project};

const LAUNCH: &str = "mutation($input: LaunchSessionInput!) { launchSession(input: $input) { session { id } } }";
const SESSION: &str = "query($id: ID!) { session(id: $id) { status statusInfo result exitCode logs(tail: 200)
  statusTransitions { toStatus } } }";

/// The machine's runtime directory for one test; on drop, every session still running is
/// asked to stop, and the directory goes once its supervisors are done.
pub(crate) struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    pub(crate) fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        // The sessions' unprivileged uid must be able to reach its work directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
        Self { dir }
    }
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("runtime")
    }
    fn sessions(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path().join("sessions")).into_iter().flatten().flatten().map(|e| e.path()).collect()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        for s in self.sessions() {
            std::fs::write(s.join("stop"), b"").ok();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && self
                .sessions()
                .iter()
                .any(|s| std::fs::read_to_string(s.join("state.json")).is_ok_and(|t| t.contains("\"exit\":null")))
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub(crate) fn input(name: &str, command: &str, mem_mib: i64, extra: Value) -> Value {
    let mut input = json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12", "type": "BATCH",
        "resourceGroup": "local", "startupCommand": command,
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": mem_mib << 20}],
    });
    if let (Some(i), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        i.extend(extra.clone());
    }
    input
}

pub(crate) async fn launch(app: &TestApp, token: &str, input: Value) -> String {
    let resp = app.gql(Some(token), LAUNCH, json!({"input": input})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("launched: {resp}")).to_owned()
}

pub(crate) async fn until(app: &TestApp, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    until_as(app, "demo-alice", id, done).await
}

async fn until_as(app: &TestApp, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let resp = app.wait_for(token, SESSION, json!({"id": id}), |r| done(&r["data"]["session"])).await;
    resp["data"]["session"].clone()
}

/// Asks to terminate session `id` as its owner, the demo user alice.
pub(crate) async fn terminate(app: &TestApp, id: &str) {
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }",
            json!({"ids": [id]}),
        )
        .await;
    assert!(resp.get("errors").is_none(), "{resp}");
}

pub(crate) fn ended(s: &Value) -> bool {
    ["TERMINATED", "ERROR"].contains(&s["status"].as_str().unwrap_or(""))
}

pub(crate) fn logs(s: &Value) -> String {
    s["logs"].as_array().map(|l| l.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n")).unwrap_or_default()
}

fn path_of(s: &Value) -> Vec<String> {
    s["statusTransitions"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["toStatus"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Processes of this machine whose command line is `command`.
pub(crate) fn processes_with(command: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            (String::from_utf8_lossy(&cmd).replace('\0', " ").trim_end() == command).then_some(pid)
        })
        .collect()
}

async fn a_batch_job_ends_with_its_real_exit_code_and_output(mut app: TestApp) {
    let machine = Machine::new();
    let images = "[images.\"python:3.12\"]\nprepare = \"python3 --version\"\nenv = { GREETING = \"hello\" }\n";
    if !app.start_local_runtime(&machine.path(), 1000, Some(images)).await {
        return;
    }
    let runtime = app.gql(Some("demo-alice"), "{ runtime { kind agent enforcedLimits } }", json!({})).await;
    assert_eq!(runtime["data"]["runtime"]["kind"], "LOCAL", "{runtime}");
    assert_eq!(runtime["data"]["runtime"]["agent"], "local");
    let limits = runtime["data"]["runtime"]["enforcedLimits"].as_array().cloned().unwrap_or_default();
    assert_eq!(limits.len(), 4, "cpu, memory, processes and disk: {runtime}");
    assert!(
        limits[3].as_str().is_some_and(|l| l.starts_with("disk: the work directory at most 10.0 GiB")),
        "{runtime}"
    );

    let id =
        launch(&app, "demo-alice", input("exit-three", "echo $GREETING; echo oops >&2; exit 3", 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["exitCode"].as_i64()),
        (Some("TERMINATED"), Some("FAILURE"), Some(3)),
        "{s}"
    );
    assert_eq!(s["statusInfo"], "exit 3");
    let log = logs(&s);
    assert!(log.contains("hello") && log.contains("oops"), "stdout and stderr are in the log: {log}");
    assert_eq!(
        path_of(&s),
        ["PENDING", "SCHEDULED", "PREPARING", "PULLING", "PREPARED", "CREATING", "RUNNING", "TERMINATED"],
        "the first session of the image runs its prepare step"
    );

    let id = launch(&app, "demo-alice", input("exit-zero", "python3 -c 'print(6*7)'", 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(
        (s["result"].as_str(), s["exitCode"].as_i64(), s["statusInfo"].as_str()),
        (Some("SUCCESS"), Some(0), Some("exit 0")),
        "{s}"
    );
    assert!(logs(&s).contains("42"), "{s}");
    assert!(!path_of(&s).contains(&"PULLING".to_owned()), "prepared once per machine: {s}");
}

async fn a_long_output_reaches_the_log_whole(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    // 30 000 lines, ~600 KB: more than one tick copies, and most of it after the end.
    let command = "i=0; while [ $i -lt 30000 ]; do echo \"line $i of the output\"; i=$((i+1)); done";
    let id = launch(&app, "demo-alice", input("chatty", command, 512, json!({}))).await;
    until(&app, &id, ended).await;
    let last = "query($id: ID!) { session(id: $id) { logs(tail: 3) } }";
    let s = app
        .wait_for("demo-alice", last, json!({"id": id}), |r| {
            r["data"]["session"]["logs"].as_array().is_some_and(|l| l.iter().any(|l| l == "line 29999 of the output"))
        })
        .await;
    assert!(s["data"]["session"]["logs"][2].as_str().is_some_and(|l| l.starts_with("session ended")), "{s}");
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    let uuid: uuid::Uuid = session_uuid(&id).parse().expect("uuid");
    let lines = entity::session_log::Entity::find()
        .filter(entity::session_log::Column::SessionId.eq(uuid))
        .filter(entity::session_log::Column::Line.like("line % of the output"))
        .count(&app.db)
        .await
        .expect("count");
    assert_eq!(lines, 30_000, "every line, once");
    let deadline = Instant::now() + Duration::from_secs(10);
    while machine.sessions().iter().any(|d| d.ends_with(uuid.to_string())) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!machine.sessions().iter().any(|d| d.ends_with(uuid.to_string())), "its directory goes once all is copied");
}

async fn output_the_database_cannot_store_is_kept_readable(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    // A NUL byte (PostgreSQL's text refuses it) and bytes that are not UTF-8.
    let id =
        launch(&app, "demo-alice", input("binary", "printf 'a\\000b\\n\\377c\\n'; echo after", 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!((s["status"].as_str(), s["exitCode"].as_i64()), (Some("TERMINATED"), Some(0)), "{s}");
    let log = logs(&s);
    assert!(log.contains("a\u{FFFD}b") && log.contains("\u{FFFD}c") && log.contains("after"), "{log:?}");
    // And the runtime goes on for the next session.
    let next = launch(&app, "demo-alice", input("after-binary", "echo fine", 512, json!({}))).await;
    assert!(logs(&until(&app, &next, ended).await).contains("fine"));
}

async fn a_memory_hog_is_killed_and_the_host_is_unharmed(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let hog = "python3 -c 'x = bytearray(1 << 30); print(\"survived\")'";
    let id = launch(&app, "demo-alice", input("memory-hog", hog, 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("FAILURE"), Some("OOM killed")),
        "{s}"
    );
    assert!(!logs(&s).contains("survived"), "{s}");
    let me = app.gql(Some("demo-alice"), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(me["data"]["viewer"]["user"]["email"], "alice@example.com", "the server is unharmed");
    assert_eq!(cgroups_left(&id).await, Vec::<PathBuf>::new(), "its cgroups are gone");
}

/// The cgroups of session `id` that still exist, once they had a few seconds to go.
pub(crate) async fn cgroups_left(id: &str) -> Vec<PathBuf> {
    let uuid = uuid::Uuid::parse_str(&session_uuid(id)).expect("a uuid");
    let dirs = sessiond::domain::runtime::local::limits::Enforcement::detect().dirs(uuid);
    for _ in 0..100 {
        if dirs.iter().all(|d| !d.exists()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    dirs.into_iter().filter(|d| d.exists()).collect()
}

async fn terminating_ends_every_process_within_the_grace_period(mut app: TestApp) {
    let machine = Machine::new();
    let grace = 1000;
    if !app.start_local_runtime(&machine.path(), grace, None).await {
        return;
    }
    // A child that ignores SIGTERM, and a grandchild in the background: all must go.
    let marker = format!(
        "{}",
        900_000 + (std::process::id() % 1000) * 10 + u32::from(app.backend == crate::support::Backend::Postgres)
    );
    let command = format!("trap '' TERM; sleep {marker} & sleep {marker}; wait");
    let id = launch(&app, "demo-alice", input("sleeper", &command, 512, json!({}))).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(&format!("sleep {marker}")).len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processes_with(&format!("sleep {marker}")).len(), 2, "both sleeps run");
    let asked = Instant::now();
    terminate(&app, &id).await;
    let s = until(&app, &id, ended).await;
    let took = asked.elapsed();
    assert_eq!(s["status"], "TERMINATED", "{s}");
    assert_eq!(s["statusInfo"], "user-requested", "{s}");
    assert!(took < Duration::from_millis(grace + 5000), "ended within the grace period and a tick: {took:?}");
    assert!(processes_with(&format!("sleep {marker}")).is_empty(), "no process of the session is left");
}

async fn a_session_past_its_lifetime_is_stopped(mut app: TestApp) {
    use sea_orm::ConnectionTrait;
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    app.db
        .execute_unprepared("UPDATE keypair_resource_policies SET max_session_lifetime_seconds = 1")
        .await
        .expect("a one-second lifetime");
    let id = launch(&app, "demo-alice", json!({
        "projectId": project("default/default"), "name": "short-lived", "image": "python:3.12", "type": "INTERACTIVE",
        "resourceGroup": "local", "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
    })).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(
        (s["status"].as_str(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("max_session_lifetime exceeded")),
        "{s}"
    );
    assert_eq!(path_of(&s).iter().rev().take(2).cloned().collect::<Vec<_>>(), ["TERMINATED", "TERMINATING"], "{s}");
}

async fn a_session_sees_nothing_of_the_host_or_other_sessions(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let secret = machine.dir.path().join("secret.txt");
    std::fs::write(&secret, "the host's secret").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let database = app.url.strip_prefix("sqlite://").map(|p| p.split('?').next().unwrap_or(p).to_owned());

    let other = launch(&app, "demo-bob", input("neighbour", "echo mine > note; sleep 31", 512, json!({}))).await;
    until_as(&app, "demo-bob", &other, |s| s["status"] == "RUNNING" || ended(s)).await;
    let neighbour = machine.path().join("sessions").join(session_uuid(&other)).join("work");
    let command = format!(
        "cat {secret} && echo LEAK-file || echo no-file
         cat {neighbour}/note && echo LEAK-neighbour || echo no-neighbour
         {db}
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 1)' 2>/dev/null && echo LEAK-net || echo no-net
         touch /usr/sessiond-probe 2>/dev/null && echo LEAK-root || echo read-only-root
         echo root: $(ls -A /)
         echo tmp: $(ls -A /tmp)
         echo home: $(ls -A /home)
         echo uid=$(id -u)",
        secret = secret.display(),
        neighbour = neighbour.display(),
        db = database.map(|d| format!("cat {d} >/dev/null && echo LEAK-db || echo no-db")).unwrap_or_else(|| "echo no-db".to_owned()),
    );
    let id = launch(&app, "demo-alice", input("prober", &command, 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    let log = logs(&s);
    for expected in ["no-file", "no-neighbour", "no-db", "no-net", "read-only-root", "uid=65534"] {
        assert!(log.contains(expected), "{expected}: {log}");
    }
    // The files above are under the host's /tmp, which the sandbox replaces: that they are
    // unreadable proves little alone. What the sandbox sees at all: the system directories
    // read-only, its own /proc, /dev, an empty /tmp, and its own work directory as home.
    let seen = |prefix: &str| {
        log.lines().find_map(|l| l.strip_prefix(prefix)).map(|l| l.split_whitespace().collect::<Vec<_>>())
    };
    let root = seen("root:").expect("the root's entries");
    for entry in &root {
        assert!(
            ["bin", "dev", "etc", "home", "lib", "lib32", "lib64", "proc", "sbin", "tmp", "usr"].contains(entry),
            "{entry} in /: {log}"
        );
    }
    assert_eq!(seen("tmp:"), Some(Vec::new()), "{log}");
    assert_eq!(seen("home:"), Some(vec!["work"]), "{log}");
    assert!(!log.contains("LEAK"), "{log}");
    // Seen from the host, a session's processes are not root's either when the server is:
    // they run as `nobody` (else as the server's own user).
    let server = host_uid(std::process::id());
    let expected = if server == Some(0) { Some(65534) } else { server };
    let sleeping = processes_with("sleep 31");
    assert!(!sleeping.is_empty(), "the neighbour still sleeps");
    for pid in sleeping {
        assert_eq!(host_uid(pid), expected, "process {pid} runs unprivileged on the host");
    }
    drop(listener);
}

fn host_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().nth(1)?.parse().ok()
}

async fn session_logs_streams_lines_printed_after_subscribing(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let command = "echo early; while [ ! -e go ]; do sleep 0.05; done; echo late-line; exit 0";
    let id = launch(&app, "demo-alice", input("talker", command, 512, json!({}))).await;
    until(&app, &id, |s| s["status"] == "RUNNING" && logs(s).contains("early")).await;
    let follow = "subscription($id: ID!, $tail: Int) { sessionLogs(sessionId: $id, tail: $tail) }";

    let mut bob = crate::support::ws::Ws::open(addr, "demo-bob").await;
    bob.subscribe("b", follow, json!({"id": id, "tail": 10})).await;
    let errors = bob.error_of("b").await;
    assert_eq!(
        errors[0]["extensions"]["code"], "NOT_FOUND",
        "another user's session does not exist for bob: {errors:?}"
    );

    let mut ws = crate::support::ws::Ws::open(addr, "demo-alice").await;
    ws.subscribe("1", follow, json!({"id": id, "tail": 1})).await;
    // The last line so far comes first: the subscription is live; only then does the
    // session print its next line.
    let first = ws.next_payload("1").await;
    assert!(first["data"]["sessionLogs"].is_string(), "{first}");
    let work = machine.path().join("sessions").join(session_uuid(&id)).join("work");
    std::fs::write(work.join("go"), b"").expect("signal the session");
    let mut seen = Vec::new();
    loop {
        let m = ws.recv().await;
        match m["type"].as_str() {
            Some("next") => seen.push(m["payload"]["data"]["sessionLogs"].as_str().unwrap_or_default().to_owned()),
            Some("complete") => break,
            _ => panic!("unexpected {m}"),
        }
    }
    assert!(seen.iter().any(|l| l == "late-line"), "{seen:?}");
    assert!(!seen.iter().any(|l| l == "early"), "only new lines after the tail: {seen:?}");
    assert!(seen.last().is_some_and(|l| l.contains("session ended: exit 0")), "ends after the last line: {seen:?}");

    // Once it has ended, a follower gets its tail and the feed completes (it waited for
    // lines that could not come before).
    let mut late = crate::support::ws::Ws::open(addr, "demo-alice").await;
    late.subscribe("2", follow, json!({"id": id, "tail": 2})).await;
    let mut tail = Vec::new();
    loop {
        let m = late.recv().await;
        match m["type"].as_str() {
            Some("next") => tail.push(m["payload"]["data"]["sessionLogs"].as_str().unwrap_or_default().to_owned()),
            Some("complete") => break,
            _ => panic!("unexpected {m}"),
        }
    }
    assert_eq!(tail.len(), 2, "{tail:?}");
    assert!(tail[1].contains("session ended: exit 0"), "{tail:?}");
}

/// Opens the terminal at `url` (a path) as `token`; the socket after `connection_ack`, or
/// the close code and reason. While it is open, no test counts the server's terminals.
pub(crate) async fn terminal(addr: std::net::SocketAddr, url: &str, token: &str) -> Result<Terminal, (u16, String)> {
    let guard = TERMINALS.read().await;
    open_terminal(addr, url, token).await.map(|ws| Terminal { ws, _counting: Some(guard) })
}

/// Opens a terminal as [`terminal`] does, for a test that holds [`count_terminals`].
pub(crate) async fn terminal_counted(
    addr: std::net::SocketAddr,
    url: &str,
    token: &str,
    _counting: &tokio::sync::RwLockWriteGuard<'static, ()>,
) -> Result<Terminal, (u16, String)> {
    open_terminal(addr, url, token).await.map(|ws| Terminal { ws, _counting: None })
}

/// Tests run side by side in one process, and the kernel hands a released pseudo-terminal's
/// number to the next one opened: a test that counts the server's descriptors of one
/// terminal holds this alone while every other test's terminals wait.
static TERMINALS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Waits until no other test has a terminal open and keeps new ones from opening.
pub(crate) async fn count_terminals() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    TERMINALS.write().await
}

async fn open_terminal(addr: std::net::SocketAddr, url: &str, token: &str) -> Result<Socket, (u16, String)> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}{url}")).await.expect("WebSocket handshake");
    let init = json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {token}")}, "cols": 100, "rows": 30});
    ws.send(Message::Text(init.to_string().into())).await.expect("send");
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("an answer") {
        Some(Ok(Message::Text(t))) if t.contains("connection_ack") => Ok(ws),
        Some(Ok(Message::Close(Some(frame)))) => Err((frame.code.into(), frame.reason.to_string())),
        other => panic!("unexpected {other:?}"),
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to a terminal.
#[derive(Debug)]
pub(crate) struct Terminal {
    ws: Socket,
    _counting: Option<tokio::sync::RwLockReadGuard<'static, ()>>,
}

impl std::ops::Deref for Terminal {
    type Target = Socket;
    fn deref(&self) -> &Socket {
        &self.ws
    }
}

impl std::ops::DerefMut for Terminal {
    fn deref_mut(&mut self) -> &mut Socket {
        &mut self.ws
    }
}

/// The `url` of session `id`'s terminal app, as its owner alice sees it.
pub(crate) async fn terminal_url(app: &TestApp, id: &str) -> String {
    let apps = app
        .gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { apps { name url } } }", json!({"id": id}))
        .await;
    apps["data"]["session"]["apps"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "terminal"))
        .and_then(|t| t["url"].as_str())
        .unwrap_or_else(|| panic!("a terminal with a url: {apps}"))
        .to_owned()
}

/// Sends `input` to the shell and reads its output until `done` holds for all of it (or
/// 20 s pass); all it read.
pub(crate) async fn type_and_read(ws: &mut Terminal, input: &[u8], done: impl Fn(&str) -> bool) -> String {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    ws.send(Message::Binary(input.to_vec().into())).await.expect("send");
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(&seen) && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => seen.push_str(&String::from_utf8_lossy(&b)),
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    seen
}

/// Types `exit` (as an `input` message) and returns the close code the terminal ends with.
pub(crate) async fn exit_shell(ws: &mut Terminal) -> Option<u16> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    ws.send(Message::Text(json!({"type": "input", "data": "exit\n"}).to_string().into())).await.expect("send");
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("closes") {
            Some(Ok(Message::Close(frame))) => break frame.map(|f| u16::from(f.code)),
            Some(Ok(_)) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn the_terminal_runs_a_shell_in_the_sandbox_for_its_owner_only(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let id = launch(&app, "demo-alice", json!({
        "projectId": project("default/default"), "name": "shell-here", "image": "python:3.12", "type": "INTERACTIVE",
        "resourceGroup": "local", "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
    })).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    let url = terminal_url(&app, &id).await;
    assert_eq!(url, format!("/sessions/{id}/terminal"));

    assert_eq!(
        terminal(addr, &url, "demo-bob").await.err().map(|e| e.0),
        Some(4404),
        "bob cannot open alice's terminal"
    );
    assert_eq!(terminal(addr, &url, "demo-admin").await.err().map(|e| e.0), Some(4404), "nor her administrator");
    // Who may not open it is not offered it: her administrator sees the app, no address.
    let apps = app
        .gql(Some("demo-admin"), "query($id: ID!) { session(id: $id) { apps { name url } } }", json!({"id": id}))
        .await;
    let shown = apps["data"]["session"]["apps"].as_array().unwrap_or_else(|| panic!("{apps}"));
    assert!(shown.iter().any(|a| a["name"] == "terminal" && a["url"].is_null()), "{apps}");
    assert_eq!(terminal(addr, &url, "not-a-token").await.err().map(|e| e.0), Some(4403));

    let mut ws = terminal(addr, &url, "demo-alice").await.expect("alice opens her terminal");
    let seen = type_and_read(&mut ws, b"echo $((6*7)); id -u; pwd\n", |seen| {
        seen.contains("42\r\n") && seen.contains(sessiond::domain::runtime::local::sandbox::HOME)
    })
    .await;
    assert!(seen.contains("42\r\n"), "{seen:?}");
    assert!(seen.contains("65534"), "the session's uid: {seen:?}");
    let closed = exit_shell(&mut ws).await;
    assert_eq!(closed, Some(1000), "the shell ended");
}

pub(crate) fn session_uuid(id: &str) -> String {
    sessiond::graphql::ids::decode(id).expect("a session id").1
}

db_tests!(
    a_batch_job_ends_with_its_real_exit_code_and_output,
    a_long_output_reaches_the_log_whole,
    output_the_database_cannot_store_is_kept_readable,
    a_memory_hog_is_killed_and_the_host_is_unharmed,
    terminating_ends_every_process_within_the_grace_period,
    a_session_past_its_lifetime_is_stopped,
    a_session_sees_nothing_of_the_host_or_other_sessions,
    session_logs_streams_lines_printed_after_subscribing,
    the_terminal_runs_a_shell_in_the_sandbox_for_its_owner_only,
);
