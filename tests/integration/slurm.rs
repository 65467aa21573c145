//! The Slurm engine on a real cluster (see `support::slurm`): two nodes, one with a GPU,
//! slurmrestd with a JWT. Each case declares the engine and a resource group `hpc` that
//! names it, then launches through the API as a user would. Skipped (with a NOTICE) where
//! Slurm cannot start, unless `SESSIOND_REQUIRE_SLURM=1`.

use std::time::Duration;

use serde_json::{Value, json};
use sessiond::domain::runtime::local::sandbox::HOME;

use crate::db_tests;
use crate::local_runtime::{ended, exit_shell, launch, logs, terminal, terminal_url, terminate, type_and_read, until};
use crate::support::slurm::{self, Cluster};
use crate::support::{TestApp, project};

pub(crate) const GROUP: &str = "hpc";

/// Declares the cluster as engine `cluster` running group `hpc` (open to the demo project
/// `default`) with `sessiond apply`'s code, starts the workers and the engines, and waits
/// until the group's two nodes are its agents.
pub(crate) async fn on_slurm(app: &mut TestApp, c: &Cluster, grace_ms: u64) {
    on_slurm_declaring(app, c, grace_ms, "").await;
}

/// [`on_slurm`], with more declarations (`extra`).
async fn on_slurm_declaring(app: &mut TestApp, c: &Cluster, grace_ms: u64, extra: &str) {
    let text = format!(
        "{extra}\n{}\n[engines.demo]\nkind = \"simulated\"\n[resource_groups.default]\nengine = \"demo\"\n\
         [resource_groups.{GROUP}]\nengine = \"cluster\"\n\
         [domains.default]\nlimits = {{ cpu = 48 }}\n[projects.\"default/default\"]\nresource_groups = [\"default\", \"{GROUP}\"]\n",
        c.engine_toml("cluster")
    );
    let source = sessiond::domain::directory::apply::Source { name: "slurm.toml".into(), text };
    let known = ["cpu", "mem", "cuda.device"].into_iter().map(String::from).collect();
    let declared = sessiond::domain::directory::apply::file::parse(&[source], &known).expect("a valid declaration");
    sessiond::domain::directory::apply::apply(
        &app.db,
        &declared,
        sessiond::domain::directory::apply::Options::default(),
    )
    .await
    .expect("applied");
    app.start_workers();
    app.start_engines(Duration::from_millis(grace_ms));
    app.wait_for("demo-root", AGENTS, json!({}), |r| agents(r).iter().filter(|a| a["alive"] == true).count() == 2)
        .await;
}

const AGENTS: &str = "{ configuration { resourceGroups { group { name } engine { name kind answering }
  agents { name alive schedulable capacity { slot amount } } } } }";

/// The agents of group `hpc` in a configuration answer.
fn agents(r: &Value) -> Vec<Value> {
    let groups = r["data"]["configuration"]["resourceGroups"].as_array().cloned().unwrap_or_default();
    groups
        .into_iter()
        .find(|g| g["group"]["name"] == GROUP)
        .map(|g| g["agents"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}

fn input(name: &str, kind: &str, command: Option<&str>, cpu: f64, extra: Value) -> Value {
    let mut input = json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12", "type": kind,
        "resourceGroup": GROUP,
        "resources": [{"slot": "cpu", "amount": cpu}, {"slot": "mem", "amount": 512_i64 << 20}],
    });
    if let Some(c) = command {
        input["startupCommand"] = json!(c);
    }
    if let (Some(i), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        i.extend(extra.clone());
    }
    input
}

const DETAIL: &str = "query($id: ID!) { session(id: $id) { status statusInfo result exitCode agent logs(tail: 200)
  statusTransitions { toStatus } } }";

async fn detail(app: &TestApp, id: &str) -> Value {
    app.gql(Some("demo-alice"), DETAIL, json!({"id": id})).await["data"]["session"].clone()
}

/// The Slurm job of a session, from `squeue`'s point of view.
pub(crate) fn job_of(c: &Cluster, id: &str) -> String {
    let uuid = sessiond::graphql::ids::decode(id).map(|(_, u)| u).unwrap_or_default();
    let out = c.scontrol(&["show", "jobs", "--oneliner"]).unwrap_or_default();
    out.lines()
        .find(|l| l.contains(&format!("Comment={}{uuid}", sessiond::domain::runtime::slurm::TAG)))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("JobId=")))
        .unwrap_or_default()
        .to_owned()
}

async fn the_nodes_are_agents_and_the_engines_say_what_runs_what(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let conf = app.gql(Some("demo-root"), AGENTS, json!({})).await;
    let agents = agents(&conf);
    let ids: Vec<&str> = agents.iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(ids, ["n1", "n2"], "{conf}");
    let gpu = |a: &Value| {
        a["capacity"].as_array().into_iter().flatten().any(|s| s["slot"] == "cuda.device" && s["amount"] == 1.0)
    };
    assert!(!gpu(&agents[0]) && gpu(&agents[1]), "n2 has the GPU gres: {conf}");
    let groups = conf["data"]["configuration"]["resourceGroups"].as_array().cloned().unwrap_or_default();
    let hpc = groups.iter().find(|g| g["group"]["name"] == GROUP).cloned().unwrap_or_default();
    assert_eq!(hpc["engine"], json!({"name": "cluster", "kind": "SLURM", "answering": true}), "{conf}");

    let runtime = app
        .gql(Some("demo-alice"), "{ runtime { engines { name kind resourceGroups answering reason } } }", json!({}))
        .await;
    let engines = runtime["data"]["runtime"]["engines"].as_array().cloned().unwrap_or_default();
    let cluster = engines.iter().find(|e| e["name"] == "cluster").unwrap_or_else(|| panic!("{runtime}"));
    assert_eq!((cluster["kind"].as_str(), cluster["answering"].as_bool()), (Some("SLURM"), Some(true)), "{runtime}");
    assert_eq!(cluster["resourceGroups"], json!([GROUP]));
    let demo = engines.iter().find(|e| e["name"] == "demo").unwrap_or_else(|| panic!("{runtime}"));
    assert_eq!(demo["kind"], "SIMULATED", "the demo's engine says it is simulated: {runtime}");
    let reason = cluster["reason"].as_str().unwrap_or("");
    assert!(reason.contains("terminals open with srun --overlap --pty"), "{runtime}");
}

async fn sessions_spread_over_both_nodes_and_a_gpu_session_lands_on_the_gpu_node(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let a = launch(&app, "demo-alice", input("spread-a", "INTERACTIVE", None, 2.0, json!({}))).await;
    let b = launch(&app, "demo-alice", input("spread-b", "INTERACTIVE", None, 2.0, json!({}))).await;
    let a_s = until(&app, &a, |s| s["status"] == "RUNNING" || ended(s)).await;
    let b_s = until(&app, &b, |s| s["status"] == "RUNNING" || ended(s)).await;
    let (na, nb) = (detail(&app, &a).await["agent"].clone(), detail(&app, &b).await["agent"].clone());
    assert_eq!((a_s["status"].as_str(), b_s["status"].as_str()), (Some("RUNNING"), Some("RUNNING")), "{a_s} {b_s}");
    assert_ne!(na, nb, "two sessions of 2 CPUs each take both nodes");
    terminate(&app, &a).await;
    terminate(&app, &b).await;
    for id in [&a, &b] {
        let s = until(&app, id, ended).await;
        assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("TERMINATED"), Some("SUCCESS")), "{s}");
        let job = c.scontrol(&["show", "job", &job_of(c, id)]).unwrap_or_default();
        assert!(!job.contains("JobState=RUNNING") && !job.contains("JobState=PENDING"), "its job is over: {job}");
    }
    let mut gpu = input("gpu-job", "BATCH", Some("echo gpus=$SLURM_JOB_GPUS"), 1.0, json!({}));
    gpu["resources"].as_array_mut().expect("resources").push(json!({"slot": "cuda.device", "amount": 1}));
    let g = launch(&app, "demo-alice", gpu).await;
    until(&app, &g, ended).await;
    let s = detail(&app, &g).await;
    assert_eq!(
        (s["status"].as_str(), s["agent"].as_str(), s["result"].as_str()),
        (Some("TERMINATED"), Some("n2"), Some("SUCCESS")),
        "{s}"
    );
    let text = logs(&s);
    assert!(text.contains("in sessiond's sandbox (Slurm job"), "in the sandbox, with its GPU: {text}");
    assert!(text.contains("gpus=0"), "Slurm's GPU index reaches the session: {text}");
}

async fn a_session_runs_in_the_sandbox_on_a_node_that_has_it(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    // The host's own home directory (the test's) is not in the sandbox.
    let host_home = std::env::var("HOME").unwrap_or_default();
    let command = format!(
        "echo at=$(pwd) home=$HOME; ls {host_home} >/dev/null 2>&1 && echo host-visible; ls -d /sys/fs/cgroup/* | wc -l; exit 4"
    );
    let id = launch(&app, "demo-alice", input("boxed", "BATCH", Some(&command), 1.0, json!({}))).await;
    until(&app, &id, ended).await;
    let s = detail(&app, &id).await;
    let text = logs(&s);
    assert_eq!((s["exitCode"].as_i64(), s["statusInfo"].as_str()), (Some(4), Some("exit 4")), "{s}");
    assert!(text.contains(&format!("at={HOME} home={HOME}")), "in the sandbox's work directory: {text}");
    assert!(!text.contains("host-visible"), "the host's home directory is not there: {text}");
    assert!(text.contains("in sessiond's sandbox (Slurm job"), "its log says where it runs: {text}");
    let uuid = sessiond::graphql::ids::decode(&id).map(|(_, u)| u).unwrap_or_default();
    // Removed once the session's end is committed: just after it shows.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.output_dir.join(&uuid).exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!c.output_dir.join(&uuid).exists(), "its directory goes with the session");
}

/// A folder on a path every node sees is mounted into a job's sandbox: what the session
/// writes there is in the folder.
async fn a_slurm_session_writes_into_a_folder_on_the_shared_path(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    let shared = crate::support::StorageDir::under(c.output_dir.parent().expect("the cluster's directory"));
    let storage = shared.path().to_owned();
    let extra = format!("[storage.shared]\npath = \"{}\"\nquota = \"1 GiB\"\n", storage.display());
    on_slurm_declaring(&mut app, c, 2000, &extra).await;
    let made = crate::folders::create(&app, "demo-alice", "results", "USER", None).await;
    let folder = made["data"]["createFolder"]["folder"]["id"].as_str().unwrap_or_else(|| panic!("{made}")).to_owned();
    let uuid = sessiond::graphql::ids::decode(&folder).map(|(_, u)| u).expect("a folder id");
    let command = "echo computed on a node > $HOME/out/result.txt";
    let mounts = json!({"mounts": [{"folder": folder, "path": "out"}]});
    let id = launch(&app, "demo-alice", input("to-folder", "BATCH", Some(command), 1.0, mounts)).await;
    until(&app, &id, ended).await;
    let s = detail(&app, &id).await;
    assert_eq!(s["result"], "SUCCESS", "{}", logs(&s));
    let written = std::fs::read_to_string(storage.join(&uuid).join("result.txt")).unwrap_or_default();
    assert_eq!(written, "computed on a node\n", "{}", logs(&s));
}

/// A sandboxed job's supervisor reports what the session uses: a busy core and 100 MB
/// show in its utilization, and stay once it ends.
async fn a_sandboxed_job_shows_what_it_uses(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let command = "python3 -c 'x = bytearray(100 << 20); import time; time.sleep(9)' & timeout 9 yes > /dev/null; wait";
    let id = launch(&app, "demo-alice", input("busy", "BATCH", Some(command), 1.0, json!({}))).await;
    let q = "query($id: ID!) { session(id: $id) { status utilization { slot current average maximum } } }";
    let maximum = |s: &Value, slot: &str| {
        s["utilization"]
            .as_array()
            .and_then(|u| u.iter().find(|u| u["slot"] == slot))
            .and_then(|u| u["maximum"].as_f64())
    };
    let busy = app
        .wait_for("demo-alice", q, json!({"id": id}), |r| {
            let s = &r["data"]["session"];
            ended(s) || (maximum(s, "cpu").is_some_and(|c| c > 0.3) && maximum(s, "mem").is_some_and(|m| m >= 100e6))
        })
        .await["data"]["session"]
        .clone();
    assert!(maximum(&busy, "cpu").is_some_and(|c| c > 0.3 && c < 1.3), "about a core: {busy}");
    assert!(maximum(&busy, "mem").is_some_and(|m| (100e6..512e6).contains(&m)), "100 MB, under its limit: {busy}");
    until(&app, &id, ended).await;
    let after = app.gql(Some("demo-alice"), q, json!({"id": id})).await["data"]["session"].clone();
    assert!(maximum(&after, "cpu") >= maximum(&busy, "cpu"), "kept after its end: {after}");
}

async fn an_outside_scancel_or_requeue_is_reflected(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let i = launch(&app, "demo-alice", input("shell", "INTERACTIVE", None, 1.0, json!({}))).await;
    let r = launch(&app, "demo-alice", input("requeued", "INTERACTIVE", None, 1.0, json!({}))).await;
    until(&app, &r, |s| s["status"] == "RUNNING").await;
    // An operator requeues a running session's job: the session ends (it runs once), and
    // its job does not run again.
    let requeued = job_of(c, &r);
    c.scontrol(&["requeue", &requeued]).expect("scontrol requeue");
    let s = until(&app, &r, ended).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("TERMINATED"), Some("FAILURE")), "{s}");
    let info = s["statusInfo"].as_str().unwrap_or("");
    assert!(info.contains(&format!("Slurm job {requeued} was requeued outside sessiond")), "{s}");
    let gone = || {
        let shown = c.scontrol(&["show", "job", &requeued]).unwrap_or_default();
        shown.is_empty() || shown.contains("JobState=CANCELLED")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !gone() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(gone(), "the requeued job is cancelled: {:?}", c.scontrol(&["show", "job", &requeued]));

    until(&app, &i, |s| s["status"] == "RUNNING").await;
    let job = job_of(c, &i);
    assert!(!job.is_empty());
    c.scancel(&[&job]).expect("scancel");
    let s = until(&app, &i, ended).await;
    assert_eq!(s["status"], "TERMINATED", "{s}");
    assert_eq!(s["result"], "FAILURE", "{s}");
    let info = s["statusInfo"].as_str().unwrap_or("");
    assert!(info.contains(&format!("Slurm job {job} was cancelled outside sessiond")), "{s}");
}

async fn nothing_is_lost_while_slurmrestd_is_down_and_sessiond_restarts(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let r = launch(&app, "demo-alice", input("long", "INTERACTIVE", None, 1.0, json!({}))).await;
    until(&app, &r, |s| s["status"] == "RUNNING").await;
    c.stop_restd();
    let q = "{ runtime { engines { name answering reason } } }";
    let down = app
        .wait_for("demo-alice", q, json!({}), |r| {
            r["data"]["runtime"]["engines"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["name"] == "cluster" && e["answering"] == false)
        })
        .await;
    assert!(down.to_string().contains("does not answer"), "{down}");
    let (_, _, metrics) = app.get("/metrics").await;
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(metrics.contains("engine_up{engine=\"cluster\",kind=\"slurm\"} 0"), "{metrics}");
    assert!(metrics.contains("engine_up{engine=\"demo\",kind=\"simulated\"} 1"), "{metrics}");
    let (status, _, _) = app.get("/readyz").await;
    assert_eq!(status, 200, "the database answers: ready");
    // Launched while Slurm is away: it waits, scheduled.
    let w = launch(&app, "demo-alice", input("waits", "BATCH", Some("echo late"), 1.0, json!({}))).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(detail(&app, &r).await["status"], "RUNNING", "a session keeps its status while Slurm is away");
    assert_eq!(detail(&app, &w).await["status"], "SCHEDULED");
    // sessiond restarts meanwhile.
    app.crash_workers();
    let mut app = app.restart().await;
    app.start_workers();
    app.start_engines(Duration::from_millis(2000));
    c.start_restd().expect("slurmrestd again");
    let s = until(&app, &w, ended).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("TERMINATED"), Some("SUCCESS")), "{s}");
    assert_eq!(logs(&s).matches("late").count(), 1, "submitted once: {s}");
    assert_eq!(detail(&app, &r).await["status"], "RUNNING", "the running session found its job again");
    let path: Vec<Value> = detail(&app, &r).await["statusTransitions"].as_array().cloned().unwrap_or_default();
    assert_eq!(path.iter().filter(|t| t["toStatus"] == "RUNNING").count(), 1, "nothing repeated");
    terminate(&app, &r).await;
    until(&app, &r, ended).await;
}

async fn a_slurmctld_restart_mid_session_loses_and_repeats_nothing(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let i = launch(&app, "demo-alice", input("stays", "INTERACTIVE", None, 1.0, json!({}))).await;
    let b = launch(&app, "demo-alice", input("spans", "BATCH", Some("sleep 4; echo done"), 1.0, json!({}))).await;
    until(&app, &i, |s| s["status"] == "RUNNING").await;
    until(&app, &b, |s| s["status"] == "RUNNING").await;
    c.restart_ctld().expect("slurmctld restarted");
    let s = until(&app, &b, ended).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("TERMINATED"), Some("SUCCESS")), "{s}");
    assert_eq!(logs(&s).matches("done").count(), 1, "{s}");
    let d = detail(&app, &i).await;
    assert_eq!(d["status"], "RUNNING", "{d}");
    let path = d["statusTransitions"].as_array().cloned().unwrap_or_default();
    assert_eq!(path.iter().filter(|t| t["toStatus"] == "RUNNING").count(), 1, "nothing repeated: {d}");
    terminate(&app, &i).await;
    until(&app, &i, ended).await;
}

async fn a_drained_node_takes_no_session(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    c.scontrol(&["update", "nodename=n1", "state=drain", "reason=maintenance"]).expect("drain n1");
    app.wait_for("demo-root", AGENTS, json!({}), |r| {
        agents(r).iter().any(|a| a["name"] == "n1" && a["schedulable"] == false)
    })
    .await;
    let ids = [
        launch(&app, "demo-alice", input("drain-1", "BATCH", Some("sleep 1"), 1.0, json!({}))).await,
        launch(&app, "demo-alice", input("drain-2", "BATCH", Some("sleep 1"), 1.0, json!({}))).await,
    ];
    for id in &ids {
        until(&app, id, ended).await;
        assert_eq!(detail(&app, id).await["agent"], "n2", "a drained node takes nothing");
    }
    // Both drained: a launch waits with a reason, then runs once a node is back.
    c.scontrol(&["update", "nodename=n2", "state=drain", "reason=maintenance"]).expect("drain n2");
    app.wait_for("demo-root", AGENTS, json!({}), |r| agents(r).iter().all(|a| a["schedulable"] == false)).await;
    let waits = launch(&app, "demo-alice", input("drain-3", "BATCH", Some("echo back"), 1.0, json!({}))).await;
    let q = "query($id: ID!) { session(id: $id) { status pendingReasons { code message } } }";
    let waiting = app
        .wait_for("demo-alice", q, json!({"id": waits}), |r| {
            r["data"]["session"]["pendingReasons"].as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    assert_eq!(waiting["data"]["session"]["status"], "PENDING", "{waiting}");
    assert_eq!(waiting["data"]["session"]["pendingReasons"][0]["code"], "NO_CAPACITY", "{waiting}");
    c.scontrol(&["update", "nodename=n1,n2", "state=resume"]).expect("resume");
    let s = until(&app, &waits, ended).await;
    assert_eq!((s["status"].as_str(), s["result"].as_str()), (Some("TERMINATED"), Some("SUCCESS")), "{s}");
}

async fn a_two_container_session_is_one_job_on_one_node(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    // One CPU per container: placed and counted on one node by sessiond, one job of two
    // tasks on that node by Slurm.
    let id = launch(&app, "demo-alice", input("pair", "INTERACTIVE", None, 1.0, json!({"clusterSize": 2}))).await;
    let s = until(&app, &id, |s| s["status"] == "RUNNING" || ended(s)).await;
    assert_eq!(s["status"], "RUNNING", "{s}");
    let job = c.scontrol(&["show", "job", &job_of(c, &id)]).unwrap_or_default();
    assert!(job.contains("NumNodes=1 ") && job.contains("NumTasks=2 "), "one job of two tasks on one node: {job}");
    let agent = detail(&app, &id).await["agent"].as_str().unwrap_or("").to_owned();
    assert!(
        job.contains(&format!("NodeList={agent}\n")) || job.contains(&format!("NodeList={agent} ")),
        "{agent}: {job}"
    );
    terminate(&app, &id).await;
    until(&app, &id, ended).await;
}

async fn a_session_waits_in_slurms_queue_behind_outside_jobs_with_slurms_reason(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    // Other users' jobs take every CPU of the partition: sessiond's admission passes (it
    // counts its own sessions), Slurm queues the job and says why.
    let outside: Vec<String> = ["n1", "n2"].iter().map(|n| c.occupy(n).expect("an outside job")).collect();
    let next = launch(&app, "demo-alice", input("queued", "BATCH", Some("echo after"), 1.0, json!({}))).await;
    let q = "query($id: ID!) { session(id: $id) { status queuePosition pendingReasons { code message } } }";
    let waiting = app
        .wait_for("demo-alice", q, json!({"id": next}), |r| {
            r["data"]["session"]["pendingReasons"].as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    let w = &waiting["data"]["session"];
    assert_eq!((w["status"].as_str(), w["queuePosition"].as_i64()), (Some("SCHEDULED"), Some(1)), "{waiting}");
    assert_eq!(w["pendingReasons"][0]["code"], "INSUFFICIENT_RESOURCES", "{waiting}");
    assert_eq!(w["pendingReasons"][0]["message"], "Slurm: Resources", "{waiting}");
    let ids: Vec<&str> = outside.iter().map(String::as_str).collect();
    c.scancel(&ids).expect("the outside jobs end");
    let s = until(&app, &next, ended).await;
    assert_eq!(s["result"], "SUCCESS", "{s}");
}

async fn an_interactive_session_opens_its_terminal_in_its_job(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    on_slurm(&mut app, c, 2000).await;
    let addr = app.serve().await;
    let id = launch(&app, "demo-alice", input("shell", "INTERACTIVE", None, 1.0, json!({}))).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    let url = terminal_url(&app, &id).await;
    assert_eq!(terminal(addr, &url, "demo-bob").await.err().map(|e| e.0), Some(4404), "bob cannot open it");
    let job = job_of(c, &id);
    let mut ws = terminal(addr, &url, "demo-alice").await.expect("alice opens her terminal");
    let want = format!("42 job={job}");
    let seen = type_and_read(&mut ws, b"echo $((6*7)) job=$SLURM_JOB_ID; id -un\n", |seen| {
        seen.contains(&want) && seen.contains(slurm::USER)
    })
    .await;
    assert!(seen.contains(&want), "a shell in the session's job: {seen:?}");
    assert!(seen.contains(slurm::USER), "as the jobs' user: {seen:?}");
    let closed = exit_shell(&mut ws).await;
    assert_eq!(closed, Some(1000), "the shell ended");
    assert_eq!(detail(&app, &id).await["status"], "RUNNING", "the session goes on without its terminal");
    terminate(&app, &id).await;
    until(&app, &id, ended).await;
}

/// An interactive session's web app, on a node: its job's supervisor relays it for the
/// server alone. Through the proxy its owner gets what the app serves, with the session's
/// status READY; a connection to the relay that does not know the session's secret gets
/// nothing past its greeting.
async fn a_sessions_web_app_opens_through_its_jobs_relay(mut app: TestApp) {
    let Some(c) = slurm::cluster() else { return };
    let _one = slurm::lock().await;
    c.cancel_all();
    let image = "[images.\"web:1\"]\ntypes = [\"INTERACTIVE\"]\napps = [\"terminal\", { name = \"web\", port = 8000, \
                 command = \"echo from-the-job > $HOME/hello.txt; exec python3 -m http.server 8000 --bind 127.0.0.1 \
                 --directory $HOME\" }]\n";
    on_slurm_declaring(&mut app, c, 2000, image).await;
    app.serve_apps();
    let apps = app.apps.expect("the apps' listener");
    let id = launch(&app, "demo-alice", input("web-app", "INTERACTIVE", None, 1.0, json!({"image": "web:1"}))).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    let uuid = sessiond::graphql::ids::decode(&id).map(|(_, u)| u).expect("a session id");
    let ready = app
        .wait_for(
            "demo-alice",
            "query($id: ID!) { session(id: $id) { apps { name status statusInfo } logs(tail: 20) } }",
            json!({"id": id}),
            |r| r["data"]["session"]["apps"][1]["status"] == "READY",
        )
        .await;
    assert_eq!(ready["data"]["session"]["apps"][1]["name"], "web", "{ready}");

    let url = crate::apps::open(&app, &id).await;
    let http = crate::apps::client();
    let opened = http.get(&url).send().await.expect("the link");
    assert_eq!(opened.status(), 303);
    let cookie =
        opened.headers()["set-cookie"].to_str().expect("a cookie").split(';').next().expect("a pair").to_owned();
    let hello = http.get(format!("http://{apps}/s/{uuid}/web/hello.txt")).header("cookie", &cookie).send().await;
    let hello = hello.expect("through the proxy and the relay");
    assert_eq!(hello.status(), 200);
    assert_eq!(hello.text().await.expect("a body"), "from-the-job\n");
    let bob = app.gql(Some("demo-bob"), crate::apps::OPEN, json!({"id": id, "name": "web"})).await;
    assert_eq!(crate::support::error_codes(&bob), ["NOT_FOUND"], "{bob}");

    // Another user of the cluster who finds the relay gets its greeting, and nothing more.
    let at: Value = serde_json::from_slice(
        &std::fs::read(c.output_dir.join(&uuid).join("relay.json")).expect("where the relay listens"),
    )
    .expect("an address");
    assert_eq!(at["host"], "127.0.0.1", "{at}");
    let port = at["port"].as_u64().and_then(|p| u16::try_from(p).ok()).expect("a port");
    for attempt in ["8000 0011 forged\n", "GET /hello.txt HTTP/1.0\r\n\r\n", "8000\n"] {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut guess = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("the relay answers");
        let mut greeting = Vec::new();
        while greeting.last() != Some(&b'\n') {
            greeting.push(guess.read_u8().await.expect("its greeting"));
        }
        assert!(greeting.starts_with(b"sessiond-relay 1 "), "{:?}", String::from_utf8_lossy(&greeting));
        guess.write_all(attempt.as_bytes()).await.expect("sent");
        // Closed with nothing said (or reset: what was sent past the line is not read).
        let mut more = Vec::new();
        tokio::time::timeout(Duration::from_secs(15), guess.read_to_end(&mut more)).await.expect("closed").ok();
        assert!(more.is_empty(), "{attempt:?}: {:?}", String::from_utf8_lossy(&more));
    }
    terminate(&app, &id).await;
    until(&app, &id, ended).await;
}

db_tests!(
    a_slurm_session_writes_into_a_folder_on_the_shared_path,
    a_sessions_web_app_opens_through_its_jobs_relay,
    a_sandboxed_job_shows_what_it_uses,
    an_interactive_session_opens_its_terminal_in_its_job,
    a_session_runs_in_the_sandbox_on_a_node_that_has_it,
    the_nodes_are_agents_and_the_engines_say_what_runs_what,
    sessions_spread_over_both_nodes_and_a_gpu_session_lands_on_the_gpu_node,
    an_outside_scancel_or_requeue_is_reflected,
    nothing_is_lost_while_slurmrestd_is_down_and_sessiond_restarts,
    a_drained_node_takes_no_session,
    a_slurmctld_restart_mid_session_loses_and_repeats_nothing,
    a_two_container_session_is_one_job_on_one_node,
    a_session_waits_in_slurms_queue_behind_outside_jobs_with_slurms_reason,
);
