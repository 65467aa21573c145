//! This machine as the local agent: its capacity, the devices a session may be given, and
//! the session directories' ownership and removal.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::sandbox;

/// Removes a finished session's directory. It goes out of `sessions/` first (a rename, which
/// its contents cannot refuse), so a tree the session made unremovable is never looked at
/// again; `trash/` is emptied as far as it can be.
pub(super) fn remove_session_dir(runtime_dir: &Path, dir: &Path) {
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

/// The runtime directory when none is given (`--runtime-dir`): relative to where the
/// server starts.
pub const DEFAULT_RUNTIME_DIR: &str = "sessiond-runtime";

/// Where sessions of a server running as root keep their directories when the default one
/// is out of their reach: a directory of its own per configured path, the same at every
/// start (a restart finds its sessions).
const SHARED_RUNTIME_ROOT: &str = "/var/lib/sessiond";

/// The local runtime's directory for `dir` (absolute): `dir` itself, unless the server runs
/// as root (sessions then run as `nobody`) and a directory above `dir` does not let others
/// through (a root user's 0700 home). Then the default moves to a directory of its own
/// under /var/lib/sessiond, said in the second value; a directory given explicitly is an
/// error that says what to do.
pub fn reachable_runtime_dir(dir: &Path, explicit: bool) -> Result<(PathBuf, Option<String>), String> {
    if !sandbox::is_root() {
        return Ok((dir.to_owned(), None));
    }
    let Some(closed) = closed_ancestor(dir) else { return Ok((dir.to_owned(), None)) };
    let why = format!(
        "{} is closed to other users (mode {:04o}), so sessions, which run as `nobody`, cannot reach {}",
        closed.display(),
        mode(&closed) & 0o7777,
        dir.display()
    );
    if explicit {
        return Err(format!(
            "{why}: give --runtime-dir a directory under one every user may pass through, such as {SHARED_RUNTIME_ROOT}"
        ));
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let moved = Path::new(SHARED_RUNTIME_ROOT).join(format!("runtime-{name}"));
    if let Some(still) = closed_ancestor(&moved) {
        return Err(format!(
            "{why}, nor {} ({} is closed too): give --runtime-dir a directory every user may pass through",
            moved.display(),
            still.display()
        ));
    }
    let note = format!("{why}; sessions keep their directories in {} instead", moved.display());
    Ok((moved, Some(note)))
}

/// The first existing directory above `dir` that others may not pass through.
fn closed_ancestor(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().skip(1).filter(|a| a.exists()).find(|a| mode(a) & 0o001 == 0).map(Path::to_owned)
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map_or(0, |m| m.permissions().mode())
}

/// Makes a directory traversable by the sessions' unprivileged uid (not listable).
pub(super) fn open_to_traverse(dir: &Path) -> std::io::Result<()> {
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
pub(crate) fn capacity() -> Value {
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

/// The NVIDIA devices of the GPUs Slurm allocated to the job this process runs in (its
/// `SLURM_JOB_GPUS` indices), and the control devices they need.
pub(crate) fn slurm_job_gpus() -> Vec<PathBuf> {
    let Ok(indices) = std::env::var("SLURM_JOB_GPUS") else { return Vec::new() };
    let mut gpus: Vec<PathBuf> = indices
        .split(',')
        .filter_map(|i| i.trim().parse::<u32>().ok())
        .map(|i| PathBuf::from(format!("/dev/nvidia{i}")))
        .filter(|p| p.exists())
        .collect();
    if !gpus.is_empty() {
        gpus.extend(
            ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
                .into_iter()
                .map(PathBuf::from)
                .filter(|p| p.exists()),
        );
    }
    gpus
}

/// The first `n` NVIDIA devices and the control devices they need (none on most machines).
pub(super) fn accelerator_devices(n: usize) -> Vec<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_directory_under_a_closed_one_moves_or_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().expect("a directory");
        let dir = home.path().join("work").join(DEFAULT_RUNTIME_DIR);
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).expect("open");
        assert_eq!(reachable_runtime_dir(&dir, false).expect("reachable"), (dir.clone(), None));
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).expect("close");
        if !sandbox::is_root() {
            // Sessions run as this user: nothing to move.
            assert_eq!(reachable_runtime_dir(&dir, false).expect("as it is"), (dir, None));
            return;
        }
        let (moved, note) = reachable_runtime_dir(&dir, false).expect("moved");
        assert!(moved.starts_with(SHARED_RUNTIME_ROOT), "{}", moved.display());
        assert!(note.expect("said").contains("closed to other users (mode 0700)"));
        assert_eq!(reachable_runtime_dir(&dir, false).expect("moved").0, moved, "the same at every start");
        let refused = reachable_runtime_dir(&dir, true).expect_err("given explicitly");
        assert!(refused.contains("give --runtime-dir a directory"), "{refused}");
    }
}
