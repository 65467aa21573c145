//! What the server and a session's supervisor tell each other, as files in the session's
//! directory: the server writes the [`Spec`] (and `stop` when the session must end), the
//! supervisor writes its [`State`] and the session's output. Files, not a pipe, so that
//! either side may restart and read where the other is: the state is level-triggered.
//!
//! ```text
//! <runtime dir>/sessions/<id>/spec.json    what to run, with which limits (server)
//!                             stop         present: end the session (server)
//!                             state.json   phase, pids, exit record (supervisor)
//!                             output.log   stdout and stderr, size-capped (supervisor)
//!                             ingested     bytes of output.log already in the database (server)
//!                             supervisor.log  the supervisor's own messages
//!                             bwrap.json   the sandbox's status lines (child pid, exit code)
//!                             work/        the session's working directory, its home
//!                             prepare/     where the image's prepare step runs (empty)
//!                             pull.json    how far its image's pull is, its digest (supervisor)
//! <runtime dir>/images/<name>.ready  the image's prepare step has run on this machine
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Most bytes of a session's output kept on disk; beyond it the output is read and dropped.
pub const OUTPUT_CAP: u64 = 8 << 20;

/// The files of one session.
#[derive(Clone, Debug)]
pub struct SessionDir {
    pub root: PathBuf,
}

impl SessionDir {
    pub fn of(runtime_dir: &Path, id: Uuid) -> Self {
        Self { root: runtime_dir.join("sessions").join(id.to_string()) }
    }
    pub fn spec(&self) -> PathBuf {
        self.root.join("spec.json")
    }
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }
    pub fn stop(&self) -> PathBuf {
        self.root.join("stop")
    }
    pub fn output(&self) -> PathBuf {
        self.root.join("output.log")
    }
    pub fn ingested(&self) -> PathBuf {
        self.root.join("ingested")
    }
    pub fn supervisor_log(&self) -> PathBuf {
        self.root.join("supervisor.log")
    }
    pub fn usage(&self) -> PathBuf {
        self.root.join("usage.json")
    }
    pub fn read_usage(&self) -> Option<Usage> {
        read_json(&self.usage())
    }
    pub fn sandbox_status(&self) -> PathBuf {
        self.root.join("bwrap.json")
    }
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }
    pub fn pull(&self) -> PathBuf {
        self.root.join("pull.json")
    }
    pub fn read_pull(&self) -> Option<PullState> {
        read_json(&self.pull())
    }
    pub fn prepare_dir(&self) -> PathBuf {
        self.root.join("prepare")
    }
    pub fn read_state(&self) -> Option<State> {
        read_json(&self.state())
    }
    pub fn read_spec(&self) -> Option<Spec> {
        read_json(&self.spec())
    }
    /// The sandbox of the session while its command runs: still that process (a pid alone
    /// may have been reused since).
    pub fn running_sandbox(&self) -> Option<Process> {
        let state = self.read_state()?;
        match (state.phase, state.child, state.exit) {
            (Phase::Running, Some(sandbox), None) if sandbox.alive() => Some(sandbox),
            _ => None,
        }
    }

    pub fn stop_requested(&self) -> bool {
        self.stop().exists()
    }
}

/// The marker of an image whose prepare step has run on this machine.
pub fn image_ready(runtime_dir: &Path, image: &str) -> PathBuf {
    let safe = crate::domain::runtime::image::store::escape(image);
    runtime_dir.join("images").join(format!("{safe}.ready"))
}

/// What a supervisor runs, written by the server before it starts the supervisor.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    pub session_id: Uuid,
    /// The shell command of a batch session; an interactive one runs the image's command.
    pub command: String,
    pub batch: bool,
    /// The session's environment: the image's variables, then the session's own.
    pub env: Vec<(String, String)>,
    /// The image's variables alone: all its prepare step gets (never what the launching
    /// user set).
    #[serde(default)]
    pub image_env: Vec<(String, String)>,
    /// The root the sandbox sees: `None` the host's system directories, read-only; else a
    /// directory (read-only).
    pub root: Option<PathBuf>,
    /// The image's one-time prepare step (PULLING), with its marker, when it has not run.
    pub prepare: Option<Prepare>,
    /// The OCI image to pull (PULLING, when it is not on the machine yet) and run: its
    /// root, `Env`, `WorkingDir` and command replace the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<ImagePull>,
    /// Where the command starts (the image's `WorkingDir`); the work directory when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    pub limits: super::limits::Limits,
    pub batch_timeout_seconds: Option<i64>,
    /// Between SIGTERM and killing whatever is left.
    pub grace_ms: u64,
    /// Devices the session may use (allocated accelerators), bound into the sandbox.
    pub devices: Vec<PathBuf>,
    /// How its limits are enforced (as the server detected at start).
    pub enforcement: super::limits::Enforcement,
    /// The devices are the GPUs Slurm allocated to the job the supervisor runs in
    /// (`SLURM_JOB_GPUS`), known only on the node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slurm_gpus: bool,
    /// The supervisor writes what the session uses (`usage.json`), for a server that cannot
    /// read it itself (a Slurm node's processes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub report_usage: bool,
    /// The apps started with the session (in the background, before its command), each
    /// with the command its image declares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppStart>,
    /// A Slurm job's relay of the session's apps, for the server alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<crate::domain::runtime::slurm::relay::Relay>,
    /// Folders bound into the sandbox, in order, after the work directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<crate::domain::storage::mounts::Bind>,
}

/// An app started with the session.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AppStart {
    pub name: String,
    /// Its command, `{base}` made the path it is served under.
    pub command: String,
}

/// An OCI image a supervisor pulls into its machine's store before the session starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImagePull {
    pub target: crate::domain::runtime::image::registry::Target,
    /// The runtime directory whose store it goes to.
    pub store: PathBuf,
    /// Most bytes one image may take (`--image-cache-limit`).
    pub limit: u64,
    /// The declaration names the command an interactive session runs: the image's
    /// `Entrypoint` and `Cmd` do not replace it.
    pub declared_command: bool,
    /// Ask the registry what a tag names now (what this machine pulled before serves only
    /// when the registry cannot be reached); a digest is never asked again.
    #[serde(default)]
    pub refresh: bool,
}

/// How far the pull of a session's image is (`pull.json`), and what it resolved to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PullState {
    pub progress: crate::domain::runtime::image::Progress,
    /// The manifest's digest, once pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl Spec {
    /// The spec with the apps of an interactive session's image that have a command.
    pub fn with_apps(mut self, s: &entity::session::Model, apps: &[crate::domain::apps::AppSpec]) -> Self {
        if s.session_type == crate::domain::model::SessionType::Interactive.as_str() {
            self.apps = apps
                .iter()
                .filter_map(|a| {
                    let command = a.command_for(&crate::domain::apps::base(s.id, &a.name))?;
                    Some(AppStart { name: a.name.clone(), command })
                })
                .collect();
        }
        self
    }

    /// The spec with the folders its session mounts (none: `None`); `Err` says why they
    /// cannot be bound.
    pub fn mounting(
        mut self,
        binds: Option<Result<Vec<crate::domain::storage::mounts::Bind>, String>>,
    ) -> Result<Self, String> {
        self.mounts = binds.transpose().map_err(|why| format!("cannot mount its folders: {why}"))?.unwrap_or_default();
        Ok(self)
    }

    /// The spec of a session whose image is pulled (`Some`): the image is its root, and
    /// nothing of the machine's is prepared.
    pub fn pulling(mut self, pull: Option<ImagePull>) -> Self {
        if pull.is_some() {
            self.root = None;
            self.prepare = None;
        }
        self.pull = pull;
        self
    }
}

/// What a supervisor measured its session using, when the spec asks ([`Spec::report_usage`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    /// Cores kept busy since the previous report; none in the first.
    pub cpu: Option<f64>,
    /// Bytes resident.
    pub mem: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Prepare {
    pub command: String,
    pub marker: PathBuf,
}

/// Where a supervisor is in running its session.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Directories and limits being set up.
    Preparing,
    /// The image's prepare step runs.
    Pulling,
    /// Ready to start.
    Prepared,
    /// The sandbox is starting.
    Creating,
    /// The command runs.
    Running,
    /// Over: see the exit record.
    Exited,
}

/// A process, by pid and start time (a pid alone may be reused).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Process {
    pub pid: u32,
    pub started: u64,
}

impl Process {
    /// This process.
    pub fn current() -> Option<Self> {
        let pid = std::process::id();
        Some(Self { pid, started: start_time(pid)? })
    }

    /// Whether it still runs (a zombie does not).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.started)
    }
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), unless
/// it is gone or a zombie.
pub fn start_time(pid: u32) -> Option<u64> {
    parse_start_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The start time a `/proc/<pid>/stat` text gives, unless its process is a zombie.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces: read after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") || fields.first() == Some(&"X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// How a session ended.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Exit {
    /// The command's exit code (128 + n when signal n killed it).
    pub code: Option<i32>,
    pub oom_killed: bool,
    pub timed_out: bool,
    /// The session was asked to stop.
    pub stopped: bool,
    /// The sandbox (or the prepare step) failed before the command ran.
    pub failed: Option<String>,
    /// Its work directory grew past the limit: it was ended.
    #[serde(default)]
    pub disk_exceeded: bool,
}

/// What a supervisor reports.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub phase: Phase,
    pub supervisor: Process,
    /// The sandbox's init (host pid and start time), once the command runs.
    pub child: Option<Process>,
    /// The image's prepare step ran (the session went through PULLING).
    #[serde(default)]
    pub pulled: bool,
    /// The limits as enforced, e.g. "memory: cgroup v1 memory.limit_in_bytes".
    pub enforced: Vec<String>,
    pub exit: Option<Exit>,
}

/// Writes `value` as JSON to `path` atomically (a reader sees the old file or the new one).
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    {
        // Readable by the server's user alone (a spec holds the session's environment).
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(&serde_json::to_vec(value).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
    }
    std::fs::rename(tmp, path)
}

pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = Process::current().expect("own start time");
        assert!(me.alive());
        assert!(!Process { pid: me.pid, started: me.started + 1 }.alive(), "a reused pid is not the same process");
        assert!(start_time(u32::MAX).is_none());
    }

    #[test]
    fn state_round_trips_through_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let state = State {
            phase: Phase::Exited,
            supervisor: Process { pid: 1, started: 2 },
            child: Some(Process { pid: 3, started: 4 }),
            pulled: false,
            enforced: vec!["memory".into()],
            exit: Some(Exit { code: Some(3), ..Exit::default() }),
        };
        write_json(&path, &state).expect("write");
        assert_eq!(read_json::<State>(&path), Some(state));
        assert!(Phase::Preparing < Phase::Running, "phases are ordered as a session starts");
        let root = Path::new("/r");
        assert_ne!(image_ready(root, "a:b"), image_ready(root, "a_b"), "distinct images, distinct markers");
        assert_eq!(image_ready(root, "python:3.12"), Path::new("/r/images/python_3a3.12.ready"));
    }
}
