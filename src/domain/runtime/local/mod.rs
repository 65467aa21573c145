//! The local runtime: this machine is an agent, and its sessions really run, each in a
//! sandbox ([`sandbox`]) owned by a supervisor process of its own ([`supervisor`]) with
//! enforced limits ([`limits`]).
//!
//! The runtime keeps no state in memory. Every tick it reads, for each live session of its
//! agent, what the session's supervisor reported ([`files`]) and moves the stored status to
//! match, several steps at once when the session went further meanwhile (each step with its
//! transition, in one transaction). So after a restart of the server, or a crash, every
//! session continues from what really happened: a supervisor outlives the server, and one
//! that vanished without an exit record is reported as ERROR, never left stuck.
//!
//! A session's output is copied into its log (the `session_logs` table) as it comes; the
//! byte offset copied so far is kept beside the output, written after the commit.

pub mod files;
pub mod images;
pub mod limits;
pub mod sandbox;
pub mod signal;
pub mod supervisor;
pub mod terminal;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ActiveValue::NotSet, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{agent, project, resource_group, resource_group_project, session, session_log};

use super::{LIFETIME_EXCEEDED, Runtime, RuntimeInfo, RuntimeKind, env_vars, lifetimes, outlived};
use crate::domain::events::EventBus;
use crate::domain::history::{self, Entry, SchedulingResult};
use crate::domain::lifecycle::{self, Applied, Change};
use crate::domain::model::{SchedulerStrategy, SessionType};
use crate::domain::status::{SessionResult, SessionStatus};
use crate::domain::{DomainResult, catalog, clock};
use files::{Exit, Limits, Phase, Prepare, SessionDir, Spec, State};
use images::Images;
use limits::Enforcement;

/// Processes and threads one session may have.
const MAX_PIDS: u64 = 1024;
/// Most output one tick copies into a session's log (an ended session's end waits for the
/// rest: at most 8 ticks for the largest output kept).
const INGEST_BYTES: usize = 1 << 20;
/// Longest log line kept (longer ones are cut).
const MAX_LINE: usize = 4096;
/// A supervisor that has written nothing this long after its spec did not start.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// How the local runtime is set up.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// Where sessions' directories live.
    pub dir: PathBuf,
    /// This machine's agent id.
    pub agent: String,
    /// The resource group it serves (created, open to every project, when it is new).
    pub resource_group: String,
    pub images: Images,
    /// Between SIGTERM and killing what is left of a session.
    pub grace: Duration,
    /// The `sessiond` executable that runs `supervise`.
    pub executable: PathBuf,
    pub tick: Duration,
}

pub struct LocalRuntime {
    config: LocalConfig,
    enforcement: Enforcement,
    /// A session is starting or stopping: look again soon, not at the next tick.
    hurry: std::sync::atomic::AtomicBool,
}

/// How soon the runtime looks again while a session starts or stops.
const HURRY: Duration = Duration::from_millis(25);

impl LocalRuntime {
    /// Checks that sessions can run here (a sandbox starts) and how limits are enforced.
    /// `Err` says why the local runtime cannot be used.
    pub fn probe(config: LocalConfig) -> Result<(Self, RuntimeInfo), String> {
        for dir in [config.dir.clone(), config.dir.join("sessions"), config.dir.join("images")] {
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            open_to_traverse(&dir).map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))?;
        }
        sandbox::probe(&config.dir.join(format!("probe-{}", std::process::id())))?;
        let enforcement = Enforcement::detect();
        let info = RuntimeInfo {
            kind: RuntimeKind::Local,
            reason: "sessions run in bubblewrap sandboxes on this machine".to_owned(),
            agent: Some(config.agent.clone()),
            enforced: enforcement.describe(),
            local: Some(terminal::LocalAccess {
                agent: config.agent.clone(),
                dir: config.dir.clone(),
                enforcement: enforcement.clone(),
            }),
        };
        Ok((Self { config, enforcement, hurry: false.into() }, info))
    }

    /// This machine's agent id.
    pub fn agent(&self) -> &str {
        &self.config.agent
    }

    /// Registers this machine as the agent (its capacity detected) of its resource group,
    /// creating the group, open to every project, when it does not exist.
    pub async fn register(&self, db: &DatabaseConnection) -> DomainResult<()> {
        let now = clock::now();
        let txn = crate::domain::begin_write(db).await?;
        let group = &self.config.resource_group;
        if resource_group::Entity::find_by_id(group.clone()).one(&txn).await?.is_none() {
            resource_group::ActiveModel {
                name: Set(group.clone()),
                description: Set("This machine: sessions really run here".to_owned()),
                scheduler: Set(SchedulerStrategy::Fifo.as_str().to_owned()),
                pending_timeout_seconds: Set(None),
                allowed_session_types: Set(Value::from(
                    SessionType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
                )),
                created_at: Set(now),
            }
            .insert(&txn)
            .await?;
            let allowed = resource_group_project::Entity::find().all(&txn).await?;
            let mut rows = Vec::new();
            for p in project::Entity::find().all(&txn).await? {
                let position =
                    allowed.iter().filter(|a| a.project_id == p.id).map(|a| a.position + 1).max().unwrap_or(0);
                rows.push(resource_group_project::ActiveModel {
                    resource_group: Set(group.clone()),
                    project_id: Set(p.id),
                    position: Set(position),
                });
            }
            if !rows.is_empty() {
                resource_group_project::Entity::insert_many(rows).exec_without_returning(&txn).await?;
            }
        }
        let row = agent::ActiveModel {
            id: Set(self.config.agent.clone()),
            resource_group: Set(group.clone()),
            available_slots: Set(capacity()),
            status: Set(catalog::ALIVE.to_owned()),
            schedulable: Set(true),
            pulled_images: Set(self.prepared_images()),
            created_at: Set(now),
            last_heartbeat_at: Set(now),
        };
        if agent::Entity::find_by_id(self.config.agent.clone()).one(&txn).await?.is_some() {
            agent::Entity::update(agent::ActiveModel { created_at: NotSet, ..row }).exec(&txn).await?;
        } else {
            agent::Entity::insert(row).exec_without_returning(&txn).await?;
        }
        txn.commit().await?;
        Ok(())
    }

    /// Images whose prepare step has run here (all images without one count as pulled).
    fn prepared_images(&self) -> Value {
        let mut names: Vec<String> = self
            .config
            .images
            .images
            .iter()
            .filter(|(name, image)| image.prepare.is_none() || files::image_ready(&self.config.dir, name).exists())
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        Value::from(names)
    }

    /// Writes a scheduled session's spec and starts its supervisor.
    fn start(&self, s: &session::Model) -> Result<(), String> {
        let sd = SessionDir::of(&self.config.dir, s.id);
        std::fs::create_dir_all(sd.work()).map_err(|e| format!("cannot create the session's directory: {e}"))?;
        if sandbox::is_root() {
            prepare_dirs(&sd.root, &sd.work()).map_err(|e| format!("cannot hand the work directory over: {e}"))?;
        }
        let image = self.config.images.get(&s.image);
        let batch = s.session_type == SessionType::Batch.as_str();
        let mut env: Vec<(String, String)> = image.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        env.extend(env_vars(s));
        let marker = files::image_ready(&self.config.dir, &s.image);
        let slots = &s.requested_slots;
        let cpu = slots.get("cpu").and_then(Value::as_f64).unwrap_or(1.0);
        let memory = slots.get("mem").and_then(Value::as_f64).unwrap_or(0.0);
        let accelerators = slots.get("cuda.device").and_then(Value::as_f64).unwrap_or(0.0);
        let spec = Spec {
            session_id: s.id,
            command: if batch { s.startup_command.clone().unwrap_or_default() } else { image.interactive_command() },
            batch,
            env,
            root: image.root_dir(),
            prepare: image.prepare.clone().filter(|_| !marker.exists()).map(|command| Prepare { command, marker }),
            limits: Limits {
                // Whole cores: a fraction of a core is rounded up.
                cores: u32::try_from(cpu.ceil().max(1.0) as u64).unwrap_or(u32::MAX),
                memory: if memory > 0.0 { memory as u64 } else { 512 << 20 },
                pids: MAX_PIDS,
            },
            batch_timeout_seconds: s.batch_timeout_seconds,
            grace_ms: u64::try_from(self.config.grace.as_millis()).unwrap_or(u64::MAX),
            devices: accelerator_devices(accelerators as usize),
            enforcement: self.enforcement.clone(),
        };
        files::write_json(&sd.spec(), &spec).map_err(|e| format!("cannot write the session's spec: {e}"))?;
        let log = {
            use std::os::unix::fs::OpenOptionsExt;
            let mut open = std::fs::OpenOptions::new();
            open.write(true).create(true).truncate(true).mode(0o600);
            open.open(sd.supervisor_log()).map_err(|e| format!("cannot create its log: {e}"))?
        };
        let log2 = log.try_clone().map_err(|e| format!("cannot create its log: {e}"))?;
        tokio::process::Command::new(&self.config.executable)
            .arg("supervise")
            .arg(&sd.root)
            .process_group(0) // not ended with the server's group (Ctrl-C, a restart)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log2)
            .kill_on_drop(false)
            .spawn()
            .map(drop) // tokio reaps it when it ends
            .map_err(|e| format!("cannot start the supervisor: {e}"))
    }
}

/// Removes a finished session's directory. It goes out of `sessions/` first (a rename, which
/// its contents cannot refuse), so a tree the session made unremovable is never looked at
/// again; `trash/` is emptied as far as it can be.
fn remove_session_dir(runtime_dir: &Path, dir: &Path) {
    let trash = runtime_dir.join("trash");
    std::fs::create_dir_all(&trash).ok();
    let Some(name) = dir.file_name() else { return };
    let moved = trash.join(name);
    if std::fs::rename(dir, &moved).is_ok() {
        std::fs::remove_dir_all(&moved).ok();
    } else {
        std::fs::remove_dir_all(dir).ok();
    }
}

/// Makes a directory traversable by the sessions' unprivileged uid (not listable).
fn open_to_traverse(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
}

/// A session directory traversable, its work directory owned by the sessions' uid alone.
pub(crate) fn prepare_dirs(session_dir: &Path, work: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    open_to_traverse(session_dir)?;
    std::os::unix::fs::chown(work, Some(sandbox::NOBODY), Some(sandbox::NOBODY))?;
    std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o700))
}

/// This machine's capacity: cores, memory, and NVIDIA devices when there are any.
fn capacity() -> Value {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024;
    let mut slots = json!({"cpu": cores, "mem": memory});
    let gpus = accelerator_devices(usize::MAX).iter().filter(|d| is_gpu(d)).count();
    if gpus > 0 {
        slots["cuda.device"] = json!(gpus);
    }
    slots
}

fn is_gpu(d: &Path) -> bool {
    d.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("nvidia"))
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The first `n` NVIDIA devices and the control devices they need (none on most machines).
fn accelerator_devices(n: usize) -> Vec<PathBuf> {
    if n == 0 {
        return Vec::new();
    }
    let mut gpus: Vec<PathBuf> =
        std::fs::read_dir("/dev").into_iter().flatten().flatten().map(|e| e.path()).filter(|p| is_gpu(p)).collect();
    gpus.sort();
    gpus.truncate(n);
    if gpus.is_empty() {
        return gpus;
    }
    for control in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
        if Path::new(control).exists() {
            gpus.push(PathBuf::from(control));
        }
    }
    gpus
}

/// What a session's supervisor shows.
#[derive(Debug, PartialEq)]
enum Observed {
    /// Nothing yet.
    Nothing,
    /// Under way.
    At { phase: Phase, pulled: bool },
    /// Over.
    Ended { exit: Exit, ran: bool, pulled: bool },
    /// The supervisor is gone without an exit record.
    Vanished(String),
}

fn observe(sd: &SessionDir) -> Observed {
    match sd.read_state() {
        Some(State { exit: Some(exit), child, pulled, .. }) => Observed::Ended { exit, ran: child.is_some(), pulled },
        Some(state) if state.supervisor.alive() => Observed::At { phase: state.phase, pulled: state.pulled },
        Some(_) => Observed::Vanished("the session's supervisor vanished without an exit record".to_owned()),
        None => {
            let age = std::fs::metadata(sd.spec()).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
            match age {
                Some(age) if age > START_DEADLINE => {
                    Observed::Vanished("the session's supervisor did not start".to_owned())
                }
                _ => Observed::Nothing,
            }
        }
    }
}

/// The status a phase shows as.
fn status_of(phase: Phase) -> SessionStatus {
    match phase {
        Phase::Preparing => SessionStatus::Preparing,
        Phase::Pulling => SessionStatus::Pulling,
        Phase::Prepared => SessionStatus::Prepared,
        Phase::Creating => SessionStatus::Creating,
        Phase::Running | Phase::Exited => SessionStatus::Running,
    }
}

/// The start-up statuses after `from` up to `to`, in order (PULLING only when it happened).
fn steps(from: SessionStatus, to: SessionStatus, pulled: bool) -> Vec<SessionStatus> {
    use SessionStatus::*;
    let order = [Scheduled, Preparing, Pulling, Prepared, Creating, Running];
    let (Some(a), Some(b)) = (order.iter().position(|s| *s == from), order.iter().position(|s| *s == to)) else {
        return Vec::new();
    };
    order[a + 1..=b.max(a)].iter().copied().filter(|s| *s != Pulling || pulled || to == Pulling).collect()
}

/// How a session that ended is recorded: status, reason, result and exit code.
fn ending(s: &session::Model, exit: &Exit) -> (SessionStatus, String, SessionResult, Option<i32>) {
    if let Some(why) = &exit.failed {
        return (SessionStatus::Error, format!("failed to start: {why}"), SessionResult::Failure, None);
    }
    let batch = s.session_type == SessionType::Batch.as_str();
    let code = exit.code;
    if exit.timed_out {
        return (SessionStatus::Terminated, "batch timeout".to_owned(), SessionResult::Failure, code);
    }
    if exit.oom_killed {
        return (SessionStatus::Terminated, "OOM killed".to_owned(), SessionResult::Failure, code);
    }
    if exit.stopped {
        let reason = s.status_info.clone().unwrap_or_else(|| "stopped".to_owned());
        // A batch job stopped before it finished failed; any other session ended as asked.
        let result = if batch { SessionResult::Failure } else { SessionResult::Success };
        return (SessionStatus::Terminated, reason, result, code);
    }
    let result = if code == Some(0) { SessionResult::Success } else { SessionResult::Failure };
    (SessionStatus::Terminated, supervisor::describe_code(code), result, code)
}

/// A status to enter, with its reason and, when it ends the session, result and exit code.
type Step = (SessionStatus, Option<String>, Option<(SessionResult, Option<i32>)>);

/// What one tick does to one session.
struct Plan {
    session: session::Model,
    /// Statuses to go through, in order; the last may end the session.
    steps: Vec<Step>,
    /// The log lines of the steps (written only if the steps are), the session's output
    /// (written in any case), and the line of its end.
    step_lines: Vec<String>,
    output: Vec<String>,
    end_line: Option<String>,
    /// Where the copy of the output is, written once committed.
    copied: Option<(PathBuf, Copied)>,
    /// A terminal session whose directory goes once its output is in the log.
    remove: Option<PathBuf>,
}

/// How much of a session's output is in its log: bytes of `output.log`, and lines.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Copied {
    offset: u64,
    lines: u64,
}

/// Most lines one tick copies from one session's output.
const LINES_PER_TICK: usize = 5_000;
/// Most lines of output a session's log keeps; the rest is read and dropped, with a note.
const MAX_OUTPUT_LINES: u64 = 100_000;

/// New lines of a session's output since the last copy: complete lines only, unless `all`
/// (the session ended), which takes the last line too; `rest` when more is left to copy.
struct Output {
    lines: Vec<String>,
    copied: Option<(PathBuf, Copied)>,
    rest: bool,
}

fn new_output(sd: &SessionDir, all: bool) -> Output {
    let before: Copied = files::read_json(&sd.ingested()).unwrap_or_default();
    let (lines, copied) = read_output(sd, before, all);
    let len = std::fs::metadata(sd.output()).map_or(0, |m| m.len());
    let at = copied.map_or(before.offset, |c| c.offset);
    Output { lines, copied: copied.map(|c| (sd.ingested(), c)), rest: at < len }
}

fn read_output(sd: &SessionDir, from: Copied, all: bool) -> (Vec<String>, Option<Copied>) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(sd.output()) else { return (Vec::new(), None) };
    if f.seek(SeekFrom::Start(from.offset)).is_err() {
        return (Vec::new(), None);
    }
    let mut buf = Vec::new();
    if f.take(INGEST_BYTES as u64).read_to_end(&mut buf).is_err() || buf.is_empty() {
        return (Vec::new(), None);
    }
    if from.lines >= MAX_OUTPUT_LINES {
        // The log is full: what comes is read and dropped.
        return (Vec::new(), Some(Copied { offset: from.offset + buf.len() as u64, lines: from.lines }));
    }
    let mut end = if all && buf.len() < INGEST_BYTES {
        buf.len()
    } else {
        match buf.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None if buf.len() >= INGEST_BYTES => buf.len(), // one line longer than a tick's copy
            None => return (Vec::new(), None),
        }
    };
    // At most a tick's share of lines, and no more than the log keeps.
    let budget = usize::try_from(MAX_OUTPUT_LINES - from.lines).unwrap_or(usize::MAX).min(LINES_PER_TICK);
    if let Some((i, _)) = buf[..end].iter().enumerate().filter(|(_, b)| **b == b'\n').nth(budget.saturating_sub(1))
        && i + 1 < end
    {
        end = i + 1;
    }
    let mut lines: Vec<String> = String::from_utf8_lossy(&buf[..end])
        .lines()
        .map(|l| {
            // PostgreSQL's text holds no NUL.
            let l = l.replace('\0', "\u{FFFD}");
            if l.len() > MAX_LINE { l.chars().take(MAX_LINE).collect() } else { l }
        })
        .collect();
    let total = from.lines + lines.len() as u64;
    if total >= MAX_OUTPUT_LINES {
        lines.push(format!("[the log keeps {MAX_OUTPUT_LINES} lines of output: the rest is dropped]"));
    }
    (lines, Some(Copied { offset: from.offset + end as u64, lines: total }))
}

impl Plan {
    /// Status changes with their log lines, nothing copied.
    fn steps(session: session::Model, steps: Vec<Step>, line: String) -> Self {
        let end = steps.last().is_some_and(|(to, _, _)| to.is_terminal());
        let (step_lines, end_line) = if end { (Vec::new(), Some(line)) } else { (vec![line], None) };
        Self { session, steps, step_lines, output: Vec::new(), end_line, copied: None, remove: None }
    }
}

impl LocalRuntime {
    fn plan(&self, s: session::Model, now: DateTime<Utc>, lifetime: Option<i64>) -> Option<Plan> {
        let sd = SessionDir::of(&self.config.dir, s.id);
        let status = SessionStatus::parse(&s.status)?;
        let started = sd.spec().exists();
        if status == SessionStatus::Terminating {
            if !started {
                // Asked to stop before its supervisor started: nothing runs.
                let reason = s.status_info.clone();
                return Some(Plan::steps(
                    s,
                    vec![(SessionStatus::Terminated, reason, None)],
                    "session terminated before it started".to_owned(),
                ));
            }
            std::fs::write(sd.stop(), b"").ok();
        }
        if status == SessionStatus::Running
            && let Some(limit) = outlived(&s, now, lifetime)
        {
            std::fs::write(sd.stop(), b"").ok();
            return Some(Plan::steps(
                s,
                vec![(SessionStatus::Terminating, Some(LIFETIME_EXCEEDED.to_owned()), None)],
                format!("the session reached its maximum lifetime of {limit} s"),
            ));
        }
        if status == SessionStatus::Scheduled && !started {
            return match self.start(&s) {
                Ok(()) => None,
                Err(why) => Some(Plan::steps(
                    s,
                    vec![(
                        SessionStatus::Error,
                        Some(format!("failed to start: {why}")),
                        Some((SessionResult::Failure, None)),
                    )],
                    format!("error: {why}"),
                )),
            };
        }
        let observed = if started {
            observe(&sd)
        } else {
            // Past SCHEDULED, and its directory is gone (the runtime directory was wiped).
            Observed::Vanished("the session's directory is gone".to_owned())
        };
        let ended = matches!(observed, Observed::Ended { .. } | Observed::Vanished(_));
        let Output { lines: output, copied, rest } = new_output(&sd, ended);
        let agent = &self.config.agent;
        // The log reads in order: the start-up steps, the output, then the end.
        let mut step_lines = Vec::new();
        let mut steps = Vec::new();
        let mut end_line = None;
        match observed {
            Observed::Nothing => {}
            Observed::At { phase, pulled } => {
                for to in steps_of(status, status_of(phase), pulled) {
                    step_lines.push(step_line(to, agent, &s.image));
                    steps.push((to, None, None));
                }
            }
            Observed::Ended { exit, ran, pulled } => {
                let (end, reason, result, code) = ending(&s, &exit);
                if end != SessionStatus::Error && ran {
                    for to in steps_of(status, SessionStatus::Running, pulled) {
                        step_lines.push(step_line(to, agent, &s.image));
                        steps.push((to, None, None));
                    }
                }
                // The end is recorded with the last of the output.
                if !rest {
                    end_line = Some(match end {
                        SessionStatus::Error => format!("error: {reason}"),
                        _ => format!("session ended: {reason}"),
                    });
                    steps.push((end, Some(reason), Some((result, code))));
                }
            }
            Observed::Vanished(why) => {
                end_line = Some(format!("error: {why}"));
                steps.push((SessionStatus::Error, Some(why), Some((SessionResult::Failure, None))));
            }
        }
        if steps.is_empty() && output.is_empty() && copied.is_none() {
            return None;
        }
        Some(Plan { session: s, steps, step_lines, output, end_line, copied, remove: None })
    }

    /// A directory whose session is no longer live here: stop what may still run, copy the
    /// rest of its output, and remove it once that is in the log.
    fn plan_leftover(&self, s: session::Model) -> Option<Plan> {
        let sd = SessionDir::of(&self.config.dir, s.id);
        let state = sd.read_state();
        let running = match &state {
            Some(state) => state.exit.is_none() && state.supervisor.alive(),
            // A supervisor may be starting: it reads `stop` first thing.
            None => observe(&sd) == Observed::Nothing,
        };
        if running {
            std::fs::write(sd.stop(), b"").ok();
            return None;
        }
        // The directory goes with the last of the output (a long one takes ticks).
        let out = new_output(&sd, true);
        let remove = (!out.rest).then_some(sd.root);
        Some(Plan {
            session: s,
            steps: Vec::new(),
            step_lines: Vec::new(),
            output: out.lines,
            end_line: None,
            copied: out.copied,
            remove,
        })
    }
}

fn steps_of(from: SessionStatus, to: SessionStatus, pulled: bool) -> Vec<SessionStatus> {
    if from == SessionStatus::Terminating { Vec::new() } else { steps(from, to, pulled) }
}

fn step_line(to: SessionStatus, agent: &str, image: &str) -> String {
    match to {
        SessionStatus::Preparing => format!("preparing the sandbox on agent {agent}"),
        SessionStatus::Pulling => format!("running the prepare step of image {image} on agent {agent}"),
        SessionStatus::Prepared => format!("image {image} ready on agent {agent}"),
        SessionStatus::Creating => "starting the sandbox".to_owned(),
        _ => "session running".to_owned(),
    }
}

fn history_phase(to: SessionStatus) -> &'static str {
    match to {
        SessionStatus::Preparing | SessionStatus::Pulling | SessionStatus::Prepared => "prepare",
        SessionStatus::Creating | SessionStatus::Running => "start",
        SessionStatus::Error => "error",
        _ => "terminate",
    }
}

fn log_row(session_id: Uuid, line: String, now: DateTime<Utc>) -> session_log::ActiveModel {
    session_log::ActiveModel { id: NotSet, session_id: Set(session_id), line: Set(line), created_at: Set(now) }
}

impl Runtime for LocalRuntime {
    fn tick(&self) -> Duration {
        if self.hurry.load(std::sync::atomic::Ordering::Relaxed) { HURRY } else { self.config.tick }
    }

    async fn drive(&self, db: &DatabaseConnection, bus: &EventBus) -> DomainResult<usize> {
        use SessionStatus::*;
        let driven = [Scheduled, Preparing, Pulling, Prepared, Creating, Running, Terminating];
        let live = session::Entity::find()
            .filter(session::Column::AgentId.eq(self.config.agent.clone()))
            .filter(session::Column::Status.is_in(driven.iter().map(|s| s.as_str())))
            .all(db)
            .await?;
        let live_ids: HashSet<Uuid> = live.iter().map(|s| s.id).collect();
        let moving = live.iter().any(|s| s.status != Running.as_str());
        let lifetimes = if live.is_empty() { Default::default() } else { lifetimes(db).await? };
        let now = clock::now();
        let mut plans: Vec<Plan> = live
            .into_iter()
            .filter_map(|s| {
                let lifetime = lifetimes.get(&s.keypair_id).copied().flatten();
                self.plan(s, now, lifetime)
            })
            .collect();

        let leftover: Vec<Uuid> = std::fs::read_dir(self.config.dir.join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| Uuid::parse_str(n).ok()))
            .filter(|id| !live_ids.contains(id))
            .collect();
        if !leftover.is_empty() {
            let rows = session::Entity::find()
                .filter(session::Column::Id.is_in(crate::domain::padded(leftover.iter().copied())))
                .all(db)
                .await?;
            for id in &leftover {
                match rows.iter().find(|r| r.id == *id) {
                    Some(s) => plans.extend(self.plan_leftover(s.clone())),
                    // No such session (a database replaced under the runtime): stop it, then drop it.
                    None => {
                        let sd = SessionDir::of(&self.config.dir, *id);
                        match sd.read_state() {
                            Some(st) if st.exit.is_none() && st.supervisor.alive() => {
                                std::fs::write(sd.stop(), b"").ok();
                            }
                            _ => {
                                std::fs::remove_dir_all(&sd.root).ok();
                            }
                        }
                    }
                }
            }
        }
        self.hurry.store(moving || !leftover.is_empty(), std::sync::atomic::Ordering::Relaxed);
        if plans.is_empty() {
            return Ok(0);
        }
        self.write(db, bus, plans).await
    }
}

impl LocalRuntime {
    async fn write(&self, db: &DatabaseConnection, bus: &EventBus, plans: Vec<Plan>) -> DomainResult<usize> {
        let now = clock::now();
        let mut changes = Vec::new();
        for p in &plans {
            let mut at = p.session.clone();
            for (to, reason, result) in &p.steps {
                let mut change = Change::new(at.clone(), *to, reason.clone());
                change.result = *result;
                changes.push(change);
                at.status = to.as_str().to_owned();
            }
        }
        let txn = crate::domain::begin_write(db).await?;
        let mut transitions = lifecycle::Transitions::default();
        let applied = lifecycle::apply(&txn, changes, now, &mut transitions).await?;
        // `apply` answers in session order, each session's steps in their order.
        let mut moved: HashSet<Uuid> = HashSet::new();
        for a in &applied {
            if let Applied::Moved(m) = a {
                moved.insert(m.id);
            }
        }
        let mut logs = Vec::new();
        let mut entries = Vec::new();
        let mut pulled = false;
        for p in &plans {
            let id = p.session.id;
            if moved.contains(&id) {
                // Changed meanwhile (terminated by its owner): its output is kept, its steps
                // are looked at again next tick.
                logs.extend(p.output.iter().map(|line| log_row(id, line.clone(), now)));
                continue;
            }
            let lines = p.step_lines.iter().chain(&p.output).chain(&p.end_line);
            logs.extend(lines.map(|line| log_row(id, line.clone(), now)));
            if let Some((last, reason, _)) = p.steps.last() {
                pulled |= p.steps.iter().any(|(s, _, _)| *s == SessionStatus::Pulling);
                let path: Vec<&str> = p.steps.iter().map(|(s, _, _)| s.as_str()).collect();
                let failed = *last == SessionStatus::Error;
                entries.push(Entry {
                    session_id: id,
                    phase: history_phase(*last),
                    from: SessionStatus::parse(&p.session.status),
                    to: Some(*last),
                    result: if failed { SchedulingResult::Failure } else { SchedulingResult::Success },
                    error_code: failed.then(|| "START_FAILED".to_owned()),
                    message: format!(
                        "{} on agent {}{}",
                        path.join(" → "),
                        self.config.agent,
                        reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
                    ),
                    sub_steps: Value::Array(Vec::new()),
                });
            }
        }
        if pulled {
            agent::Entity::update_many()
                .col_expr(agent::Column::PulledImages, Expr::value(self.prepared_images()))
                .filter(agent::Column::Id.eq(self.config.agent.clone()))
                .exec(&txn)
                .await?;
        }
        for batch in crate::domain::shaped_batches(logs) {
            session_log::Entity::insert_many(batch).exec_without_returning(&txn).await?;
        }
        history::record(&txn, entries, now).await?;
        let changed = lifecycle::commit(txn, transitions, bus).await?;
        for p in plans {
            if let Some((file, copied)) = p.copied {
                files::write_json(&file, &copied).ok();
            }
            if let Some(dir) = p.remove {
                remove_session_dir(&self.config.dir, &dir);
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionStatus::*;

    #[test]
    fn observed_steps_go_in_order_and_pulling_only_when_it_happened() {
        assert_eq!(steps(Scheduled, Running, false), [Preparing, Prepared, Creating, Running]);
        assert_eq!(steps(Scheduled, Running, true), [Preparing, Pulling, Prepared, Creating, Running]);
        assert_eq!(steps(Preparing, Pulling, false), [Pulling]);
        assert_eq!(steps(Running, Running, false), []);
        assert_eq!(steps(Creating, Preparing, false), [], "never backwards");
        assert_eq!(steps_of(Terminating, Running, false), [], "a stopping session only ends");
    }

    #[test]
    fn an_ending_names_its_cause() {
        let s = |ty: &str| session::Model {
            id: Uuid::nil(),
            name: "s".into(),
            session_type: ty.to_owned(),
            status: "TERMINATING".into(),
            status_info: Some("user-requested".to_owned()),
            result: "UNDEFINED".into(),
            exit_code: None,
            owner_id: Uuid::nil(),
            keypair_id: Uuid::nil(),
            project_id: Uuid::nil(),
            domain_id: Uuid::nil(),
            resource_group: "local".into(),
            image: "python:3.12".into(),
            requested_slots: json!({}),
            occupied_slots: json!({}),
            cluster_size: 1,
            environment: json!([]),
            startup_command: None,
            batch_timeout_seconds: None,
            priority: 0,
            agent_id: None,
            launch_group_id: None,
            pending_reasons: json!([]),
            created_at: Utc::now(),
            scheduled_at: None,
            started_at: None,
            terminated_at: None,
            status_changed_at: Utc::now(),
            queue_position: None,
        };
        let exit = |e: Exit| ending(&s("BATCH"), &e);
        assert_eq!(exit(Exit { code: Some(3), ..Exit::default() }).1, "exit 3");
        assert_eq!(exit(Exit { code: Some(137), ..Exit::default() }).1, "signal 9");
        assert_eq!(exit(Exit { code: Some(0), ..Exit::default() }).2, SessionResult::Success);
        assert_eq!(exit(Exit { code: Some(124), timed_out: true, ..Exit::default() }).1, "batch timeout");
        assert_eq!(exit(Exit { code: Some(137), oom_killed: true, ..Exit::default() }).1, "OOM killed");
        assert_eq!(exit(Exit { failed: Some("no bwrap".into()), ..Exit::default() }).0, Error);
        let stopped = ending(&s("INTERACTIVE"), &Exit { code: Some(143), stopped: true, ..Exit::default() });
        assert_eq!((stopped.1.as_str(), stopped.2), ("user-requested", SessionResult::Success));
    }
}
