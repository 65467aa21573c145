//! A shell inside a running session's sandbox, under a pseudo-terminal: the `terminal` app.
//!
//! The shell is started by `sessiond enter` ([`super::enter`]), which joins the session's
//! cgroups, enters the sandbox's namespaces, root and working directory, and takes the
//! confinement of the session's own processes before it runs anything: the session's uid
//! and gid, no capabilities, an empty bounding set, `no_new_privs`, a clean environment.
//! The shell sees and may do exactly what the session's processes may. Only the session's
//! owner may open it.
//!
//! The pseudo-terminal is read and written without blocking ([`Pty`]): an open terminal
//! holds no thread, and its descriptor is closed as soon as the terminal is. Closing hangs
//! up ([`Shell::hang_up`]): SIGHUP to everything the shell started in its session, then
//! SIGKILL to the shell and the jobs it still leads; a process started to outlive the
//! terminal (`nohup`, `setsid`) stays, within the session's limits.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use uuid::Uuid;

use super::files::SessionDir;
use super::limits::Enforcement;
use crate::domain::directory::auth::Viewer;
use crate::domain::model::SessionType;
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, sessions::visibility};

/// What a terminal needs of the local runtime.
#[derive(Clone, Debug)]
pub struct LocalAccess {
    pub agent: String,
    pub dir: PathBuf,
    pub enforcement: Enforcement,
    /// The `sessiond` executable, whose `enter` starts the shell.
    pub executable: PathBuf,
    /// The dialers of the sessions whose apps are open.
    pub dialers: std::sync::Arc<super::dial::Dialers>,
}

/// How long a hung-up shell has to end before it is killed.
pub const HANG_UP_GRACE: Duration = Duration::from_secs(1);

/// The master side of a pseudo-terminal, non-blocking: one descriptor to read, one to
/// write (both of the same terminal), one to resize.
pub struct Pty {
    output: tokio::sync::Mutex<pipe::Receiver>,
    input: tokio::sync::Mutex<pipe::Sender>,
    control: OwnedFd,
}

impl Pty {
    /// Reads what the shell wrote: `Ok(0)` once nothing can write any more.
    pub async fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.output.lock().await.read(buf).await {
            // The last writer closed the other side.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => Ok(0),
            other => other,
        }
    }

    /// Writes some of `bytes` (the count), waiting until the terminal takes any.
    pub async fn write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        self.input.lock().await.write(bytes).await
    }

    /// Changes the terminal's size.
    pub fn resize(&self, cols: u16, rows: u16) {
        let size = rustix::termios::Winsize { ws_row: rows.max(1), ws_col: cols.max(1), ws_xpixel: 0, ws_ypixel: 0 };
        rustix::termios::tcsetwinsize(&self.control, size).ok();
    }
}

/// An open shell.
pub struct Shell {
    pub pty: Pty,
    /// `nsenter`, the leader of the shell's session (its pid is the session's id).
    pub child: tokio::process::Child,
}

impl Shell {
    /// Hangs the terminal up: SIGHUP to every process of the shell's session at once; after
    /// [`HANG_UP_GRACE`], SIGKILL to the shell and the process groups it leads. Returns at
    /// once; the rest happens in the background.
    pub fn hang_up(self) {
        let Shell { pty, mut child } = self;
        drop(pty); // the descriptors go now
        let Some(leader) = child.id() else { return };
        // Reading `/proc` is blocking work: off the request's worker.
        tokio::spawn(async move {
            let hang_up = move || {
                for p in super::signal::processes().into_iter().filter(|p| p.session == leader) {
                    super::signal::kill(p.pid, nix::sys::signal::Signal::SIGHUP);
                }
            };
            tokio::task::spawn_blocking(hang_up).await.ok();
            if tokio::time::timeout(HANG_UP_GRACE, child.wait()).await.is_err() {
                child.start_kill().ok();
            }
            let kill = move || {
                let all = super::signal::processes();
                // The shell's own groups: `enter`'s, and the shell's (the shell's jobs stay
                // in its session, with groups of their own).
                let mut groups: Vec<u32> = vec![leader];
                groups.extend(all.iter().filter(|p| p.parent == leader).map(|p| p.group));
                for p in all.iter().filter(|p| p.session == leader && groups.contains(&p.group)) {
                    super::signal::kill(p.pid, super::signal::KILL);
                }
            };
            tokio::task::spawn_blocking(kill).await.ok();
            child.wait().await.ok();
        });
    }
}

/// Whether a session offers its terminal now: interactive, RUNNING on this machine.
pub fn offered(access: Option<&LocalAccess>, s: &entity::session::Model) -> bool {
    access.is_some_and(|a| s.agent_id.as_deref() == Some(a.agent.as_str()))
        && s.session_type == SessionType::Interactive.as_str()
        && s.status == SessionStatus::Running.as_str()
}

/// Whether `viewer` may (still) use the terminal of session `id`: they own it and may work
/// on it ([`visibility::session_to_work_on`]).
/// A session that is not theirs is not found.
pub async fn allowed(
    db: &sea_orm::DatabaseConnection,
    viewer: &Viewer,
    id: Uuid,
) -> DomainResult<entity::session::Model> {
    let s = visibility::session_to_work_on(db, viewer, id).await?;
    if s.owner_id != viewer.user_id {
        return Err(DomainError::NotFound("session")); // an administrator sees it, but it is not theirs
    }
    Ok(s)
}

/// Opens a shell in the sandbox of `s` (whose terminal `viewer` may use, [`allowed`]),
/// `cols` × `rows`; refused when its terminal is not offered here now.
pub fn open(access: Option<&LocalAccess>, s: &entity::session::Model, cols: u16, rows: u16) -> DomainResult<Shell> {
    let id = s.id;
    let running = "the terminal is open while an interactive session runs on this machine";
    let access = access.filter(|_| offered(access, s)).ok_or_else(|| not_offered(running))?;
    let sd = SessionDir::of(&access.dir, id);
    let (sandbox, spec) = sd.running_sandbox().zip(sd.read_spec()).ok_or_else(|| not_offered(running))?;
    let pid = sandbox.pid;
    if !Path::new(&format!("/proc/{pid}/root/bin/sh")).exists() {
        return Err(not_offered("this session's image has no /bin/sh for the terminal"));
    }
    let mut args: Vec<String> = vec!["enter".into(), "--pid".into(), pid.to_string()];
    args.extend(["--started".into(), sandbox.started.to_string()]);
    args.extend(["--max-file".into(), spec.limits.disk.to_string()]);
    for f in access.enforcement.join_files(id) {
        args.extend(["--join".into(), f.to_string_lossy().into_owned()]);
    }
    if matches!(access.enforcement, Enforcement::Watchdog) {
        // The supervisor's memory watchdog counts the shell too (it is in the sandbox's pid
        // namespace); the cores and file limits are set here, as for the session.
        args.extend(["--watchdog-cores".into(), spec.limits.cores.to_string()]);
    }
    args.extend(["--".into(), "/bin/sh".into(), "-i".into()]);
    spawn(&access.executable, &args, &[], None, cols, rows)
        .map_err(|e| DomainError::invariant(format!("opening a terminal failed: {e}")))
}

/// A terminal that cannot open now, and why.
pub fn not_offered(why: &str) -> DomainError {
    DomainError::bad_input("NOT_RUNNING", None, why.to_owned())
}

/// Runs `program` with `args` (and only `env` besides a standard `PATH`, in `dir` when
/// given) as the leader of a new session whose controlling terminal is a new
/// pseudo-terminal of `cols` × `rows`.
pub(crate) fn spawn(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    dir: Option<&Path>,
    cols: u16,
    rows: u16,
) -> std::io::Result<Shell> {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    let slave = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(OsStr::from_bytes(name.as_bytes()))?
    };
    let size = rustix::termios::Winsize { ws_row: rows.max(1), ws_col: cols.max(1), ws_xpixel: 0, ws_ypixel: 0 };
    rustix::termios::tcsetwinsize(&master, size)?;
    rustix::io::ioctl_fionbio(&master, true)?;
    super::signal::children_start_with_defaults();
    let mut cmd = tokio::process::Command::new("setsid");
    // `--ctty`: the terminal on its standard input becomes the new session's.
    cmd.arg("--ctty").arg(program).args(args);
    cmd.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.stdin(slave.try_clone()?).stdout(slave.try_clone()?).stderr(slave);
    cmd.kill_on_drop(false);
    let child = cmd.spawn()?;
    drop(cmd); // its copies of the terminal's other side
    // Not a pipe, but read and written the same way: without blocking, woken by epoll.
    let output = pipe::Receiver::from_owned_fd_unchecked(master.try_clone()?)?;
    let input = pipe::Sender::from_owned_fd_unchecked(master.try_clone()?)?;
    let pty = Pty { output: output.into(), input: input.into(), control: master };
    Ok(Shell { pty, child })
}
