//! How a session's CPU, memory and process limits are enforced on this machine, chosen once
//! at start ([`Enforcement::detect`]):
//!
//! - **cgroup v2** where this process's cgroup can be given children with the `cpu`,
//!   `memory` and `pids` controllers: `cpu.max`, `memory.max` with `memory.oom.group` and no
//!   swap, `pids.max`; `cgroup.kill` ends everything at once;
//! - **cgroup v1** (as root): `cpu.cfs_quota_us`, `memory.limit_in_bytes` (and no swap
//!   where accounted), `pids.max`; everything is ended by killing each listed process;
//! - **otherwise** CPU affinity (`taskset`), `prlimit` (no core files, 1024 open files) and
//!   a watchdog over the session's processes that kills them all when their resident
//!   memory passes the limit.
//!
//! A session's processes enter its cgroups before the sandbox starts (the shell that starts
//! it writes its own pid, then becomes the sandbox), so nothing escapes them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The limits of a session, as the supervisor enforces them.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Limits {
    /// Whole cores (at least 1).
    pub cores: u32,
    /// Bytes of memory.
    pub memory: u64,
    /// Processes and threads.
    pub pids: u64,
    /// Bytes the work directory may hold (and the largest file the session may write).
    #[serde(default = "default_disk")]
    pub disk: u64,
}

/// The work directory's limit of a spec written before there was one.
fn default_disk() -> u64 {
    DEFAULT_WORK_DIR_LIMIT
}

/// The work directory's limit unless configured (`--work-dir-limit`): 10 GiB.
pub const DEFAULT_WORK_DIR_LIMIT: u64 = 10 << 30;

/// The cgroup controllers a session is limited by.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Enforcement {
    /// The unified hierarchy: sessions' cgroups are created under `parent`.
    V2 { parent: PathBuf },
    /// Separate hierarchies: sessions' cgroups under each controller's directory.
    V1 { cpu: PathBuf, memory: PathBuf, pids: PathBuf },
    /// No writable cgroup: affinity, prlimit and a watchdog.
    Watchdog,
}

const PREFIX: &str = "sessiond-";

impl Enforcement {
    /// Probes this machine: the first kind that works (a test cgroup is made and removed).
    pub fn detect() -> Self {
        if let Some(parent) = v2_parent()
            && probe(&parent, &["memory.max", "pids.max", "cpu.max"])
        {
            return Self::V2 { parent };
        }
        if let (Some(cpu), Some(memory), Some(pids)) = (v1_dir("cpu"), v1_dir("memory"), v1_dir("pids"))
            && probe(&cpu, &["cpu.cfs_quota_us"])
            && probe(&memory, &["memory.limit_in_bytes"])
            && probe(&pids, &["pids.max"])
        {
            return Self::V1 { cpu, memory, pids };
        }
        Self::Watchdog
    }

    /// The limits as enforced, in words, for the API and the start-up log.
    pub fn describe(&self) -> Vec<String> {
        match self {
            Self::V2 { .. } => vec![
                "cpu: cgroup v2 cpu.max (whole cores)".into(),
                "memory: cgroup v2 memory.max, no swap, the whole session killed on OOM".into(),
                "processes: cgroup v2 pids.max".into(),
            ],
            Self::V1 { .. } => vec![
                "cpu: cgroup v1 cpu.cfs_quota_us (whole cores)".into(),
                "memory: cgroup v1 memory.limit_in_bytes".into(),
                "processes: cgroup v1 pids.max".into(),
            ],
            Self::Watchdog => vec![
                "cpu: affinity to whole cores (taskset)".into(),
                "memory: a watchdog kills the session when its resident memory passes the limit".into(),
                "processes: not limited (no writable cgroup)".into(),
            ],
        }
    }

    /// The directories of a session's cgroups (none with the watchdog).
    pub fn dirs(&self, session: Uuid) -> Vec<PathBuf> {
        let name = format!("{PREFIX}{session}");
        match self {
            Self::V2 { parent } => vec![parent.join(name)],
            Self::V1 { cpu, memory, pids } => vec![cpu.join(&name), memory.join(&name), pids.join(&name)],
            Self::Watchdog => Vec::new(),
        }
    }

    /// Creates a session's cgroups with its limits.
    pub fn create(&self, session: Uuid, limits: &Limits) -> std::io::Result<()> {
        let period = 100_000u64;
        let quota = period * u64::from(limits.cores.max(1));
        match self {
            Self::V2 { .. } => {
                let dir = &self.dirs(session)[0];
                make_dir(dir)?;
                write(dir, "memory.max", &limits.memory.to_string())?;
                write(dir, "memory.swap.max", "0").ok(); // absent without swap accounting
                write(dir, "memory.oom.group", "1")?;
                write(dir, "cpu.max", &format!("{quota} {period}"))?;
                write(dir, "pids.max", &limits.pids.to_string())
            }
            Self::V1 { .. } => {
                let dirs = self.dirs(session);
                for d in &dirs {
                    make_dir(d)?;
                }
                write(&dirs[0], "cpu.cfs_period_us", &period.to_string())?;
                write(&dirs[0], "cpu.cfs_quota_us", &quota.to_string())?;
                write(&dirs[1], "memory.limit_in_bytes", &limits.memory.to_string())?;
                // Memory and swap together, where swap is accounted.
                write(&dirs[1], "memory.memsw.limit_in_bytes", &limits.memory.to_string()).ok();
                write(&dirs[2], "pids.max", &limits.pids.to_string())
            }
            Self::Watchdog => Ok(()),
        }
    }

    /// The files a process writes its pid to, to enter the session's cgroups.
    pub fn join_files(&self, session: Uuid) -> Vec<PathBuf> {
        self.dirs(session).into_iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Whether the kernel killed a process of the session for memory.
    pub fn oom_killed(&self, session: Uuid) -> bool {
        let counter = |dir: &Path, file: &str| {
            std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|s| {
                    s.lines().find_map(|l| l.strip_prefix("oom_kill ").and_then(|n| n.trim().parse::<u64>().ok()))
                })
                .unwrap_or(0)
        };
        match self {
            Self::V2 { .. } => counter(&self.dirs(session)[0], "memory.events") > 0,
            Self::V1 { .. } => {
                let memory = &self.dirs(session)[1];
                counter(memory, "memory.oom_control") > 0
            }
            Self::Watchdog => false,
        }
    }

    /// What a session's processes use now: the CPU time they have had (seconds) and their
    /// memory (bytes). From its cgroups where they count it (v2: `cpu.stat`,
    /// `memory.current`; v1: `memory.usage_in_bytes`, and the CPU time of the processes in
    /// it, `cpuacct` not being one of its controllers); with the watchdog, from the process
    /// tree under `root` (its resident memory, as the watchdog counts it; asked for only
    /// then). `None` once nothing of it is left to read.
    pub fn usage(&self, session: Uuid, root: impl FnOnce() -> Option<u32>) -> Option<(f64, f64)> {
        let read = |dir: &Path, file: &str| -> Option<String> { std::fs::read_to_string(dir.join(file)).ok() };
        match self {
            Self::V2 { .. } => {
                let dir = &self.dirs(session)[0];
                let usec: f64 = read(dir, "cpu.stat")?
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec ").and_then(|n| n.trim().parse().ok()))?;
                let memory: f64 = read(dir, "memory.current")?.trim().parse().ok()?;
                Some((usec / 1e6, memory))
            }
            Self::V1 { .. } => {
                let memory: f64 = read(&self.dirs(session)[1], "memory.usage_in_bytes")?.trim().parse().ok()?;
                Some((super::signal::cpu_seconds(&self.processes(session)), memory))
            }
            Self::Watchdog => {
                let pids = super::signal::tree(root()?);
                Some((super::signal::cpu_seconds(&pids), super::signal::resident(&pids) as f64))
            }
        }
    }

    /// The processes still in a session's cgroups.
    pub fn processes(&self, session: Uuid) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .dirs(session)
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect::<Vec<u32>>())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Kills every process of the session's cgroups (`cgroup.kill` on v2 where the kernel
    /// has it).
    pub fn kill_all(&self, session: Uuid) {
        if let Self::V2 { .. } = self
            && write(&self.dirs(session)[0], "cgroup.kill", "1").is_ok()
        {
            return;
        }
        for pid in self.processes(session) {
            super::signal::kill(pid, super::signal::KILL);
        }
    }

    /// Removes a session's cgroups once they are empty. Just after its processes were
    /// killed the kernel may still hold them a moment (the removal then fails as busy):
    /// tries again for up to two seconds. Blocks: for the supervisor, or a blocking task.
    pub fn remove_when_empty(&self, session: Uuid) {
        for _ in 0..40 {
            if self.remove(session) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Removes a session's cgroups now; whether none is left.
    pub fn remove(&self, session: Uuid) -> bool {
        let mut gone = true;
        for d in self.dirs(session) {
            match std::fs::remove_dir(&d) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => gone = false,
                _ => {}
            }
        }
        gone
    }
}

/// How the work directory's limit is enforced, in words.
pub fn disk_line(bytes: u64) -> String {
    let size = if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
    } else {
        format!("{} MiB", bytes >> 20)
    };
    format!(
        "disk: the work directory at most {size}, counting the files its processes hold open after deleting them (no larger file may be written; a watchdog ends the session past it)"
    )
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// This process's cgroup on the unified hierarchy, when it is the only one mounted.
fn v2_parent() -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    if !root.join("cgroup.controllers").exists() {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = root.join(path.trim_start_matches('/'));
    // Controllers can be handed to children only from a cgroup without processes of its
    // own: this process moves to a leaf of its own first.
    let subtree = dir.join("cgroup.subtree_control");
    if std::fs::write(&subtree, "+cpu +memory +pids").is_err() {
        let leaf = dir.join(format!("{PREFIX}server"));
        make_dir(&leaf).ok()?;
        std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).ok()?;
        std::fs::write(&subtree, "+cpu +memory +pids").ok()?;
    }
    Some(dir)
}

/// This process's directory in a v1 controller's hierarchy.
fn v1_dir(controller: &str) -> Option<PathBuf> {
    let mount = Path::new("/sys/fs/cgroup").join(controller);
    if !mount.join("cgroup.procs").exists() {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == controller).then_some(path)
    })?;
    Some(mount.join(path.trim_start_matches('/')))
}

/// Whether a child cgroup with `files` can be made (and is removed again).
fn probe(parent: &Path, files: &[&str]) -> bool {
    let dir = parent.join(format!("{PREFIX}probe-{}", std::process::id()));
    let ok = make_dir(&dir).is_ok() && files.iter().all(|f| dir.join(f).exists());
    std::fs::remove_dir(&dir).ok();
    ok
}
