//! The local runtime's sandbox at its edges: the work directory's disk limit, the image's
//! prepare step, a sandbox that fails while setting up, the terminal's shell confined as the
//! session's processes are, a dropped terminal that lets everything go (under `nohup` too),
//! each user's share of terminals, a revoked token's terminal, and cgroups removed after a
//! forced end.
//! Skipped where no sandbox can start, unless `SESSIOND_REQUIRE_SANDBOX=1`.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use sessiond::config::{HttpLimits, ShareLimits};

use crate::db_tests;
use crate::local_runtime::{
    Machine, cgroups_left, count_terminals, ended, input, launch, logs, processes_with, terminal, terminal_counted,
    until,
};
use crate::support::{TestApp, project};

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends `command` to the terminal and reads its output until it is done (10 s at most):
/// a marker the terminal's echo of the command does not hold.
async fn run_in(ws: &mut Socket, command: &str) -> String {
    let end = "END-42\r\n";
    ws.send(Message::Binary(format!("{command}; echo END-$((6*7))\n").into_bytes().into())).await.expect("send");
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains(end) && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => seen.push_str(&String::from_utf8_lossy(&b)),
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    assert!(seen.contains(end), "{seen:?}");
    seen
}

fn interactive(name: &str) -> Value {
    json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12", "type": "INTERACTIVE",
        "resourceGroup": "local", "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
    })
}

/// The path of the terminal of interactive session `id`, once it runs.
async fn terminal_url(app: &TestApp, id: &str) -> String {
    until(app, id, |s| s["status"] == "RUNNING").await;
    format!("/sessions/{id}/terminal")
}

/// Finding: a session wrote 3.1 GB onto the host's disk. Now no file may be larger than
/// the work directory's limit, and a session whose files pass it together is ended.
async fn the_work_directory_holds_at_most_its_limit(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime_with(&machine.path(), 500, None, 16 << 20).await {
        return;
    }
    let runtime = app.gql(Some("demo-alice"), "{ runtime { enforcedLimits } }", json!({})).await;
    assert!(runtime.to_string().contains("disk: the work directory at most 16 MiB"), "{runtime}");
    let one_file = "dd if=/dev/zero of=big bs=1M count=64 2>/dev/null; s=$?; echo size $(stat -c %s big); exit $s";
    let id = launch(&app, "demo-alice", input("one-big-file", one_file, 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert!(logs(&s).contains(&format!("size {}", 16 << 20)), "cut at the limit: {s}");
    assert_eq!(s["exitCode"], 128 + 25, "the writer got SIGXFSZ: {s}");
    let many = "for i in 1 2 3 4 5 6; do head -c 4000000 /dev/zero > f$i; done; echo written; sleep 30";
    let started = Instant::now();
    let id = launch(&app, "demo-alice", input("many-files", many, 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("FAILURE"), Some("disk limit exceeded")),
        "{s}"
    );
    assert!(started.elapsed() < Duration::from_secs(25), "ended by the watchdog, not by its own end");
    assert!(
        runtime.to_string().contains("counting the files its processes hold open after deleting them"),
        "{runtime}"
    );
    // Finding D38: files deleted while held open took 600 MiB past a 190 MiB limit. They
    // count: 24 MB in six files, each held open and deleted, and nothing left in the tree.
    let hidden = "for i in 3 4 5 6 7 8; do eval \"exec $i>f$i\"; head -c 4000000 /dev/zero >&$i; rm f$i; done; \
                  echo written $(ls -A | wc -l); sleep 30";
    let started = Instant::now();
    let id = launch(&app, "demo-alice", input("deleted-files", hidden, 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert!(logs(&s).contains("written 0"), "the tree is empty: {s}");
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("FAILURE"), Some("disk limit exceeded")),
        "{s}"
    );
    assert!(started.elapsed() < Duration::from_secs(25), "ended by the watchdog, not by its own end");
}

/// Finding: an image's prepare step ran with the launching user's environment. Now it
/// gets the image's variables only, in an empty directory of its own.
async fn the_prepare_step_gets_the_image_environment_only(mut app: TestApp) {
    let machine = Machine::new();
    let images = "[images.\"python:3.12\"]\nenv = { GREETING = \"hello\" }\n\
                  prepare = \"echo prepare-sees: $GREETING $SECRET $http_proxy; echo prepare-files: $(ls -A | wc -l); touch left-by-prepare\"\n";
    if !app.start_local_runtime(&machine.path(), 500, Some(images)).await {
        return;
    }
    let env =
        json!({"environment": [{"name": "SECRET", "value": "s3cr3t"}, {"name": "http_proxy", "value": "http://evil"}]});
    let command = "touch mine; echo session-sees: $GREETING $SECRET; echo session-files: $(ls -A)";
    let id = launch(&app, "demo-alice", input("prepare-env", command, 512, env)).await;
    let s = until(&app, &id, ended).await;
    let text = logs(&s);
    assert!(text.contains("prepare-sees: hello\n"), "the image's variables only: {text}");
    assert!(!text.contains("s3cr3t") || text.contains("session-sees: hello s3cr3t"), "{text}");
    assert_eq!(text.matches("s3cr3t").count(), 1, "only the session sees its variables: {text}");
    assert!(!text.contains("evil"), "{text}");
    assert!(text.contains("prepare-files: 0"), "an empty directory: {text}");
    assert!(text.contains("session-files: mine\n") || text.ends_with("session-files: mine"), "{text}");
}

/// Finding: a sandbox that failed while setting up ended TERMINATED "exit 1". It is ERROR.
async fn a_sandbox_that_fails_while_setting_up_is_an_error(mut app: TestApp) {
    let machine = Machine::new();
    let empty = tempfile::tempdir().expect("an empty root");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(empty.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let images = format!("[images.\"python:3.12\"]\nroot = \"{}\"\n", empty.path().display());
    if !app.start_local_runtime(&machine.path(), 500, Some(&images)).await {
        return;
    }
    let id = launch(&app, "demo-alice", input("no-shell-inside", "true", 512, json!({}))).await;
    let s = until(&app, &id, ended).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("ERROR"), Some("FAILURE")), "{s}");
    assert!(s["statusInfo"].as_str().is_some_and(|i| i.contains("failed while setting up")), "{s}");
}

/// The lines of `/proc/self/status` that say how a process is confined.
fn confinement(text: &str) -> Vec<String> {
    let keys = ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:", "NoNewPrivs:", "Seccomp:"];
    // A terminal's line may start with the prompt.
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| keys.iter().find_map(|k| l.find(k).map(|i| l[i..].trim().replace('\t', " "))))
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

/// Finding: the terminal's shell had a full bounding set, no `no_new_privs`, the host's
/// cgroup namespace. It is confined exactly as the session's own processes are, and holds
/// nothing of the server's.
async fn the_terminal_shell_is_confined_as_the_session_is(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let look = "grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; echo cgroup-ns $(readlink /proc/self/ns/cgroup) init $(readlink /proc/1/ns/cgroup); echo fds: $(ls /proc/self/fd)";
    let batch = launch(&app, "demo-alice", input("confined", look, 512, json!({}))).await;
    let session = logs(&until(&app, &batch, ended).await);
    let id = launch(&app, "demo-alice", interactive("confined-shell")).await;
    let url = terminal_url(&app, &id).await;
    let mut ws = terminal(addr, &url, "demo-alice").await.expect("a terminal");
    let shell = run_in(&mut ws, look).await;
    let expected = confinement(&session);
    assert_eq!(expected.len(), 7, "{session}");
    assert!(expected.contains(&"CapBnd: 0000000000000000".to_owned()), "{session}");
    assert!(expected.contains(&"NoNewPrivs: 1".to_owned()), "{session}");
    assert_eq!(confinement(&shell), expected, "the shell is confined as the session is:\n{shell}");
    let ns = shell.lines().find(|l| l.starts_with("cgroup-ns")).expect("the namespaces");
    let parts: Vec<&str> = ns.split_whitespace().collect();
    assert_eq!(parts[1], parts[3], "the sandbox's cgroup namespace: {ns}");
    let fds = shell.lines().find(|l| l.starts_with("fds:")).expect("the descriptors");
    assert_eq!(fds.trim(), "fds: 0 1 2 3", "the terminal and ls's own directory only: {fds}");
}

/// The server's own descriptors on the master side of pseudo-terminal `index`.
fn pty_held(index: u32) -> usize {
    std::fs::read_dir("/proc/self/fdinfo")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path()).is_ok_and(|t| {
                t.lines().any(|l| l.strip_prefix("tty-index:").is_some_and(|n| n.trim() == index.to_string()))
            })
        })
        .count()
}

/// The index of the terminal the shell of `ws` runs on (`/dev/pts/<index>`).
async fn pty_index(ws: &mut Socket) -> u32 {
    let out = run_in(ws, "stat -L -c 'pts-%t-%T' /proc/self/fd/0").await;
    // The line of the answer, not the terminal's echo of the command.
    let parts: Vec<u32> = out
        .lines()
        .filter_map(|l| l.find("pts-").map(|i| &l[i..]))
        .find_map(|l| {
            l.trim().split('-').skip(1).map(|h| u32::from_str_radix(h, 16).ok()).collect::<Option<Vec<u32>>>()
        })
        .unwrap_or_else(|| panic!("{out:?}"));
    (parts[0] - 136) * 256 + parts[1]
}

/// Finding: a dropped terminal whose shell left a background job kept a thread and a pty
/// until the session ended, and nothing bounded a user's terminals. Now a dropped terminal
/// releases its pty at once and hangs its shell up (a job started to outlive it stays), and
/// a user opens a few terminals at most.
async fn a_dropped_terminal_lets_everything_go(app: TestApp) {
    if std::env::var_os(UNDER_NOHUP).is_some() {
        let ignored = sessiond::domain::runtime::local::signal::ignored();
        assert!(ignored.contains(&(nix::sys::signal::SIGHUP as i32)), "this run ignores SIGHUP, as under nohup");
    }
    let machine = Machine::new();
    let limits = HttpLimits {
        shares: ShareLimits { max_terminals_per_user: 2, ..ShareLimits::default() },
        ..HttpLimits::default()
    };
    let mut app = app.reopen_with(limits).await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let id = launch(&app, "demo-alice", interactive("dropped")).await;
    let url = terminal_url(&app, &id).await;
    let counting = count_terminals().await;
    let mut ws = terminal_counted(addr, &url, "demo-alice", &counting).await.expect("a terminal");
    let index = pty_index(&mut ws).await;
    // Durations of this run only: tests run side by side.
    let unique = uuid::Uuid::new_v4().as_u128() % 1_000_000;
    let (job, detached) = (format!("sleep 1001.{unique}"), format!("sleep 1002.{unique}"));
    run_in(&mut ws, &format!("{job} & setsid sh -c '{detached}' </dev/null >/dev/null 2>&1 & true")).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_with(&detached).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processes_with(&job).len(), 1);
    assert!(pty_held(index) > 0, "the server holds the terminal");
    drop(ws); // the connection goes away, no close frame
    let deadline = Instant::now() + Duration::from_secs(10);
    while (pty_held(index) > 0 || !processes_with(&job).is_empty()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pty_held(index), 0, "the pty is released");
    assert_eq!(processes_with(&job), Vec::<u32>::new(), "the shell's job got its hang-up");
    assert_eq!(processes_with(&detached).len(), 1, "a process detached on purpose stays");
    // Two terminals per user here: a third is refused, and one closed frees its place.
    let mut first = terminal_counted(addr, &url, "demo-alice", &counting).await.expect("one");
    let _second = terminal_counted(addr, &url, "demo-alice", &counting).await.expect("two");
    let refused = terminal_counted(addr, &url, "demo-alice", &counting).await.expect_err("a third is refused");
    assert_eq!(refused.0, 1013, "{refused:?}");
    assert!(refused.1.contains("at most 2 open terminals"), "{refused:?}");
    first.close(None).await.expect("close");
    let mut reopened = None;
    for _ in 0..100 {
        if let Ok(ws) = terminal_counted(addr, &url, "demo-alice", &counting).await {
            reopened = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reopened.is_some(), "a closed terminal frees its place");
}

/// Set in the run of this test program that [`a_server_under_nohup_still_hangs_terminals_up`]
/// starts.
const UNDER_NOHUP: &str = "SESSIOND_TEST_UNDER_NOHUP";

/// Finding: a signal ignored when the server started (SIGHUP under `nohup`) stayed ignored
/// in every session's processes: a dropped terminal left the shell's jobs running. The
/// dropped terminal again, in a run of this test program that ignores SIGHUP.
#[test]
fn a_server_under_nohup_still_hangs_terminals_up() {
    if std::env::var_os(UNDER_NOHUP).is_some() {
        return;
    }
    let out = std::process::Command::new("env")
        .arg("--ignore-signal=HUP")
        .arg(std::env::current_exe().expect("this test program"))
        .args(["sandbox_edges::a_dropped_terminal_lets_everything_go::sqlite", "--exact", "--nocapture"])
        .env(UNDER_NOHUP, "1")
        .output()
        .expect("the test program runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Finding: a terminal outlived its token's revocation. It is closed with 4403.
async fn a_revoked_tokens_terminal_is_closed(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let (token, access_key) =
        sessiond::domain::directory::auth::create_token(&app.db, "alice@example.com", None).await.expect("a token");
    let id = launch(&app, &token, interactive("revoked-terminal")).await;
    let url = terminal_url(&app, &id).await;
    let mut ws = terminal(addr, &url, &token).await.expect("a terminal");
    run_in(&mut ws, "true").await;
    assert!(sessiond::domain::directory::auth::revoke_token(&app.db, &access_key).await.expect("revoke"));
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("closed within seconds") {
            Some(Ok(Message::Close(frame))) => break frame.map(|f| u16::from(f.code)),
            Some(Ok(_)) => continue,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(closed, Some(4403));
    drop(ws);
    assert_eq!(terminal(addr, &url, &token).await.err().map(|e| e.0), Some(4403), "and cannot open again");
}

/// Finding: empty cgroups stayed after a forced end. They go.
async fn a_forced_end_leaves_no_cgroup(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let id = launch(&app, "demo-alice", interactive("forced")).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    assert_eq!(crate::support::force_terminate(&app, "demo-alice", &id).await, "TERMINATED");
    assert_eq!(cgroups_left(&id).await, Vec::<std::path::PathBuf>::new());
}

db_tests!(
    the_work_directory_holds_at_most_its_limit,
    the_prepare_step_gets_the_image_environment_only,
    a_sandbox_that_fails_while_setting_up_is_an_error,
    the_terminal_shell_is_confined_as_the_session_is,
    a_dropped_terminal_lets_everything_go,
    a_revoked_tokens_terminal_is_closed,
    a_forced_end_leaves_no_cgroup,
);
