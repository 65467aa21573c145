//! `sessiond supervise <dir>`: the process that owns one session's sandbox. The server
//! starts it in a process group of its own, so it outlives a restart (or a crash) of the
//! server; it reports through the session directory's files ([`super::files`]) only.
//!
//! It closes every descriptor it inherited but its standard ones (nothing of the server's
//! reaches a session), sets the limits up, runs the image's prepare step when due, starts
//! the sandbox, copies its output (size-capped) to `output.log`, ends it on a `stop` file,
//! at its batch timeout (SIGTERM, a grace period, then everything killed) or when its work
//! directory grows past its limit, and writes the exit record: the real exit code, whether
//! the kernel (or the watchdog) killed it for memory, whether it was stopped, timed out or
//! over its disk, or why the sandbox never started (or failed while setting up).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::disk::{self, DISK_EVERY};
use super::files::{self, Exit, OUTPUT_CAP, Phase, Process, SessionDir, Spec, State, read_json, write_json};
use super::limits::Enforcement;
use super::sandbox::{self, Wrapping};
use super::signal::{self, KILL, TERM};
use crate::domain::runtime::TIMEOUT_EXIT_CODE;
use crate::domain::runtime::image::store::{Store, Unpacked};
use crate::domain::runtime::image::unpack;
use crate::domain::runtime::image::{Progress, pull};

const POLL: Duration = Duration::from_millis(50);
/// How often a pull's progress is written.
const PULL_REPORT: Duration = Duration::from_millis(250);
/// How the reason of a session whose image could not be pulled begins.
pub const PULL_FAILED: &str = "pull failed: ";

/// Runs the session of `dir` to its end. `Err` only when there is nothing to report to
/// (no readable spec, no writable state).
pub fn supervise(dir: &Path) -> Result<(), String> {
    close_inherited_descriptors();
    let sd = SessionDir { root: dir.to_path_buf() };
    let mut spec = sd.read_spec().ok_or_else(|| format!("no readable spec in {}", dir.display()))?;
    if spec.slurm_gpus {
        // In a Slurm job: the GPUs Slurm gave it, numbered as Slurm numbers them.
        spec.devices = super::machine::slurm_job_gpus();
        for name in ["SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"] {
            if let Ok(value) = std::env::var(name) {
                spec.env.push((name.to_owned(), value));
            }
        }
    }
    let enforcement = &spec.enforcement.clone();
    let me = Process::current().ok_or("cannot read this process's start time")?;
    let mut state = State {
        phase: Phase::Preparing,
        supervisor: me,
        child: None,
        pulled: false,
        enforced: [enforcement.describe(), vec![super::limits::disk_line(spec.limits.disk)]].concat(),
        exit: None,
    };
    let report = |state: &State| write_json(&sd.state(), state).map_err(|e| format!("cannot write the state: {e}"));
    report(&state)?;

    let exit = match spec.pull.clone() {
        Some(image) => match pull(&sd, &image, &mut state, &report) {
            Ok((pulled, _held)) => {
                use_image(&mut spec, &image, &pulled);
                if let Some(user) = &pulled.record.config.user {
                    note(&sd, &format!("the image asks to run as user {user}: sessions run unprivileged, as nobody"));
                }
                run(&sd, &spec, enforcement, &mut state, &report)
            }
            Err(exit) => exit,
        },
        None => run(&sd, &spec, enforcement, &mut state, &report),
    };
    enforcement.kill_all(spec.session_id);
    enforcement.remove_when_empty(spec.session_id);
    state.phase = Phase::Exited;
    state.exit = Some(exit);
    report(&state)
}

/// Pulls the session's image into the machine's store (PULLING while anything is fetched,
/// progress in `pull.json` at most four times a second), until a `stop` file asks to end;
/// then holds it in use (the file returned, until the session ends) and makes the store
/// fit its limit again, removing images no session runs.
fn pull(
    sd: &SessionDir,
    image: &files::ImagePull,
    state: &mut State,
    report: &impl Fn(&State) -> Result<(), String>,
) -> Result<(Unpacked, std::fs::File), Exit> {
    let failed = |why: String| Exit { failed: Some(why), ..Exit::default() };
    let store = Store::open(&image.store).map_err(|e| failed(format!("cannot open the image store: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot pull: {e}")))?;
    let options = pull::Options { refresh: image.refresh, ..pull::Options::on_this_machine(image.limit) };
    let mut last: Option<Instant> = None;
    let mut hear = |progress: Progress| {
        if state.phase != Phase::Pulling {
            // Something is fetched: the session shows PULLING (a warm cache never does).
            state.phase = Phase::Pulling;
            state.pulled = true;
            report(state).ok();
        }
        let done = progress.bytes_done == progress.bytes_total && progress.layers_done == progress.layers_total;
        if done || last.is_none_or(|at| at.elapsed() >= PULL_REPORT) {
            last = Some(Instant::now());
            write_json(&sd.pull(), &files::PullState { progress, digest: None }).ok();
        }
    };
    // Held in use as soon as it is there; another machine's session may have removed it
    // between the pull and the hold (it was unused then): pulled again, once.
    for _ in 0..2 {
        let pulled = runtime.block_on(async {
            tokio::select! {
                pulled = pull::pull(&store, &image.target, &options, &mut hear) => Some(pulled),
                () = async { while !sd.stop_requested() { tokio::time::sleep(POLL).await } } => None,
            }
        });
        let pulled = match pulled {
            None => return Err(Exit { stopped: true, ..Exit::default() }),
            Some(Err(e)) => return Err(failed(format!("{PULL_FAILED}{e}"))),
            Some(Ok(pulled)) => pulled,
        };
        let digest = pulled.image.record.digest.clone();
        let Ok(held) = store.hold(&digest) else { continue };
        if store.unpacked(&digest).is_none() {
            continue;
        }
        // Only what was fetched makes the store grow past its limit.
        let evicted = if pulled.fetched { store.evict(image.limit) } else { Vec::new() };
        for gone in evicted {
            // The supervisor's own log: what else the machine holds is no session's business.
            eprintln!("sessiond supervise: removed image {gone} (unused, the store over --image-cache-limit)");
        }
        let progress = read_json::<files::PullState>(&sd.pull()).map(|p| p.progress).unwrap_or_default();
        write_json(&sd.pull(), &files::PullState { progress, digest: Some(digest) }).ok();
        return Ok((pulled.image, held));
    }
    Err(failed(format!("{PULL_FAILED}the image was removed from this machine as it was pulled; try again")))
}

/// The session's spec with its image's config: `Env` first (the declaration's and the
/// session's own variables win), `WorkingDir`, and `Entrypoint` + `Cmd` for an interactive
/// session unless the declaration names its command.
fn use_image(spec: &mut Spec, image: &files::ImagePull, pulled: &Unpacked) {
    let config = &pulled.record.config;
    let mine: std::collections::HashSet<&String> = spec.env.iter().map(|(k, _)| k).collect();
    let mut env: Vec<(String, String)> = config.env.iter().filter(|(k, _)| !mine.contains(k)).cloned().collect();
    env.append(&mut spec.env);
    spec.env = env;
    spec.workdir = config.working_dir.clone().filter(|w| unpack::is_dir_in_root(&pulled.root, w));
    spec.root = Some(pulled.root.clone());
    let words: Vec<&String> = config.entrypoint.iter().chain(&config.cmd).collect();
    if !spec.batch && !image.declared_command && !words.is_empty() {
        let quoted: Vec<String> = words.iter().map(|w| sandbox::quote(w)).collect();
        spec.command = format!("exec {}", quoted.join(" "));
    }
}

/// A line of sessiond's own in the session's output.
fn note(sd: &SessionDir, line: &str) {
    use std::io::Write as _;
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(sd.output()) {
        writeln!(f, "sessiond: {line}").ok();
    }
}

fn run(
    sd: &SessionDir,
    spec: &Spec,
    enforcement: &Enforcement,
    state: &mut State,
    report: &impl Fn(&State) -> Result<(), String>,
) -> Exit {
    let failed = |why: String| Exit { failed: Some(why), ..Exit::default() };
    if sd.stop_requested() {
        return Exit { stopped: true, ..Exit::default() };
    }
    if let Err(e) = enforcement.create(spec.session_id, &spec.limits) {
        return failed(format!("cannot set the session's limits: {e}"));
    }
    let wrapping = |prepare: bool| Wrapping {
        join: enforcement.join_files(spec.session_id),
        cpus: matches!(enforcement, Enforcement::Watchdog).then(|| cpu_list(spec.limits.cores)),
        drop_privileges: sandbox::is_root(),
        holder: std::env::current_exe().ok().filter(|_| !sandbox::is_root()),
        prepare,
    };
    if let Some(prepare) = &spec.prepare
        && !prepare.marker.exists()
    {
        state.phase = Phase::Pulling;
        state.pulled = true;
        report(state).ok();
        let status_file = sd.root.join("prepare.json");
        // An empty directory of its own: nothing the session's user put anywhere can
        // change what an image's preparation (shared by every later session) does.
        let scratch = sd.prepare_dir();
        if let Err(e) = std::fs::create_dir_all(&scratch)
            .and_then(|()| if sandbox::is_root() { super::prepare_dirs(&sd.root, &scratch) } else { Ok(()) })
        {
            return failed(format!("cannot create the prepare step's directory: {e}"));
        }
        let cmd = sandbox::command(spec, &scratch, &status_file, &prepare.command, &wrapping(true));
        match watch(sd, spec, enforcement, cmd, &status_file, &scratch, None, |_| {}) {
            Ok(o) if o.stopped => return Exit { stopped: true, ..Exit::default() },
            Ok(o) if o.code == Some(0) => {
                if let Some(parent) = prepare.marker.parent() {
                    std::fs::create_dir_all(parent).ok();
                }
                std::fs::write(&prepare.marker, b"").ok();
            }
            Ok(o) => return failed(format!("the image's prepare step failed ({})", describe_code(o.code))),
            Err(e) => return failed(e),
        }
    }
    state.phase = Phase::Prepared;
    report(state).ok();
    state.phase = Phase::Creating;
    report(state).ok();
    // A folder whose volume this machine does not see mounted is not bound: its files are
    // not there (and writing there would hide them).
    if let Some(why) = spec.mounts.iter().find_map(|m| crate::domain::storage::volume::ready(&m.source).err()) {
        return failed(format!("cannot mount a folder: {why}"));
    }
    let status_file = sd.sandbox_status();
    let cmd = sandbox::command(spec, &sd.work(), &status_file, &sandbox::with_apps(spec), &wrapping(false));
    let timeout =
        spec.batch_timeout_seconds.filter(|t| *t > 0).and_then(|t| u64::try_from(t).ok()).map(Duration::from_secs);
    let outcome = watch(sd, spec, enforcement, cmd, &status_file, &sd.work(), timeout, |child| {
        // A Slurm job's apps: relayed for the server alone, once the sandbox runs (not one
        // seen only once it had ended: no start time).
        if let Some(relay) = spec.relay.as_ref().filter(|_| child.started != 0)
            && let Err(why) = crate::domain::runtime::slurm::relay::start(sd, relay, child)
        {
            note(sd, &format!("the session's apps cannot be reached: {why}"));
        }
        state.phase = Phase::Running;
        state.child = Some(child);
        report(state).ok();
    });
    match outcome {
        Err(e) => failed(e),
        Ok(o) if !o.started && !o.stopped => {
            failed(format!("the sandbox could not start ({}); see the session's log", describe_code(o.code)))
        }
        Ok(o) if o.setup_failed && !enforcement.oom_killed(spec.session_id) => {
            failed("the sandbox failed while setting up; see the session's log".to_owned())
        }
        Ok(o) => Exit {
            code: if o.timed_out { Some(TIMEOUT_EXIT_CODE) } else { o.code },
            oom_killed: o.oom || enforcement.oom_killed(spec.session_id),
            timed_out: o.timed_out,
            stopped: o.stopped,
            failed: None,
            disk_exceeded: o.disk,
        },
    }
}

/// Whole cores for `taskset`: the first `cores` of the machine.
fn cpu_list(cores: u32) -> String {
    let n = thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1));
    format!("0-{}", cores.clamp(1, n) - 1)
}

pub fn describe_code(code: Option<i32>) -> String {
    match code {
        Some(c) if c > 128 => format!("signal {}", c - 128),
        Some(c) => format!("exit {c}"),
        None => "no exit code".to_owned(),
    }
}

struct Outcome {
    /// The sandbox's command started.
    started: bool,
    /// The sandbox started (it has a pid) but ended without running the command: one of
    /// its mounts, its working directory or the command itself failed (bubblewrap reports
    /// an exit code only for a command that ran).
    setup_failed: bool,
    code: Option<i32>,
    stopped: bool,
    timed_out: bool,
    /// The watchdog killed it for memory.
    oom: bool,
    /// Its work directory grew past the limit.
    disk: bool,
}

/// How often the memory watchdog (where no cgroup limits memory) adds up the session's use.
const MEMORY_EVERY: Duration = Duration::from_millis(200);

/// The session's processes, for the memory and disk watchdogs: everything below `child`, and
/// everything in the sandbox's pid namespace (a terminal's shell enters it from outside).
fn session_processes(child: u32, sandbox: Option<Process>, joined: &mut Joined) -> Vec<u32> {
    let mut pids = signal::tree(child);
    // Processes that joined the sandbox's pid namespace from outside (a terminal's shell)
    // are not below it: found by a scan of every process, which is the machine's size, so
    // only every few seconds (what they started since is below them).
    if joined.scanned.is_none_or(|at| at.elapsed() >= JOINED_EVERY) {
        joined.scanned = Some(Instant::now());
        joined.ns =
            sandbox.filter(Process::alive).and_then(|s| std::fs::read_link(format!("/proc/{}/ns/pid", s.pid)).ok());
        joined.roots = joined.ns.as_deref().map(signal::in_namespace).unwrap_or_default();
        joined.roots.retain(|p| !pids.contains(p));
    }
    for root in &joined.roots {
        // Still in the sandbox (not a pid reused since the scan).
        let inside = std::fs::read_link(format!("/proc/{root}/ns/pid")).ok();
        if inside.is_some() && inside == joined.ns && !pids.contains(root) {
            pids.extend(signal::tree(*root));
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// How often a supervisor asked to reports what its session uses.
const USAGE_EVERY: Duration = Duration::from_secs(2);

/// Writes a usage report where the server reads it: replaced whole (a reader sees the old
/// one or the new), not synced (a lost report is replaced 2 s later).
fn report_usage(path: &Path, usage: &files::Usage) {
    let tmp = path.with_extension("tmp");
    let written = serde_json::to_vec(usage).map_err(std::io::Error::other).and_then(|b| std::fs::write(&tmp, b));
    if written.and_then(|()| std::fs::rename(&tmp, path)).is_err() {
        std::fs::remove_file(&tmp).ok();
    }
}

/// How often the processes that joined a sandbox from outside are looked for.
const JOINED_EVERY: Duration = Duration::from_secs(2);

/// The processes found in a sandbox's pid namespace that are not below its supervisor.
#[derive(Default)]
struct Joined {
    scanned: Option<Instant>,
    /// The sandbox's pid namespace.
    ns: Option<std::path::PathBuf>,
    roots: Vec<u32>,
}

/// Closes every descriptor this process inherited but standard input, output and error,
/// so that nothing the server (or whoever started it) had open reaches a session.
pub fn close_inherited_descriptors() {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|fd| *fd > 2)
        .collect();
    // The directory's own descriptor is closed by now: closing its number again fails
    // harmlessly.
    for fd in fds {
        nix::unistd::close(fd).ok();
    }
}

/// Starts `cmd`, copies its output, and waits for its end, stopping it on a `stop` file, at
/// `timeout`, or (with the watchdog) over its memory.
/// `measure`: the directory held to the disk limit (the one mounted as the sandbox's home).
#[allow(clippy::too_many_arguments)]
fn watch(
    sd: &SessionDir,
    spec: &Spec,
    enforcement: &Enforcement,
    mut cmd: std::process::Command,
    status_file: &Path,
    measure: &Path,
    timeout: Option<Duration>,
    mut on_start: impl FnMut(Process),
) -> Result<Outcome, String> {
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let writer2 = writer.try_clone().map_err(|e| format!("cannot make a pipe: {e}"))?;
    cmd.stdin(Stdio::null()).stdout(writer).stderr(writer2);
    let mut child: Child = cmd.spawn().map_err(|e| format!("cannot start the sandbox: {e}"))?;
    drop(cmd); // the parent's copies of the pipe's write end
    let output = sd.output();
    let copier = thread::spawn(move || copy_capped(reader, &output));

    let begun = Instant::now();
    let mut o = Outcome {
        started: false,
        setup_failed: false,
        code: None,
        stopped: false,
        timed_out: false,
        oom: false,
        disk: false,
    };
    let mut measured = Instant::now();
    let mut measure_every = DISK_EVERY;
    let mut memory_checked = Instant::now();
    // What the session used at the previous report, when the spec asks for reports.
    let mut reported: Option<(Instant, f64)> = None;
    let mut report_at = Instant::now();
    let mut joined = Joined::default();
    let mut sandbox_pid = None;
    let mut stopping: Option<Instant> = None;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if sandbox_pid.is_none()
            && let Some(pid) = sandbox::read_status(status_file).child_pid
        {
            // With its start time: a pid signalled later must still be this process.
            let sandbox = Process { pid, started: files::start_time(pid).unwrap_or(0) };
            sandbox_pid = Some(sandbox);
            o.started = true;
            on_start(sandbox);
        }
        if stopping.is_none() {
            if sd.stop_requested() {
                o.stopped = true;
            } else if timeout.is_some_and(|t| begun.elapsed() >= t) {
                o.timed_out = true;
            } else if matches!(enforcement, Enforcement::Watchdog) && memory_checked.elapsed() >= MEMORY_EVERY && {
                memory_checked = Instant::now();
                signal::resident(&session_processes(child.id(), sandbox_pid, &mut joined)) > spec.limits.memory
            } {
                o.oom = true;
            } else if measured.elapsed() >= measure_every {
                let began = Instant::now();
                let pids = session_processes(child.id(), sandbox_pid, &mut joined);
                o.disk = disk::used(measure, &pids).is_none_or(|used| used > spec.limits.disk);
                measured = Instant::now();
                measure_every = DISK_EVERY.max(began.elapsed() * 10);
            }
            if o.stopped || o.timed_out || o.oom || o.disk {
                if o.oom || o.disk {
                    // Over its memory or its disk: no grace.
                    let now = Instant::now();
                    stopping = Some(now.checked_sub(Duration::from_millis(spec.grace_ms)).unwrap_or(now));
                } else {
                    stopping = Some(Instant::now());
                    // The command and everything it started, not the sandbox's init.
                    let below = sandbox_pid.filter(Process::alive).map(|p| signal::tree(p.pid)).unwrap_or_default();
                    for pid in below.iter().skip(1) {
                        signal::kill(*pid, TERM);
                    }
                    if sandbox_pid.is_none() {
                        signal::kill(child.id(), TERM); // the sandbox, still starting
                    }
                }
            }
        }
        if spec.report_usage && stopping.is_none() && sandbox_pid.is_some() && report_at.elapsed() >= USAGE_EVERY {
            report_at = Instant::now();
            let pids = session_processes(child.id(), sandbox_pid, &mut joined);
            let cpu_time = signal::cpu_seconds(&pids);
            let cpu = reported.map(|(then, before)| (cpu_time - before).max(0.0) / then.elapsed().as_secs_f64());
            reported = Some((Instant::now(), cpu_time));
            report_usage(&sd.usage(), &files::Usage { cpu, mem: signal::resident(&pids) as f64 });
        }
        if let Some(since) = stopping
            && since.elapsed() >= Duration::from_millis(spec.grace_ms)
        {
            // The sandbox's init: the kernel then kills everything in its pid namespace.
            if let Some(sandbox) = sandbox_pid.filter(Process::alive) {
                signal::kill(sandbox.pid, KILL);
            }
            signal::kill(child.id(), KILL);
            enforcement.kill_all(spec.session_id);
        }
        thread::sleep(POLL);
    };
    copier.join().ok();
    let sandbox = sandbox::read_status(status_file);
    if let (None, Some(pid)) = (sandbox_pid, sandbox.child_pid) {
        // It started and ended between two looks.
        o.started = true;
        on_start(Process { pid, started: 0 });
    }
    // bubblewrap reports an exit code only for a command that ran; a sandbox that started
    // (it has a pid) and ended with bubblewrap's own failure (exit 1) never got that far. A
    // sandbox killed from outside (the kernel's OOM killer takes bubblewrap too) is not that.
    o.setup_failed = sandbox.child_pid.is_some()
        && sandbox.exit_code.is_none()
        && status.code() == Some(1)
        && !(o.stopped || o.timed_out || o.oom || o.disk);
    o.code = sandbox.exit_code.or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        status.code().or_else(|| status.signal().map(|s| 128 + s))
    });
    Ok(o)
}

/// Copies a session's output to `path`, keeping at most [`OUTPUT_CAP`] bytes; the rest is
/// read and dropped, so the session never blocks on a full pipe.
fn copy_capped(mut from: impl Read, path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path) else { return };
    let mut written = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = [0u8; 8192];
    let mut noted = false;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let room = usize::try_from(OUTPUT_CAP.saturating_sub(written)).unwrap_or(usize::MAX);
        let keep = n.min(room);
        if keep > 0 && file.write_all(&buf[..keep]).is_ok() {
            written += keep as u64;
        }
        if keep < n && !noted {
            noted = true;
            file.write_all(format!("\n[output beyond {} MiB dropped]\n", OUTPUT_CAP >> 20).as_bytes()).ok();
        }
    }
}
