//! Signals and process trees, through `nix`'s safe calls and `/proc`.

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

pub const TERM: Signal = Signal::SIGTERM;
pub const KILL: Signal = Signal::SIGKILL;

/// Sends `sig` to a process; a process already gone is not an error.
pub fn kill(pid: u32, sig: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        signal::kill(Pid::from_raw(pid), sig).ok();
    }
}

/// Makes every program this process starts from now on begin with each signal's default
/// handling. A signal ignored when this process started stays ignored across `exec`: under
/// `nohup` (SIGHUP) or a script's `&` (SIGINT, SIGQUIT), every session's processes would
/// ignore them too, and a terminal's hang-up would leave its jobs running. A handler, unlike
/// "ignore", is reset at `exec`: each such signal gets one (this process still lets it
/// pass, as it did), and its children start as from a fresh login. Once per process.
pub fn children_start_with_defaults() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        for signal in ignored() {
            // The handler stays when the listener goes. Signals tokio refuses (SIGSEGV,
            // SIGILL, ...) stay as they are.
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(signal)).ok();
        }
    });
}

/// The standard signals this process ignores now (`/proc/self/status`'s `SigIgn`), but
/// SIGPIPE: the Rust runtime ignores it itself and resets it for every program it starts.
pub fn ignored() -> Vec<i32> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    (1..=31).filter(|n| mask & (1 << (n - 1)) != 0 && *n != Signal::SIGPIPE as i32).collect()
}

/// `root` and every process below it (parents before children): from each process's
/// `/proc/<pid>/task/<tid>/children`, the tree's own size in reads, not the machine's;
/// from a scan of all of `/proc` where the kernel has no such file.
pub fn tree(root: u32) -> Vec<u32> {
    if std::fs::metadata(format!("/proc/{root}/task/{root}/children")).is_ok() {
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            let p = out[i];
            for task in std::fs::read_dir(format!("/proc/{p}/task")).into_iter().flatten().flatten() {
                let Ok(children) = std::fs::read_to_string(task.path().join("children")) else { continue };
                out.extend(children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
            }
            i += 1;
        }
        return out;
    }
    tree_by_scan(root)
}

/// [`tree`] from every process's parent, as `/proc/<pid>/stat` gives it.
fn tree_by_scan(root: u32) -> Vec<u32> {
    let all = processes();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(all.iter().filter(|q| q.parent == p).map(|q| q.pid));
        i += 1;
    }
    out
}

/// A process as `/proc/<pid>/stat` shows it.
pub struct Proc {
    pub pid: u32,
    pub parent: u32,
    pub group: u32,
    pub session: u32,
}

/// Every process of this machine.
pub fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return out };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // After the command's name (which may hold spaces): state, parent, group, session.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let f: Vec<u32> = after.split_whitespace().skip(1).take(3).filter_map(|v| v.parse().ok()).collect();
        if let [parent, group, session] = f[..] {
            out.push(Proc { pid, parent, group, session });
        }
    }
    out
}

/// Every process whose pid namespace is `ns` (as `/proc/<pid>/ns/pid` links to it).
pub fn in_namespace(ns: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            (std::fs::read_link(e.path().join("ns/pid")).ok()? == ns).then_some(pid)
        })
        .collect()
}

/// The CPU time the processes have had, in seconds: their own and that of the children
/// they reaped (`/proc/<pid>/stat`, in the kernel's fixed 100 ticks a second).
pub fn cpu_seconds(pids: &[u32]) -> f64 {
    const TICKS: f64 = 100.0;
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|stat| {
            // After the command's name (which may hold spaces), fields 14 to 17: utime,
            // stime, cutime, cstime.
            let rest = &stat[stat.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks: Option<Vec<f64>> = fields.get(11..15)?.iter().map(|f| f.parse().ok()).collect();
            Some(ticks?.iter().sum::<f64>())
        })
        .sum::<f64>()
        / TICKS
}

/// Resident memory of the processes, in bytes (`VmRSS`).
pub fn resident(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_holds_the_children_and_their_memory() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep");
        let me = std::process::id();
        let t = tree(me);
        assert_eq!(t[0], me);
        assert!(t.contains(&child.id()), "{t:?}");
        // A tree nothing else changes meanwhile (this process's own changes with other
        // tests' children): a shell with two children.
        let mut shell = std::process::Command::new("sh").args(["-c", "sleep 5 & sleep 5; wait"]).spawn().expect("sh");
        let root = shell.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while tree(root).len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (mut by_children, mut by_scan) = (tree(root), tree_by_scan(root));
        by_children.sort_unstable();
        by_scan.sort_unstable();
        assert_eq!(by_children.len(), 3, "the shell and its two sleeps: {by_children:?}");
        assert_eq!(by_children, by_scan, "both ways find the same tree");
        for pid in by_children.iter().rev() {
            kill(*pid, KILL);
        }
        shell.wait().expect("reaped");
        assert!(resident(&[me]) > 1 << 20, "this process holds more than a MiB");
        kill(child.id(), KILL);
        child.wait().expect("reaped");
    }
}
