//! One conformance suite for every engine: the same cases, asked through the API as a user
//! would, of the simulated engine, the local runtime (a real sandbox on this machine) and
//! Slurm (a real cluster), on both databases, with the same assertions.
//!
//! The simulated engine runs nothing: each case's environment says what running gave
//! (`SESSIOND_SIM_OUTPUT`, `SESSIOND_SIM_EXIT`, `SESSIOND_SIM_FAIL`, `SESSIOND_SIM_VANISH`;
//! see `runtime::simulated`), and the real engines pass those variables to the session
//! unread. What differs is only how a case makes a job vanish: the local runtime's
//! supervisor is killed, Slurm's controller restarts without its saved jobs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::local_runtime::{Machine, ended, launch, logs, terminate, until};
use crate::support::slurm::{self, Cluster};
use crate::support::{Backend, TestApp, project};

/// How long a stopped session has before it is killed.
const GRACE_MS: u64 = 1500;

/// An image whose prepare step fails: its sessions fail to start on the real engines.
const DECLARATION: &str = "[images.\"broken:1\"]\ntypes = [\"INTERACTIVE\", \"BATCH\"]\n\
                           prepare = \"echo preparing; exit 7\"\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Simulated,
    Local,
    Slurm,
}

/// An app whose sessions of `group` the engine runs.
struct On {
    app: TestApp,
    engine: Engine,
    group: &'static str,
    machine: Option<Machine>,
    cluster: Option<&'static Cluster>,
    _one: Option<tokio::sync::MutexGuard<'static, ()>>,
}

async fn declare(app: &TestApp, text: &str) {
    let source = sessiond::domain::directory::apply::Source { name: "conformance.toml".into(), text: text.to_owned() };
    let known = ["cpu", "mem", "cuda.device"].into_iter().map(String::from).collect();
    let declared = sessiond::domain::directory::apply::file::parse(&[source], &known).expect("a valid declaration");
    sessiond::domain::directory::apply::apply(
        &app.db,
        &declared,
        sessiond::domain::directory::apply::Options::default(),
    )
    .await
    .expect("applied");
}

impl On {
    /// `None` (after a NOTICE) where the engine cannot run here and is not required.
    async fn start(engine: Engine, app: TestApp) -> Option<On> {
        declare(&app, DECLARATION).await;
        let mut on = On { app, engine, group: "default", machine: None, cluster: None, _one: None };
        match engine {
            Engine::Simulated => on.app.start_workers(),
            Engine::Local => {
                let machine = Machine::new();
                if !on.app.start_local_runtime(&machine.path(), GRACE_MS, None).await {
                    return None;
                }
                on.machine = Some(machine);
                on.group = "local";
            }
            Engine::Slurm => {
                let c = slurm::cluster()?;
                on._one = Some(slurm::lock().await);
                c.cancel_all();
                crate::slurm::on_slurm(&mut on.app, c, GRACE_MS).await;
                on.cluster = Some(c);
                on.group = crate::slurm::GROUP;
            }
        }
        Some(on)
    }

    /// A launch input of this engine's group: 1 CPU, 512 MiB.
    fn input(&self, name: &str, kind: &str, image: &str, command: Option<&str>, extra: Value) -> Value {
        let mut input = json!({
            "projectId": project("default/default"), "name": name, "image": image, "type": kind,
            "resourceGroup": self.group,
            "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
        });
        if let Some(c) = command {
            input["startupCommand"] = json!(c);
        }
        if let (Some(i), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
            i.extend(extra.clone());
        }
        input
    }

    async fn launch(&self, input: Value) -> String {
        launch(&self.app, "demo-alice", input).await
    }

    async fn detail(&self, id: &str) -> Value {
        let q = "query($id: ID!) { session(id: $id) { status statusInfo result exitCode logs(tail: 200)
          statusTransitions { toStatus } schedulingHistory { edges { node { errorCode } } } } }";
        self.app.gql(Some("demo-alice"), q, json!({"id": id})).await["data"]["session"].clone()
    }

    /// sessiond crashes (its workers stop at once) and starts again on the same database.
    async fn restart(&mut self) {
        self.app.crash_workers();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut app = self.app.restart().await;
        match self.engine {
            Engine::Simulated => app.start_workers(),
            Engine::Local => {
                let dir = self.machine.as_ref().map(Machine::path).expect("the machine");
                assert!(app.start_local_runtime(&dir, GRACE_MS, None).await, "the local runtime again");
            }
            Engine::Slurm => {
                app.start_workers();
                app.start_engines(Duration::from_millis(GRACE_MS));
            }
        }
        self.app = app;
    }

    /// The job of running session `id` disappears from under the engine.
    async fn vanish(&self, id: &str) {
        match self.engine {
            Engine::Simulated => {} // its SESSIOND_SIM_VANISH
            Engine::Local => {
                let uuid = crate::local_runtime::session_uuid(id);
                let dir = self.machine.as_ref().map(Machine::path).expect("the machine");
                let state = std::fs::read_to_string(dir.join("sessions").join(uuid).join("state.json"))
                    .expect("the session's state");
                let state: Value = serde_json::from_str(&state).expect("state.json");
                for pid in [&state["supervisor"]["pid"], &state["child"]["pid"]].into_iter().filter_map(Value::as_i64) {
                    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid"));
                    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).ok();
                }
            }
            Engine::Slurm => self.cluster.expect("the cluster").forget_jobs().expect("slurmctld without its jobs"),
        }
    }

    /// Nothing of ended session `id` runs any more: no process, no job.
    async fn nothing_left(&self, id: &str) {
        match self.engine {
            Engine::Simulated => {}
            Engine::Local => {
                let left = crate::local_runtime::cgroups_left(id).await;
                assert!(left.is_empty(), "no cgroup of the session is left: {left:?}");
            }
            Engine::Slurm => {
                let c = self.cluster.expect("the cluster");
                let job = crate::slurm::job_of(c, id);
                let shown = c.scontrol(&["show", "job", &job]).unwrap_or_default();
                assert!(
                    !shown.contains("JobState=RUNNING") && !shown.contains("JobState=PENDING"),
                    "its job is over: {shown}"
                );
            }
        }
    }
}

fn path_of(s: &Value) -> Vec<&str> {
    s["statusTransitions"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["toStatus"].as_str()).collect())
        .unwrap_or_default()
}

fn sim(vars: &[(&str, &str)]) -> Value {
    json!({"environment": vars.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>()})
}

async fn a_batch_session_ends_with_its_exit_code_and_its_output_in_order(on: On) {
    let extra = sim(&[("SESSIOND_SIM_OUTPUT", "one\ntwo"), ("SESSIOND_SIM_EXIT", "3")]);
    let id = on.launch(on.input("exit3", "BATCH", "python:3.12", Some("echo one; echo two >&2; exit 3"), extra)).await;
    until(&on.app, &id, ended).await;
    let s = on.detail(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["exitCode"].as_i64(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("FAILURE"), Some(3), Some("exit 3")),
        "{s}"
    );
    let text = logs(&s);
    let (one, two, end) = (text.find("one"), text.find("two"), text.find("session ended: exit 3"));
    assert!(one.is_some() && one < two && two < end, "output in order, then the end: {text}");
    assert_eq!(path_of(&s).iter().filter(|t| **t == "RUNNING").count(), 1, "{s}");
}

async fn a_batch_session_over_its_timeout_ends_with_124(on: On) {
    let extra = json!({"batchTimeoutSeconds": 1, "environment": [{"name": "SESSIOND_SIM_OUTPUT", "value": "started"}]});
    let id = on.launch(on.input("slow", "BATCH", "python:3.12", Some("echo started; sleep 120"), extra)).await;
    until(&on.app, &id, ended).await;
    let s = on.detail(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["exitCode"].as_i64(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("FAILURE"), Some(124), Some("batch timeout")),
        "{s}"
    );
    assert!(logs(&s).contains("started"), "{s}");
    on.nothing_left(&id).await;
}

async fn terminate_stops_even_what_ignores_sigterm_after_the_grace(on: On) {
    let command = "trap '' TERM; echo ready; sleep 600 & wait; sleep 600";
    let id = on.launch(on.input("stubborn", "BATCH", "python:3.12", Some(command), json!({}))).await;
    until(&on.app, &id, |s| s["status"] == "RUNNING").await;
    terminate(&on.app, &id).await;
    until(&on.app, &id, ended).await;
    let s = on.detail(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["result"].as_str(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some("FAILURE"), Some("user-requested")),
        "a batch job stopped before it finished failed: {s}"
    );
    assert_eq!(path_of(&s).iter().rev().take(2).copied().collect::<Vec<_>>(), ["TERMINATED", "TERMINATING"], "{s}");
    on.nothing_left(&id).await;
    // An interactive session ends as asked.
    let i = on.launch(on.input("shell", "INTERACTIVE", "python:3.12", None, json!({}))).await;
    until(&on.app, &i, |s| s["status"] == "RUNNING").await;
    terminate(&on.app, &i).await;
    until(&on.app, &i, ended).await;
    let s = on.detail(&i).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("TERMINATED"), Some("SUCCESS")), "{s}");
}

async fn a_restart_of_sessiond_mid_session_loses_and_repeats_nothing(mut on: On) {
    let extra = sim(&[("SESSIOND_SIM_OUTPUT", "done"), ("SESSIOND_SIM_EXIT", "5")]);
    let id = on.launch(on.input("outlives", "BATCH", "python:3.12", Some("sleep 3; echo done; exit 5"), extra)).await;
    let i = on.launch(on.input("stays", "INTERACTIVE", "python:3.12", None, json!({}))).await;
    until(&on.app, &id, |s| s["status"] == "RUNNING").await;
    until(&on.app, &i, |s| s["status"] == "RUNNING").await;
    on.restart().await;
    until(&on.app, &id, ended).await;
    let s = on.detail(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["exitCode"].as_i64(), s["statusInfo"].as_str()),
        (Some("TERMINATED"), Some(5), Some("exit 5")),
        "{s}"
    );
    assert_eq!(logs(&s).matches("done").count(), 1, "its output once: {s}");
    let d = on.detail(&i).await;
    assert_eq!(d["status"], "RUNNING", "{d}");
    assert_eq!(path_of(&d).iter().filter(|t| **t == "RUNNING").count(), 1, "nothing repeated: {d}");
    terminate(&on.app, &i).await;
    until(&on.app, &i, ended).await;
}

async fn a_job_that_vanished_is_an_error_with_its_reason(on: On) {
    let extra = sim(&[("SESSIOND_SIM_VANISH", "1")]);
    let id = on.launch(on.input("gone", "INTERACTIVE", "python:3.12", None, extra)).await;
    until(&on.app, &id, |s| s["status"] == "RUNNING" || ended(s)).await;
    on.vanish(&id).await;
    until(&on.app, &id, ended).await;
    let s = on.detail(&id).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("ERROR"), Some("FAILURE")), "{s}");
    let info = s["statusInfo"].as_str().unwrap_or("");
    assert!(info.contains("vanished"), "the reason says so: {s}");
    on.nothing_left(&id).await;
}

async fn a_start_that_fails_is_an_error_recorded_as_start_failed(on: On) {
    let extra = sim(&[("SESSIOND_SIM_FAIL", "PULLING")]);
    let id = on.launch(on.input("broken", "BATCH", "broken:1", Some("echo never"), extra)).await;
    until(&on.app, &id, ended).await;
    let s = on.detail(&id).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("ERROR"), Some("FAILURE")), "{s}");
    assert!(s["statusInfo"].as_str().unwrap_or("").starts_with("failed to start: "), "{s}");
    let codes: Vec<&str> = s["schedulingHistory"]["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["node"]["errorCode"].as_str())
        .collect();
    assert!(codes.contains(&"START_FAILED"), "{s}");
    assert!(!logs(&s).contains("never"), "the command never ran: {s}");
}

/// Each case, on each engine, on each database.
macro_rules! conformance {
    ($($case:ident),+ $(,)?) => {$(
        mod $case {
            use super::{Backend, Engine, On, TestApp};
            async fn run(engine: Engine, backend: Backend) {
                let Some(app) = TestApp::start(backend).await else { return };
                if let Some(on) = On::start(engine, app).await {
                    super::$case(on).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn simulated_sqlite() { run(Engine::Simulated, Backend::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn simulated_postgres() { run(Engine::Simulated, Backend::Postgres).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local_sqlite() { run(Engine::Local, Backend::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local_postgres() { run(Engine::Local, Backend::Postgres).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn slurm_sqlite() { run(Engine::Slurm, Backend::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn slurm_postgres() { run(Engine::Slurm, Backend::Postgres).await }
        }
    )+};
}

conformance!(
    a_batch_session_ends_with_its_exit_code_and_its_output_in_order,
    a_batch_session_over_its_timeout_ends_with_124,
    terminate_stops_even_what_ignores_sigterm_after_the_grace,
    a_restart_of_sessiond_mid_session_loses_and_repeats_nothing,
    a_job_that_vanished_is_an_error_with_its_reason,
    a_start_that_fails_is_an_error_recorded_as_start_failed,
);
