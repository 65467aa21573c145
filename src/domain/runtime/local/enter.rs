//! `sessiond enter`: runs a program inside a running session's sandbox, confined exactly as
//! the session's own processes are. The terminal starts its shell through it.
//!
//! In order: every inherited descriptor but the standard ones is closed; the process joins
//! the session's cgroups; as root, it leaves every supplementary group and takes the
//! session's gid; it enters the sandbox's user namespace (which gives it, there only, the
//! capabilities to enter the rest), then its cgroup, IPC, host-name, network, pid and mount
//! namespaces, its root and working directory; it empties its capability bounding set, sets
//! `no_new_privs`, becomes the session's uid and clears every capability. Only then does it
//! start the program (a child, so that it is inside the sandbox's pid namespace) and wait
//! for it. The program runs with a clean environment: no capabilities, nothing in its
//! bounding set, `no_new_privs`, the session's uid and gid, in the session's cgroups.
//! Nothing of the host's file system is needed inside the sandbox but the program itself.

use std::fs::File;
use std::path::PathBuf;

use nix::sched::CloneFlags;
use nix::unistd::{Gid, Uid};

use super::sandbox::{HOME, NOBODY, is_root};

/// What to enter, and what to run there.
#[derive(Debug)]
pub struct Entry<'a> {
    /// The sandbox's init (its host pid), and its start time: a pid alone may have been
    /// reused since.
    pub pid: u32,
    pub started: u64,
    /// `cgroup.procs` files of the session's cgroups.
    pub join: &'a [PathBuf],
    /// The largest file the session may write (its work directory's limit).
    pub max_file: u64,
    /// Where no cgroup limits the session: the cores it may run on (as its processes are
    /// pinned), and no core files, 1 024 open files (as theirs).
    pub watchdog_cores: Option<u32>,
    /// The program and its arguments.
    pub command: &'a [String],
}

/// Enters, runs the program, and returns its exit code (128 + n when signal n ended it).
/// `Err` says which step failed; nothing has run then.
pub fn enter(e: &Entry<'_>) -> Result<i32, String> {
    use nix::fcntl::OFlag;
    super::supervisor::close_inherited_descriptors();
    let program = e.command.first().ok_or("no program to run")?;
    let proc = sandbox_proc(e.pid, e.started)?;
    let open = |what: &str, flags: OFlag| open_in(&proc, what, flags);
    // Everything is opened from the host's view first: once inside, it is out of sight.
    let ns = |name: &str| open(&format!("ns/{name}"), OFlag::O_RDONLY);
    let (user, cgroup, ipc, uts, net, pid, mnt) =
        (ns("user")?, ns("cgroup")?, ns("ipc")?, ns("uts")?, ns("net")?, ns("pid")?, ns("mnt")?);
    let dir = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
    let (root, cwd) = (open("root", dir)?, open("cwd", dir)?);
    let holder = holder_user_namespace(&proc);
    drop(proc);
    limit(e)?;
    let me = std::process::id().to_string();
    for f in e.join {
        std::fs::write(f, &me).map_err(|err| format!("cannot join the cgroup {}: {err}", f.display()))?;
    }
    let nobody = (Uid::from_raw(NOBODY), Gid::from_raw(NOBODY));
    if is_root() {
        // Not root's groups, nor its gid: the session's, as its processes have.
        nix::unistd::setgroups(&[]).map_err(|err| format!("cannot leave the supplementary groups: {err}"))?;
        nix::unistd::setresgid(nobody.1, nobody.1, nobody.1).map_err(|err| format!("cannot set the gid: {err}"))?;
    }
    enter_namespaces(
        &user,
        holder.as_ref(),
        &[
            (&cgroup, CloneFlags::CLONE_NEWCGROUP, "cgroup"),
            (&ipc, CloneFlags::CLONE_NEWIPC, "IPC"),
            (&uts, CloneFlags::CLONE_NEWUTS, "host-name"),
            (&net, CloneFlags::CLONE_NEWNET, "network"),
            (&pid, CloneFlags::CLONE_NEWPID, "pid"),
            (&mnt, CloneFlags::CLONE_NEWNS, "mount"),
        ],
    )?;
    nix::unistd::fchdir(&root).map_err(|err| format!("cannot reach its root: {err}"))?;
    nix::unistd::chroot(".").map_err(|err| format!("cannot take its root: {err}"))?;
    nix::unistd::fchdir(&cwd).map_err(|err| format!("cannot take its working directory: {err}"))?;
    drop((user, holder, cgroup, ipc, uts, net, pid, mnt, root, cwd));
    confine(nobody.0)?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(&e.command[1..]).env_clear();
    for (k, v) in [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", HOME),
        ("USER", "nobody"),
        ("LANG", "C.UTF-8"),
        ("TERM", "xterm-256color"),
    ] {
        cmd.env(k, v);
    }
    // A child: only it is inside the sandbox's pid namespace.
    let status = cmd.status().map_err(|err| format!("cannot start {program}: {err}"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1))
}

/// A namespace to enter: its file, its kind, and what an error calls it.
pub(super) type Namespace<'a> = (&'a File, CloneFlags, &'a str);

/// Enters a sandbox's namespaces `others` and its user namespace `user`, as nsenter does:
/// every namespace that can be entered from here first (all of them, as root), then the
/// user namespace, then the rest.
///
/// Unprivileged, the sandbox's own user namespace owns none of the others: bubblewrap
/// makes them in a first user namespace where its user is root (to mount `/dev/pts`),
/// then a second, the sandbox's, for the session's uid. The first is reached through the
/// one above it, `holder`: the user namespace of its own that an unprivileged supervisor
/// starts bubblewrap in ([`exec_in_own_user_namespace`]). Entered first, it gives the
/// capabilities over every namespace below it.
pub(super) fn enter_namespaces(user: &File, holder: Option<&File>, others: &[Namespace<'_>]) -> Result<(), String> {
    let mut later = Vec::new();
    for (f, kind, name) in others {
        match nix::sched::setns(f, *kind) {
            Ok(()) => {}
            Err(nix::errno::Errno::EPERM) => later.push((*f, *kind, *name)),
            Err(err) => return Err(format!("cannot enter its {name} namespace: {err}")),
        }
    }
    if let Some(holder) = holder.filter(|_| !later.is_empty())
        && nix::sched::setns(holder, CloneFlags::CLONE_NEWUSER).is_ok()
    {
        let mut still = Vec::new();
        for (f, kind, name) in later {
            match nix::sched::setns(f, kind) {
                Ok(()) => {}
                Err(nix::errno::Errno::EPERM) => still.push((f, kind, name)),
                Err(err) => return Err(format!("cannot enter its {name} namespace: {err}")),
            }
        }
        later = still;
    }
    nix::sched::setns(user, CloneFlags::CLONE_NEWUSER)
        .map_err(|err| format!("cannot enter its user namespace: {err}"))?;
    for (f, kind, name) in later {
        nix::sched::setns(f, kind).map_err(|err| format!("cannot enter its {name} namespace: {err}"))?;
    }
    Ok(())
}

/// The user namespace of the sandbox's parent (bubblewrap's own process), when it is not
/// this process's: the one an unprivileged supervisor started bubblewrap in.
pub(super) fn holder_user_namespace(proc: &std::os::fd::OwnedFd) -> Option<File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::MetadataExt;
    let stat = std::io::read_to_string(open_in(proc, "stat", OFlag::O_RDONLY).ok()?).ok()?;
    // The parent's pid is the second field after the command's closing parenthesis.
    let parent: u32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
    let theirs = File::open(format!("/proc/{parent}/ns/user")).ok()?;
    let ours = std::fs::metadata("/proc/self/ns/user").ok()?;
    let same = theirs.metadata().ok().is_some_and(|m| (m.dev(), m.ino()) == (ours.dev(), ours.ino()));
    (!same).then_some(theirs)
}

/// Runs `command` (bubblewrap) in a user namespace of its own, its user's uid and gid
/// mapped to themselves: a namespace above every one bubblewrap makes, which the
/// supervisor's user (the dialer, the terminal) enters to reach them
/// ([`enter_namespaces`]). Returns only on failure, why.
pub fn exec_in_own_user_namespace(command: &[String]) -> String {
    use std::os::unix::process::CommandExt;
    let Some(program) = command.first() else { return "no program to run".to_owned() };
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    if let Err(err) = nix::sched::unshare(CloneFlags::CLONE_NEWUSER) {
        return format!("cannot make a user namespace: {err}");
    }
    for (file, text) in [
        ("/proc/self/setgroups", "deny".to_owned()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1")),
    ] {
        if let Err(err) = std::fs::write(file, text) {
            return format!("cannot write {file}: {err}");
        }
    }
    let err = std::process::Command::new(program).args(&command[1..]).exec();
    format!("cannot start {program}: {err}")
}

/// The sandbox's init, held by its `/proc` directory: everything of it is opened through
/// that, and it still is that process (a pid reused since would not be) once its start
/// time is checked through it too.
pub(super) fn sandbox_proc(pid: u32, started: u64) -> Result<std::os::fd::OwnedFd, String> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    let proc = nix::fcntl::open(
        format!("/proc/{pid}").as_str(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| format!("the sandbox is gone: {err}"))?;
    let stat = std::io::read_to_string(open_in(&proc, "stat", OFlag::O_RDONLY)?)
        .map_err(|err| format!("cannot read its stat: {err}"))?;
    if super::files::parse_start_time(&stat) != Some(started) {
        return Err("the sandbox is gone (its pid names another process now)".to_owned());
    }
    // Its user namespace's ids are mapped by bubblewrap just after the sandbox starts: until
    // then, taking the session's uid there fails.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let map = std::io::read_to_string(open_in(&proc, "uid_map", OFlag::O_RDONLY)?).unwrap_or_default();
        if !map.trim().is_empty() {
            return Ok(proc);
        }
        if std::time::Instant::now() >= deadline {
            return Err("the sandbox's user namespace has no uid map".to_owned());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `what` of the sandbox's `/proc` directory.
pub(super) fn open_in(proc: &std::os::fd::OwnedFd, what: &str, flags: nix::fcntl::OFlag) -> Result<File, String> {
    use nix::fcntl::OFlag;
    nix::fcntl::openat(proc, what, flags | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())
        .map(File::from)
        .map_err(|err| format!("cannot open its {what}: {err}"))
}

/// The resource limits of the session's processes that are not cgroups: the largest file,
/// and where a watchdog stands in for cgroups, the cores, no core files and 1 024 files.
fn limit(e: &Entry<'_>) -> Result<(), String> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    // Never above what this process may have already (lowering is always allowed).
    let lower = |resource: Resource, to: u64, what: &str| -> Result<(), String> {
        let (_, hard) = getrlimit(resource).map_err(|err| format!("cannot read the {what} limit: {err}"))?;
        let to = to.min(hard);
        setrlimit(resource, to, to).map_err(|err| format!("cannot limit {what}: {err}"))
    };
    lower(Resource::RLIMIT_FSIZE, e.max_file.max(1), "the file size")?;
    if let Some(cores) = e.watchdog_cores {
        lower(Resource::RLIMIT_CORE, 0, "core files")?;
        lower(Resource::RLIMIT_NOFILE, 1024, "open files")?;
        let mut set = nix::sched::CpuSet::new();
        for cpu in 0..cores.max(1) as usize {
            set.set(cpu).map_err(|err| format!("cannot pin to cpu {cpu}: {err}"))?;
        }
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map_err(|err| format!("cannot pin to the session's cores: {err}"))?;
    }
    Ok(())
}

/// The confinement of the session's processes: an empty bounding set, `no_new_privs`,
/// the session's uid, no capability at all.
pub(super) fn confine(uid: Uid) -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(40)
        .min(63);
    for cap in 0..=last {
        let one = CapabilitySet::from_bits_retain(1 << cap);
        rustix::thread::remove_capability_from_bounding_set(one)
            .map_err(|err| format!("cannot empty the capability bounding set: {err}"))?;
    }
    rustix::thread::set_no_new_privs(true).map_err(|err| format!("cannot set no_new_privs: {err}"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(|err| format!("cannot set the uid: {err}"))?;
    let none = CapabilitySet::empty();
    rustix::thread::set_capabilities(None, CapabilitySets { effective: none, permitted: none, inheritable: none })
        .map_err(|err| format!("cannot drop the capabilities: {err}"))?;
    Ok(())
}
