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
