//! The sandbox a session runs in: Debian's `bubblewrap` (`bwrap`).
//!
//! Every namespace is unshared (the network too: the session has only its own loopback),
//! every capability dropped; the session runs as an unprivileged uid (the server, when it
//! runs as root, first drops to `nobody` with `setpriv`, so the session is unprivileged on
//! the host too, not only inside its user namespace); it sees a read-only root (the host's
//! system directories, or the image's directory), a private `/tmp` (of at most the
//! session's memory), fresh `/proc` and
//! `/dev`, and its own work directory as its home: not the server's files, nor another
//! session's. `--die-with-parent` ties it to its supervisor; `--json-status-fd` reports the
//! sandbox's init pid, then the command's exit code, which tells a sandbox that failed to
//! start (no pid) from a command that failed.
//!
//! The command line is started by `/bin/sh`, which first enters the session's cgroups (so
//! nothing of the session runs outside them) and opens the status file as fd 3, then
//! becomes the sandbox with `exec`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::files::Spec;

/// The uid and gid sessions run as when the server runs as root.
pub const NOBODY: u32 = 65534;

/// Where a session's work directory appears inside its sandbox.
pub const HOME: &str = "/home/work";

const SYSTEM_DIRS: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"];

/// What is around the sandbox: how limits are applied from outside.
pub struct Wrapping {
    /// `cgroup.procs` files the starting shell writes its pid to.
    pub join: Vec<PathBuf>,
    /// CPU affinity (a `taskset` list) when no cgroup limits the CPU.
    pub cpus: Option<String>,
    /// Drop to [`NOBODY`] first (the server runs as root).
    pub drop_privileges: bool,
    /// Unprivileged: bubblewrap starts in a user namespace of its own (`sessiond userns`,
    /// this executable), which the server's dialer and terminal enter to reach the
    /// sandbox's namespaces ([`super::enter::enter_namespaces`]).
    pub holder: Option<PathBuf>,
    /// The image's prepare step: the host's network (it may download), the image's
    /// variables only, and an empty directory of its own instead of the session's.
    pub prepare: bool,
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The session's script: its apps started in the background first (their output in the
/// session's log, each line of sessiond's own saying which starts), then its command.
pub fn with_apps(spec: &Spec) -> String {
    let mut script = String::new();
    for app in &spec.apps {
        script.push_str(&format!(
            "echo {} >&2\n/bin/sh -c {} &\n",
            quote(&format!("sessiond: starting the app {}", app.name)),
            quote(&app.command)
        ));
    }
    script.push_str(&spec.command);
    script
}

/// The command that runs `script` (a shell command) in the session's sandbox.
pub fn command(spec: &Spec, work: &Path, status_file: &Path, script: &str, wrapping: &Wrapping) -> Command {
    let mut outer = String::new();
    for f in &wrapping.join {
        outer.push_str(&format!("echo $$ > {} || exit 125\n", quote(&f.to_string_lossy())));
    }
    outer.push_str(&format!("exec 3> {}\nexec", quote(&status_file.to_string_lossy())));
    let mut words: Vec<String> = Vec::new();
    if let Some(cpus) = &wrapping.cpus {
        words.extend(["taskset".into(), "-c".into(), cpus.clone()]);
        words.extend(["prlimit".into(), "--core=0".into(), "--nofile=1024:1024".into(), "--".into()]);
    }
    // No file larger than the work directory's limit (the watchdog holds the total).
    words.extend(["prlimit".into(), format!("--fsize={}", spec.limits.disk.max(1)), "--".into()]);
    if wrapping.drop_privileges {
        words.extend(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--"].map(str::to_owned));
    }
    if let Some(sessiond) = &wrapping.holder {
        words.extend([sessiond.to_string_lossy().into_owned(), "userns".into(), "--".into()]);
    }
    words.extend(bwrap_args(spec, work, wrapping.prepare));
    words.extend(["/bin/sh".into(), "-c".into(), script.to_owned()]);
    for w in &words {
        outer.push(' ');
        outer.push_str(&quote(w));
    }
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(outer);
    c
}

fn bwrap_args(spec: &Spec, work: &Path, prepare: bool) -> Vec<String> {
    let network = prepare;
    let mut a: Vec<String> =
        ["bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534", "--hostname", "session"]
            .map(str::to_owned)
            .into();
    if network {
        a.push("--share-net".into());
    }
    a.extend(["--die-with-parent", "--new-session", "--cap-drop", "ALL"].map(str::to_owned));
    match &spec.root {
        Some(dir) => a.extend(["--ro-bind".into(), path(dir), "/".into()]),
        None => {
            for d in SYSTEM_DIRS {
                a.extend(["--ro-bind-try".into(), d.into(), d.into()]);
            }
        }
    }
    // `/tmp` holds at most the session's memory (its pages count against it too, in a
    // cgroup).
    a.extend(["--proc".into(), "/proc".into(), "--dev".into(), "/dev".into()]);
    a.extend(["--size".into(), spec.limits.memory.to_string(), "--tmpfs".into(), "/tmp".into()]);
    for d in &spec.devices {
        a.extend(["--dev-bind-try".into(), path(d), path(d)]);
    }
    let start_in = spec.workdir.as_deref().filter(|_| !prepare).unwrap_or(HOME);
    a.extend(["--bind".into(), path(work), HOME.into()]);
    if !prepare {
        for m in &spec.mounts {
            let how = if m.read_only { "--ro-bind" } else { "--bind" };
            a.extend([how.into(), path(&m.source), m.target.clone()]);
        }
    }
    a.extend(["--chdir".into(), start_in.into()]);
    a.push("--clearenv".into());
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), HOME.into()),
        ("USER".into(), "nobody".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    env.extend(if prepare { &spec.image_env } else { &spec.env }.iter().cloned());
    for (k, v) in env {
        a.extend(["--setenv".into(), k, v]);
    }
    a.extend(["--json-status-fd".into(), "3".into(), "--".into()]);
    a
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `s` as one shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What `bwrap --json-status-fd` wrote: the sandbox's init pid (host), then its exit code.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SandboxStatus {
    pub child_pid: Option<u32>,
    pub exit_code: Option<i32>,
}

pub fn read_status(file: &Path) -> SandboxStatus {
    let mut s = SandboxStatus::default();
    let Ok(text) = std::fs::read_to_string(file) else { return s };
    // One JSON object per line.
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if let Some(p) = v.get("child-pid").and_then(serde_json::Value::as_u64) {
            s.child_pid = u32::try_from(p).ok();
        }
        if let Some(c) = v.get("exit-code").and_then(serde_json::Value::as_i64) {
            s.exit_code = i32::try_from(c).ok();
        }
    }
    s
}

/// Whether sessions can be sandboxed here: runs `true` in a sandbox as a session would.
/// `Err` says why not.
pub fn probe(scratch: &Path) -> Result<(), String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let work = scratch.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let root = is_root();
    if root {
        super::prepare_dirs(scratch, &work).map_err(|e| format!("cannot hand the work directory over: {e}"))?;
    }
    let spec = Spec {
        session_id: uuid::Uuid::nil(),
        command: "true".into(),
        batch: true,
        env: Vec::new(),
        image_env: Vec::new(),
        root: None,
        prepare: None,
        pull: None,
        workdir: None,
        limits: super::limits::Limits { cores: 1, memory: 64 << 20, pids: 64, disk: 64 << 20 },
        batch_timeout_seconds: None,
        grace_ms: 0,
        devices: Vec::new(),
        enforcement: super::limits::Enforcement::Watchdog,
        slurm_gpus: false,
        report_usage: false,
        apps: Vec::new(),
        relay: None,
        mounts: Vec::new(),
    };
    let status = scratch.join("probe.json");
    let wrapping = Wrapping { join: Vec::new(), cpus: None, drop_privileges: root, holder: None, prepare: false };
    let out = command(&spec, &work, &status, "exit 7", &wrapping)
        .output()
        .map_err(|e| format!("cannot start /bin/sh: {e}"))?;
    let result = read_status(&status);
    std::fs::remove_dir_all(scratch).ok();
    match (out.status.code(), result.child_pid) {
        (Some(7), Some(_)) => Ok(()),
        _ => Err(format!(
            "bubblewrap could not start a sandbox ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_quoted_whatever_it_holds() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote("$(echo no) 'x' \"y\"")))
            .output()
            .expect("sh");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "$(echo no) 'x' \"y\"");
    }

    #[test]
    fn the_status_file_gives_the_pid_then_the_exit_code() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("s.json");
        std::fs::write(&f, "{ \"child-pid\": 42, \"pid-namespace\": 1 }\n{ \"exit-code\": 137 }\n").expect("write");
        assert_eq!(read_status(&f), SandboxStatus { child_pid: Some(42), exit_code: Some(137) });
        std::fs::write(&f, "").expect("write");
        assert_eq!(read_status(&f), SandboxStatus::default(), "a sandbox that never started");
    }
}
