//! A Slurm cluster for the tests, as PostgreSQL's: started once per test process from
//! Debian's `slurm-wlm`, `slurmrestd` and `munge` in a temporary directory, on free loopback
//! ports, and stopped (its directory removed) by a watchdog when the process exits. It has
//! two nodes on this host, `n1` (2 CPUs) and `n2` (2 CPUs and one `gpu` gres), in the
//! partition `batch`, and slurmrestd with JWT authentication; jobs run as `nobody`.
//!
//! Without the packages, or without root (munged, slurmd), every Slurm case is skipped with
//! a NOTICE, unless `SESSIOND_REQUIRE_SLURM=1` (set by `.ci/run`) makes that a failure.
//! Cases take [`lock`] so that only one uses the cluster at a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Cluster {
    pub dir: PathBuf,
    pub conf: PathBuf,
    /// slurmrestd's base URL.
    pub url: String,
    rest_port: u16,
    /// A file holding a JWT of [`USER`].
    pub token_file: PathBuf,
    /// Where jobs write their output.
    pub output_dir: PathBuf,
    /// `sessiond` where the nodes' jobs (as [`USER`]) can run it.
    pub sessiond: PathBuf,
}

/// The Slurm user the tests' jobs run as.
pub const USER: &str = "nobody";
pub const PARTITION: &str = "batch";

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The shared cluster, or `None` after a NOTICE (a failure when Slurm is required).
pub fn cluster() -> Option<&'static Cluster> {
    super::required::part(CLUSTER.get_or_init(start), "Slurm", "SESSIOND_REQUIRE_SLURM")
}

/// One case at a time on the cluster.
pub async fn lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{what} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

fn spawn(cmd: &mut Command, log: &Path, what: &str) -> Result<u32, String> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| format!("{what}: {e}"))?;
    let err = log.try_clone().map_err(|e| format!("{what}: {e}"))?;
    let child = cmd.stdin(Stdio::null()).stdout(log).stderr(err).spawn().map_err(|e| format!("{what}: {e}"))?;
    Ok(child.id())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

fn start() -> Result<Cluster, String> {
    start_sized(2, 4000)
}

/// A cluster whose two nodes declare `cpus` CPUs and `memory_mib` of memory each (more than
/// the machine has, for benchmarks: slurmd takes the declared figures).
pub fn start_sized(cpus: u32, memory_mib: u32) -> Result<Cluster, String> {
    for bin in [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/sbin/slurmrestd",
        "/usr/sbin/munged",
        "/usr/sbin/mungekey",
        "/usr/bin/scontrol",
    ] {
        if !Path::new(bin).exists() {
            return Err(format!("{bin} is missing (Debian's slurm-wlm, slurmrestd and munge)"));
        }
    }
    let root = Command::new("id").arg("-u").output().map(|o| o.stdout.trim_ascii() == b"0").unwrap_or(false);
    if !root {
        return Err("a Slurm cluster's daemons (munged, slurmd) need root".to_owned());
    }
    let dir = tempfile::Builder::new().prefix("sessiond-slurm-").tempdir().map_err(|e| e.to_string())?.keep();
    let result = start_in(&dir, cpus, memory_mib);
    if result.is_err() {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("pkill -f '{}' ; sleep 1; rm -rf '{}'", dir.display(), dir.display()))
            .status();
    }
    result
}

fn chmod(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

fn start_in(dir: &Path, cpus: u32, memory_mib: u32) -> Result<Cluster, String> {
    chmod(dir, 0o755)?;
    // munge: a key and munged as the `munge` user, its socket in our directory.
    let munge = dir.join("munge");
    std::fs::create_dir_all(&munge).map_err(|e| e.to_string())?;
    let key = munge.join("munge.key");
    run(Command::new("/usr/sbin/mungekey").arg("-c").arg("-k").arg(&key), "mungekey")?;
    run(Command::new("chown").arg("-R").arg("munge:munge").arg(&munge), "chown munge")?;
    chmod(&key, 0o400)?;
    chmod(&munge, 0o755)?;
    let socket = munge.join("munge.socket");
    let mut pids = Vec::new();
    pids.push(spawn(
        Command::new("runuser")
            .args(["-u", "munge", "--", "/usr/sbin/munged", "-F", "-f"])
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
            .arg(format!("--log-file={}", munge.join("munged.log").display()))
            .arg(format!("--seed-file={}", munge.join("munged.seed").display())),
        &dir.join("munged.out"),
        "munged",
    )?);
    wait_until(Duration::from_secs(10), || socket.exists(), "munged's socket")?;

    let jwt = dir.join("jwt.key");
    let bytes: Vec<u8> = (0..32).map(|_| rand::random::<u8>()).collect();
    std::fs::write(&jwt, bytes).map_err(|e| e.to_string())?;
    chmod(&jwt, 0o600)?;
    let (ctld, p1, p2, rest) = (free_port()?, free_port()?, free_port()?, free_port()?);
    let host = hostname();
    let d = dir.display();
    let conf = dir.join("slurm.conf");
    let text = format!(
        "ClusterName=sessiondtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={ctld}\nSlurmUser=root\nSlurmdUser=root\n\
         AuthType=auth/munge\nAuthInfo=socket={socket}\nAuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={jwt}\n\
         CredType=cred/munge\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\nGresTypes=gpu\nMpiDefault=none\nReturnToService=2\n\
         SlurmdParameters=config_overrides\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
         SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\nSlurmctldLogFile={d}/slurmctld.log\n\
         SlurmdLogFile={d}/slurmd-%n.log\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
         MinJobAge=600\nSchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1\nKillWait=5\n\
         NodeName=n1 NodeHostname={host} NodeAddr=127.0.0.1 Port={p1} CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN\n\
         NodeName=n2 NodeHostname={host} NodeAddr=127.0.0.1 Port={p2} CPUs={cpus} RealMemory={memory_mib} Gres=gpu:1 State=UNKNOWN\n\
         PartitionName={PARTITION} Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP\n",
        socket = socket.display(),
        jwt = jwt.display(),
    );
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("gres.conf"), "NodeName=n2 Name=gpu File=/dev/null\n").map_err(|e| e.to_string())?;
    for sub in ["state", "spool"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
    }
    let output_dir = dir.join("output");
    // The build's sessiond may sit under a directory only root can enter.
    let sessiond = dir.join("bin").join("sessiond");
    std::fs::create_dir_all(dir.join("bin")).map_err(|e| e.to_string())?;
    std::fs::copy(env!("CARGO_BIN_EXE_sessiond"), &sessiond).map_err(|e| format!("copying sessiond: {e}"))?;
    chmod(&sessiond, 0o755)?;
    let c = Cluster {
        sessiond,
        dir: dir.to_owned(),
        conf: conf.clone(),
        url: format!("http://127.0.0.1:{rest}"),
        rest_port: rest,
        token_file: dir.join("token"),
        output_dir,
    };
    pids.push(c.start_ctld()?);
    for node in ["n1", "n2"] {
        pids.push(spawn(
            Command::new("/usr/sbin/slurmd").args(["-D", "-N", node, "-f"]).arg(&conf),
            &dir.join(format!("slurmd-{node}.out")),
            "slurmd",
        )?);
    }
    wait_until(
        Duration::from_secs(30),
        || c.scontrol(&["show", "nodes"]).is_ok_and(|out| out.matches("State=IDLE").count() == 2),
        "both nodes idle",
    )?;
    let token = c.scontrol(&["token", &format!("username={USER}"), "lifespan=86400"])?;
    std::fs::write(&c.token_file, token.trim()).map_err(|e| e.to_string())?;
    chmod(&c.token_file, 0o600)?;
    c.start_restd()?;
    spawn_watchdog(dir);
    Ok(c)
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool, what: &str) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("waited {limit:?} for {what}"))
}

impl Cluster {
    /// `scontrol ARGS` on this cluster; its output.
    pub fn scontrol(&self, args: &[&str]) -> Result<String, String> {
        run(Command::new("/usr/bin/scontrol").env("SLURM_CONF", &self.conf).args(args), "scontrol")
    }

    /// Submits a job of someone else (root) taking every CPU of `node` for ten minutes; its id.
    pub fn occupy(&self, node: &str) -> Result<String, String> {
        let cpus = self
            .scontrol(&["show", "node", node])?
            .split_whitespace()
            .find_map(|w| w.strip_prefix("CPUTot="))
            .unwrap_or("1")
            .to_owned();
        let id = run(
            Command::new("sbatch")
                .env("SLURM_CONF", &self.conf)
                .args(["--parsable", "--partition", PARTITION, "--nodes=1", "--ntasks=1", "--mem=16"])
                .arg(format!("--cpus-per-task={cpus}"))
                .arg(format!("--nodelist={node}"))
                .args(["--chdir=/tmp", "--output=/dev/null", "--wrap", "sleep 600"]),
            "sbatch",
        )?;
        let id = id.trim().to_owned();
        wait_until(
            Duration::from_secs(30),
            || self.scontrol(&["show", "job", &id]).is_ok_and(|o| o.contains("JobState=RUNNING")),
            "the outside job to run",
        )?;
        Ok(id)
    }

    /// `scancel ARGS` on this cluster.
    pub fn scancel(&self, args: &[&str]) -> Result<String, String> {
        run(Command::new("scancel").env("SLURM_CONF", &self.conf).args(args), "scancel")
    }

    fn start_ctld(&self) -> Result<u32, String> {
        spawn(
            Command::new("/usr/sbin/slurmctld").args(["-D", "-f"]).arg(&self.conf),
            &self.dir.join("slurmctld.out"),
            "slurmctld",
        )
    }

    /// Stops slurmctld and starts it again (its state kept), waiting until it answers.
    pub fn restart_ctld(&self) -> Result<(), String> {
        self.restart_ctld_and(|| Ok(()))
    }

    /// Restarts slurmctld without its saved jobs: every job it knew vanishes (their
    /// processes are killed when the nodes report them).
    pub fn forget_jobs(&self) -> Result<(), String> {
        // Job ids go on from past the last one: a node still cleaning up a forgotten job
        // would refuse (and Slurm hold) a new job of the same id.
        let jobs = self.scontrol(&["show", "jobs", "--oneliner"]).unwrap_or_default();
        let last =
            jobs.split_whitespace().filter_map(|w| w.strip_prefix("JobId=")?.parse::<u64>().ok()).max().unwrap_or(0);
        let conf = std::fs::read_to_string(&self.conf).map_err(|e| e.to_string())?;
        let mut lines: Vec<String> =
            conf.lines().filter(|l| !l.starts_with("FirstJobId=")).map(str::to_owned).collect();
        let first =
            conf.lines().find_map(|l| l.strip_prefix("FirstJobId=")?.parse::<u64>().ok()).unwrap_or(1).max(last) + 1000;
        lines.push(format!("FirstJobId={first}"));
        std::fs::write(&self.conf, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
        self.restart_ctld_and(|| {
            for file in ["job_state", "job_state.old"] {
                let path = self.dir.join("state").join(file);
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|e| format!("rm {}: {e}", path.display()))?;
                }
            }
            Ok(())
        })
    }

    /// Stops slurmctld, does `meanwhile`, starts it again and waits until it answers.
    fn restart_ctld_and(&self, meanwhile: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
        let pid = std::fs::read_to_string(self.dir.join("slurmctld.pid")).map_err(|e| e.to_string())?;
        run(Command::new("kill").arg(pid.trim()), "kill slurmctld")?;
        // Gone, not just silent: it saves its state before it exits (and stays our zombie).
        let gone = || {
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                .map_or(true, |stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
        };
        wait_until(Duration::from_secs(30), gone, "slurmctld to exit")?;
        meanwhile()?;
        self.start_ctld()?;
        wait_until(Duration::from_secs(30), || self.scontrol(&["ping"]).is_ok_and(|o| o.contains("UP")), "slurmctld up")
    }

    /// Starts slurmrestd (as an unprivileged user: it refuses root), waiting until it answers.
    pub fn start_restd(&self) -> Result<(), String> {
        spawn(
            // `SLURM_JWT=daemon`: slurmrestd talks to slurmctld with each request's JWT (with
            // munge, it would refuse every token). It runs as `slurm` where Debian created
            // that user, else as `nobody`.
            Command::new("runuser")
                .args(["-u", rest_user(), "--", "env", "SLURM_JWT=daemon"])
                .arg(format!("SLURM_CONF={}", self.conf.display()))
                .args(["/usr/sbin/slurmrestd", "-a", "rest_auth/jwt", "-s", "openapi/v0.0.38"])
                .arg(format!("127.0.0.1:{}", self.rest_port)),
            &self.dir.join("slurmrestd.out"),
            "slurmrestd",
        )?;
        wait_until(
            Duration::from_secs(20),
            || std::net::TcpStream::connect(("127.0.0.1", self.rest_port)).is_ok(),
            "slurmrestd",
        )
    }

    /// Stops slurmrestd.
    pub fn stop_restd(&self) {
        let _ = Command::new("pkill").args(["-f", &format!("slurmrestd.*127.0.0.1:{}", self.rest_port)]).status();
        let _ = wait_until(
            Duration::from_secs(10),
            || std::net::TcpStream::connect(("127.0.0.1", self.rest_port)).is_err(),
            "slurmrestd to stop",
        );
    }

    /// Cancels every job and resumes every node (between cases).
    pub fn cancel_all(&self) {
        let _ = self.scancel(&["--partition", PARTITION]);
        // A case that failed may have left a node drained.
        for node in ["n1", "n2"] {
            let _ = self.scontrol(&["update", &format!("nodename={node}"), "state=resume"]);
        }
        let _ = wait_until(
            Duration::from_secs(30),
            || self.scontrol(&["show", "nodes"]).is_ok_and(|out| out.matches("State=IDLE").count() == 2),
            "both nodes idle",
        );
    }

    /// The engine's declaration, for `sessiond apply` (its jobs' relays listen on the
    /// loopback: the cluster is this machine).
    pub fn engine_toml(&self, name: &str) -> String {
        format!(
            "[engines.{name}]\nkind = \"slurm\"\nurl = \"{}\"\npartition = \"{PARTITION}\"\nuser = \"{USER}\"\n\
             token_file = \"{}\"\noutput_dir = \"{}\"\nslurm_conf = \"{}\"\nsessiond = \"{}\"\n\
             relay_bind = \"127.0.0.1\"\n",
            self.url,
            self.token_file.display(),
            self.output_dir.display(),
            self.conf.display(),
            self.sessiond.display()
        )
    }
}

/// The unprivileged user slurmrestd runs as.
fn rest_user() -> &'static str {
    let slurm = Command::new("id").args(["-u", "slurm"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    if slurm.is_ok_and(|s| s.success()) { "slurm" } else { "nobody" }
}

/// Stops the daemons and removes the directory once this process is gone, however it ends.
/// The directory reaches the script through its environment: on its command line, the
/// script's own `pkill -f` would match (and end) the script before it removes anything.
fn spawn_watchdog(dir: &Path) {
    let script = "while kill -0 \"$WATCHED\" 2>/dev/null; do sleep 1; done; \
                  pkill -f \"$DIR\"; sleep 2; pkill -9 -f \"$DIR\"; rm -rf \"$DIR\"";
    let _ = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("WATCHED", std::process::id().to_string())
        .env("DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}
