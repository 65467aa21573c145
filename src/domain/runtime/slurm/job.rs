//! A session as a Slurm job: what is submitted, and what a job's state means for the
//! session (status steps, exit code and result, the reason and who ended it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use uuid::Uuid;

use entity::session;

use super::Plan;
use super::client::{Client, Job, JobSpec};
use crate::domain::live::usage::{self, Sample};
use crate::domain::model::SessionType;
use crate::domain::model::slots;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::runtime::environments::LocalImage;
use crate::domain::runtime::local::files::SessionDir;
use crate::domain::runtime::local::observe;
use crate::domain::runtime::output::new_output;
use crate::domain::runtime::reconcile::steps_between;
use crate::domain::runtime::{TIMEOUT_EXIT_CODE, env_vars};

/// What a job's comment starts with: the tag of the session it runs.
pub const TAG: &str = "sessiond:";

/// The session a job's comment tags, if any.
pub fn tagged(comment: &str) -> Option<Uuid> {
    Uuid::parse_str(comment.strip_prefix(TAG)?.get(..36)?).ok()
}

/// The job is pending or running (not over).
pub fn active(j: &Job) -> bool {
    matches!(
        j.job_state.as_str(),
        "PENDING" | "CONFIGURING" | "RUNNING" | "COMPLETING" | "SUSPENDED" | "REQUEUED" | "REQUEUE_HOLD" | "RESIZING"
    )
}

/// Where a session's output is written (by the job) and how far it was copied (by us).
pub fn output_paths(output_dir: &str, id: Uuid) -> (PathBuf, PathBuf) {
    let dir = Path::new(output_dir);
    (dir.join(format!("{id}.out")), dir.join(".sessiond").join(format!("{id}.copied")))
}

/// The directory of a session run in sessiond's sandbox on a node: the local runtime's
/// layout (`spec.json` from the server; `state.json`, `output.log`, `work/` from
/// `sessiond supervise` on the node), under the engine's shared directory.
pub fn session_dir(output_dir: &str, id: Uuid) -> SessionDir {
    SessionDir { root: Path::new(output_dir).join(id.to_string()) }
}

/// Where a job records that its image's prepare step failed (its exit code).
fn prepare_failed_path(output_dir: &str, id: Uuid) -> PathBuf {
    Path::new(output_dir).join(format!("{id}.prepare-failed"))
}

/// `text` quoted for `sh`.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The job a scheduled session is submitted as. With `sessiond` (its path on the nodes),
/// a node that has it and bubblewrap runs the session in sessiond's sandbox (`sessiond
/// supervise` of [`session_dir`]); any other runs it plainly, and says so in its output.
pub fn spec(
    s: &session::Model,
    client: &Client,
    images: &BTreeMap<String, LocalImage>,
    lifetime: Option<i64>,
    sessiond: Option<&str>,
) -> JobSpec {
    let settings = client.settings();
    let image = images.get(&s.image).cloned().unwrap_or_default();
    let batch = s.session_type == SessionType::Batch.as_str();
    let command = if batch { s.startup_command.clone().unwrap_or_default() } else { image.interactive_command() };
    // The request is the whole session's (each container's × the cluster size), on one node
    // as sessiond places and counts it: a container is one task with its CPUs; the memory
    // and GPUs are the node's for all of them.
    let tasks = i64::from(s.cluster_size.max(1));
    let total = |slot: &str| s.requested_slots.get(slot).and_then(Value::as_f64).unwrap_or(0.0);
    let cpu = (total("cpu") / tasks as f64).ceil().max(1.0) as i64;
    let memory = total("mem");
    let gpus = total("cuda.device").ceil() as i64;
    // The batch timeout is kept by `timeout` (exit 124, as everywhere); Slurm's own time
    // limit, a minute later, is the backstop, and the policy's lifetime when there is one.
    let timeout = s.batch_timeout_seconds.filter(|t| batch && *t > 0);
    let run = match timeout {
        Some(t) => format!("exec timeout -k 5 {t} /bin/sh -c {}", quoted(&command)),
        None => format!("exec /bin/sh -c {}", quoted(&command)),
    };
    let limit_seconds =
        [timeout.map(|t| t + 60), lifetime.filter(|l| *l > 0).map(|l| l + 60)].into_iter().flatten().min();
    let mut environment = vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("SESSIOND_SESSION_ID".to_owned(), s.id.to_string()),
    ];
    environment.extend(image.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    environment.extend(env_vars(s));
    let (output, _) = output_paths(&settings.output_dir, s.id);
    // The image's prepare step runs first on the job's node (a node keeps nothing for
    // sessiond, so every job prepares); if it fails, the session failed to start.
    let prepare = image.prepare.as_ref().map_or_else(String::new, |p| {
        let failed = quoted(&prepare_failed_path(&settings.output_dir, s.id).display().to_string());
        format!("/bin/sh -c {} || {{ code=$?; echo $code > {failed}; exit $code; }}\n", quoted(p))
    });
    let sandbox = sessiond.map_or_else(String::new, |path| {
        let dir = quoted(&session_dir(&settings.output_dir, s.id).root.display().to_string());
        let path = quoted(path);
        format!(
            "if [ -x {path} ] && command -v bwrap >/dev/null 2>&1; then exec {path} supervise {dir}; fi\n\
             : > {dir}/plain\n\
             echo \"sessiond: no sandbox on $(hostname) ({path} or bwrap is missing there); the session runs plainly as $(id -un)\"\n"
        )
    });
    JobSpec {
        name: s.name.clone(),
        comment: format!("{TAG}{}", s.id),
        script: format!(
            "#!/bin/sh\n# sessiond session {} ({})\n{sandbox}{prepare}{run}\n",
            s.id,
            s.name.replace('\n', " ")
        ),
        nodes: 1,
        tasks,
        cpus_per_task: cpu,
        memory_per_node_mib: ((memory / f64::from(1 << 20)).ceil() as i64).max(1),
        gpus_per_node: gpus,
        time_limit_minutes: limit_seconds.map(|s| (s + 59) / 60),
        environment,
        output: output.display().to_string(),
        work_dir: settings.output_dir.clone(),
    }
}

/// A pending job's Slurm reason as a line of the session's log.
pub fn waiting_line(j: &Job) -> Option<String> {
    (j.job_state == "PENDING" && !j.state_reason.is_empty() && j.state_reason != "None").then(|| {
        let code = reason_code(&j.state_reason);
        format!("waiting in Slurm ({code}): {}", j.state_reason)
    })
}

/// The place (1 is next) of each pending job of `partition` in the order Slurm will start
/// them: by priority, then submit time, then id.
pub fn queue_order(jobs: &[Job], partition: &str) -> std::collections::HashMap<i64, i32> {
    let mut pending: Vec<&Job> = jobs.iter().filter(|j| j.job_state == "PENDING" && j.partition == partition).collect();
    pending.sort_by_key(|j| (std::cmp::Reverse(j.priority), j.submit_time, j.job_id));
    pending.iter().enumerate().map(|(i, j)| (j.job_id, i32::try_from(i + 1).unwrap_or(i32::MAX))).collect()
}

/// Slurm's reason of a pending job as a machine-readable code.
pub fn reason_code(reason: &str) -> &'static str {
    match reason {
        "Resources" | "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions" => {
            "INSUFFICIENT_RESOURCES"
        }
        "Priority" => "PRIORITY",
        "ReqNodeNotAvail" | "NodeDown" | "PartitionNodeLimit" => "NODES_UNAVAILABLE",
        "PartitionDown" | "PartitionInactive" => "PARTITION_DOWN",
        "BeginTime" => "BEGIN_TIME",
        "Dependency" | "DependencyNeverSatisfied" => "DEPENDENCY",
        "JobHeldUser" | "JobHeldAdmin" => "HELD",
        r if r.starts_with("QOS") => "QOS_LIMIT",
        r if r.starts_with("Assoc") => "ASSOCIATION_LIMIT",
        _ => "SLURM_REASON",
    }
}

/// The exit code of a wait status (a signal `n` as 128 + n, as shells report it).
fn exit_code(status: Option<i64>) -> Option<i32> {
    let status = status?;
    let code = if status & 0x7f != 0 { 128 + (status & 0x7f) } else { (status >> 8) & 0xff };
    i32::try_from(code).ok()
}

/// How a job that is over ends its session: status, reason, result and exit code.
fn ending(s: &session::Model, j: &Job) -> (SessionStatus, String, SessionResult, Option<i32>) {
    use SessionStatus::{Error, Terminated, Terminating};
    let batch = s.session_type == SessionType::Batch.as_str();
    let stopping = s.status == Terminating.as_str();
    let code = exit_code(j.exit_code);
    let asked = || s.status_info.clone().unwrap_or_else(|| "stopped".to_owned());
    let failure = SessionResult::Failure;
    match j.job_state.as_str() {
        "TIMEOUT" if batch => {
            (Terminated, crate::domain::reclaim::expiry::BATCH_TIMED_OUT.to_owned(), failure, Some(TIMEOUT_EXIT_CODE))
        }
        "TIMEOUT" => (Terminated, format!("the Slurm job {} reached its time limit", j.job_id), failure, code),
        "OUT_OF_MEMORY" => (Terminated, "OOM killed".to_owned(), failure, code),
        "NODE_FAIL" | "BOOT_FAIL" => {
            (Error, format!("the node {} of Slurm job {} failed", node_of(j), j.job_id), failure, None)
        }
        "PREEMPTED" => (Terminated, format!("the Slurm job {} was preempted", j.job_id), failure, code),
        "DEADLINE" => (Terminated, format!("the Slurm job {} passed its deadline", j.job_id), failure, code),
        "CANCELLED" if stopping => (Terminated, asked(), if batch { failure } else { SessionResult::Success }, code),
        // Who cancelled is not in what slurmctld keeps of a job (without accounting): an
        // operator's `scancel` leaves no reason; Slurm's own cancellations give theirs.
        "CANCELLED" if j.state_reason.is_empty() || j.state_reason == "None" => (
            Terminated,
            format!("the Slurm job {} was cancelled outside sessiond (an operator's scancel)", j.job_id),
            failure,
            code,
        ),
        "CANCELLED" => (
            Terminated,
            format!("the Slurm job {} was cancelled outside sessiond by Slurm: {}", j.job_id, j.state_reason),
            failure,
            code,
        ),
        _ if stopping => (Terminated, asked(), if batch { failure } else { SessionResult::Success }, code),
        _ if batch && s.batch_timeout_seconds.is_some() && code == Some(TIMEOUT_EXIT_CODE) => {
            (Terminated, crate::domain::reclaim::expiry::BATCH_TIMED_OUT.to_owned(), failure, code)
        }
        _ => {
            let result = if code == Some(0) { SessionResult::Success } else { failure };
            (Terminated, crate::domain::runtime::local::supervisor::describe_code(code), result, code)
        }
    }
}

fn node_of(j: &Job) -> &str {
    if j.batch_host.is_empty() { j.nodes.split(',').next().unwrap_or("") } else { &j.batch_host }
}

/// What running session `s` used, when a sample is due at `now` and its supervisor (in the
/// sandbox on the node) reported it: cores since its previous report, and memory.
pub fn sample(output_dir: &str, s: &session::Model, now: chrono::DateTime<chrono::Utc>) -> Option<Sample> {
    if s.status != SessionStatus::Running.as_str() || !usage::due(s, now) {
        return None;
    }
    let u = session_dir(output_dir, s.id).read_usage()?;
    let mut sample = Sample::from([(slots::MEM.to_owned(), u.mem)]);
    if let Some(cpu) = u.cpu {
        sample.insert(slots::CPU.to_owned(), cpu);
    }
    Some(sample)
}

/// What a look at a session's job means for the session, if anything.
pub fn plan(output_dir: &str, s: session::Model, j: &Job, waiting: Option<String>) -> Option<Plan> {
    use SessionStatus::*;
    let status = SessionStatus::parse(&s.status)?;
    let (output_file, copied_file) = output_paths(output_dir, s.id);
    let over = !active(j);
    // In sessiond's sandbox on the node, its supervisor reports as it does on this machine.
    let sd = session_dir(output_dir, s.id);
    let supervised = sd.read_state();
    // Submitted for the sandbox, started, and neither its supervisor's state nor the plain
    // run's marker there yet: still starting.
    let starting = supervised.is_none() && sd.spec().exists() && !sd.root.join("plain").exists();
    let out = match &supervised {
        Some(_) => new_output(&sd.output(), &copied_file.with_extension("sandbox-copied"), over),
        None => new_output(&output_file, &copied_file, over),
    };
    let node = node_of(j).to_owned();
    let placed = (!node.is_empty() && s.agent_id.as_deref() != Some(node.as_str())).then(|| node.clone());
    let mut steps = Vec::new();
    let mut step_lines = Vec::new();
    let mut end_line = None;
    let mut output = out.lines;
    if let Some(line) = waiting {
        output.insert(0, line);
    }
    // Requeued outside sessiond (an operator's `scontrol requeue`, or Slurm): the job would
    // run its command a second time, and a session runs once. It ends, said so; its job,
    // tagged with an ended session, is then cancelled.
    if j.restart_cnt > 0 && status != Scheduled {
        let reason = format!(
            "the Slurm job {} was requeued outside sessiond (by an operator or Slurm); a session runs once, so it ended",
            j.job_id
        );
        return Some(Plan {
            session: s,
            steps: vec![(Terminated, Some(reason.clone()), Some((SessionResult::Failure, None)))],
            step_lines: Vec::new(),
            output,
            end_line: Some(format!("session ended: {reason}")),
            placed: None,
            usage: None,
            after: out.copied,
        });
    }
    let ran = j.start_time > 0 && !node.is_empty();
    let reached = match (j.job_state.as_str(), &supervised) {
        (_, Some(state)) if over && state.child.is_none() => None,
        ("RUNNING" | "COMPLETING" | "SUSPENDED", Some(state)) => Some(observe::status_of(state.phase)),
        ("CONFIGURING" | "RUNNING" | "COMPLETING" | "SUSPENDED", None) if starting => Some(Preparing),
        ("CONFIGURING", _) => Some(Creating),
        ("RUNNING" | "COMPLETING" | "SUSPENDED", None) => Some(Running),
        _ if over && ran => Some(Running),
        _ => None,
    };
    if let Some(to) = reached {
        let pulled = supervised.as_ref().is_some_and(|state| state.pulled);
        let sandbox = if supervised.is_some() { " in sessiond's sandbox" } else { "" };
        for step in steps_between(status, to, pulled) {
            step_lines.push(match step {
                Preparing => format!("Slurm job {} placed on node {node}", j.job_id),
                Pulling => format!("running the prepare step of image {} on node {node}", s.image),
                Prepared => "the job's environment is ready".to_owned(),
                Creating => format!("starting Slurm job {} on node {node}", j.job_id),
                _ => format!("session running{sandbox} (Slurm job {} on node {node})", j.job_id),
            });
            steps.push((step, None, None));
        }
    }
    if over && !out.rest {
        let prepare_failed = std::fs::read_to_string(prepare_failed_path(output_dir, s.id))
            .ok()
            .map(|code| code.trim().parse::<i32>().ok());
        let exit = supervised.as_ref().and_then(|state| state.exit.as_ref());
        let (end, reason, result, code) = match (exit, prepare_failed) {
            // The supervisor's exit record: the session's own code, 124, OOM, a failed start.
            (Some(exit), _) => observe::ending(&s, exit),
            (None, Some(code)) => (
                Error,
                format!(
                    "failed to start: the image's prepare step failed ({})",
                    crate::domain::runtime::local::supervisor::describe_code(code)
                ),
                SessionResult::Failure,
                None,
            ),
            (None, None) => ending(&s, j),
        };
        end_line = Some(match end {
            Error => format!("error: {reason}"),
            _ => format!("session ended: {reason}"),
        });
        if end == Error {
            steps.clear();
            step_lines.clear();
        }
        steps.push((end, Some(reason), Some((result, code))));
    }
    if steps.is_empty() && output.is_empty() && out.copied.is_none() {
        return None;
    }
    Some(Plan { session: s, steps, step_lines, output, end_line, placed, usage: None, after: out.copied })
}
