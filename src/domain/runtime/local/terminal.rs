//! A shell inside a running session's sandbox, under a pseudo-terminal: the `terminal` app.
//!
//! The shell enters the sandbox's namespaces (`nsenter`: its user, mount, pid, network, IPC
//! and host-name namespaces, its root and working directory) as the session's uid, with a
//! clean environment, after entering the session's cgroups: it sees and may do exactly what
//! the session's own processes may. Only the session's owner may open it.

use std::io::{Read, Write};
use std::path::PathBuf;

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};
use uuid::Uuid;

use super::files::{Phase, SessionDir};
use super::limits::Enforcement;
use super::sandbox::{HOME, NOBODY, quote};
use crate::domain::auth::Viewer;
use crate::domain::model::SessionType;
use crate::domain::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, visibility};

/// What a terminal needs of the local runtime.
#[derive(Clone, Debug)]
pub struct LocalAccess {
    pub agent: String,
    pub dir: PathBuf,
    pub enforcement: Enforcement,
}

/// An open shell: write to `input`, read from `output`, resize through `pty`.
pub struct Shell {
    pub pty: Box<dyn MasterPty + Send>,
    pub child: Box<dyn Child + Send + Sync>,
    pub output: Box<dyn Read + Send>,
    pub input: Box<dyn Write + Send>,
}

/// Whether a session offers its terminal now: interactive, RUNNING on this machine.
pub fn offered(access: Option<&LocalAccess>, s: &entity::session::Model) -> bool {
    access.is_some_and(|a| s.agent_id.as_deref() == Some(a.agent.as_str()))
        && s.session_type == SessionType::Interactive.as_str()
        && s.status == SessionStatus::Running.as_str()
}

/// Opens a shell in session `id` for `viewer`, `cols` × `rows`. A session the viewer may
/// not see, or does not own, is not found; one whose terminal is not offered now is
/// refused.
pub async fn open(
    db: &sea_orm::DatabaseConnection,
    viewer: &Viewer,
    access: Option<&LocalAccess>,
    id: Uuid,
    cols: u16,
    rows: u16,
) -> DomainResult<Shell> {
    let s = visibility::visible_session(db, viewer, id).await?;
    if s.owner_id != viewer.user_id {
        return Err(DomainError::NotFound("session")); // an administrator sees it, but it is not theirs
    }
    let not_offered = || {
        DomainError::bad_input(
            "NOT_RUNNING",
            None,
            "the terminal is open while an interactive session runs on this machine".to_owned(),
        )
    };
    let access = access.filter(|_| offered(access, &s)).ok_or_else(not_offered)?;
    let state = SessionDir::of(&access.dir, id).read_state().ok_or_else(not_offered)?;
    let pid = match (state.phase, state.child, state.exit) {
        // Still that process: a pid alone may have been reused since.
        (Phase::Running, Some(sandbox), None) if sandbox.alive() => sandbox.pid,
        _ => return Err(not_offered()),
    };
    let mut script = String::new();
    for f in access.enforcement.join_files(id) {
        script.push_str(&format!("echo $$ > {} || exit 125\n", quote(&f.to_string_lossy())));
    }
    // As root, the shell becomes the session's uid; otherwise it already is (the sandbox
    // maps the server's uid to it) and nsenter may not change its groups.
    let credentials = if super::sandbox::is_root() {
        format!("--setuid {NOBODY} --setgid {NOBODY}")
    } else {
        "--preserve-credentials".to_owned()
    };
    script.push_str(&format!(
        "exec nsenter --target {pid} --user --mount --pid --net --ipc --uts --root --wd {credentials} \
         -- /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME={HOME} USER=nobody \
         LANG=C.UTF-8 TERM=xterm-256color /bin/sh -i"
    ));
    spawn(&script, cols, rows).map_err(|e| DomainError::invariant(format!("opening a terminal failed: {e}")))
}

fn spawn(script: &str, cols: u16, rows: u16) -> Result<Shell, String> {
    let pair = native_pty_system()
        .openpty(PtySize { rows: rows.max(1), cols: cols.max(1), pixel_width: 0, pixel_height: 0 })
        .map_err(|e| e.to_string())?;
    let mut cmd = CommandBuilder::new("/bin/sh");
    cmd.arg("-c");
    cmd.arg(script);
    cmd.env_clear();
    cmd.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    let child = pair.slave.spawn_command(cmd).map_err(|e| e.to_string())?;
    drop(pair.slave);
    let output = pair.master.try_clone_reader().map_err(|e| e.to_string())?;
    let input = pair.master.take_writer().map_err(|e| e.to_string())?;
    Ok(Shell { pty: pair.master, child, output, input })
}

/// Changes the terminal's size.
pub fn resize(pty: &dyn MasterPty, cols: u16, rows: u16) {
    pty.resize(PtySize { rows: rows.max(1), cols: cols.max(1), pixel_width: 0, pixel_height: 0 }).ok();
}
