//! The `terminal` app of an interactive session running as a Slurm job: a shell started
//! in the job's allocation with `srun --jobid <job> --overlap --pty /bin/sh -i`, as Open
//! OnDemand does, run as the engine's Slurm user under a pseudo-terminal of this server.
//! The shell runs on the job's node, in its cgroup, as the job does.
//!
//! It needs Slurm's client commands on this server (`srun`, the cluster's `slurm.conf`,
//! the engine's `slurm_conf` or the system's) and a server that may act as the engine's
//! user (it runs as that user, or as root). Where that is missing the app has no URL and
//! the engine's report says why ([`probe`]).

use std::path::{Path, PathBuf};

use sea_orm::{DatabaseConnection, EntityTrait};

use entity::{engine_job, session};

use crate::domain::runtime::engines::SlurmSettings;
use crate::domain::runtime::local::terminal::{Shell, not_offered, spawn};
use crate::domain::{DomainError, DomainResult};

/// How this server opens a shell in a job of an engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrunAccess {
    pub srun: PathBuf,
    /// `SLURM_CONF` for `srun`, when the engine names one.
    pub conf: Option<String>,
    /// The Slurm user the jobs run as.
    pub user: String,
    /// This server runs as root: `srun` is started as `user` with `runuser`.
    pub switch_user: bool,
    /// Where the shell starts (every node sees it).
    pub dir: String,
}

/// Whether this server can open terminals in the jobs of an engine with `settings`, or
/// why not (one sentence).
pub fn probe(settings: &SlurmSettings) -> Result<SrunAccess, String> {
    let srun = ["/usr/bin/srun", "/usr/local/bin/srun"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or("Slurm's srun is not installed on this server, so sessions offer no terminal")?;
    let conf = settings.slurm_conf.clone();
    let used = conf.clone().unwrap_or_else(|| "/etc/slurm/slurm.conf".to_owned());
    if std::fs::metadata(&used).is_err() {
        return Err(format!(
            "this server cannot read the cluster's configuration {used} (the engine's slurm_conf), so sessions offer no terminal"
        ));
    }
    let me = nix::unistd::geteuid();
    let switch_user = me.is_root() && settings.user != "root";
    let same = nix::unistd::User::from_uid(me).ok().flatten().is_some_and(|u| u.name == settings.user);
    if !me.is_root() && !same {
        return Err(format!(
            "this server runs neither as root nor as the jobs' user {}, so it cannot join their jobs: sessions offer no terminal",
            settings.user
        ));
    }
    Ok(SrunAccess { srun, conf, user: settings.user.clone(), switch_user, dir: settings.output_dir.clone() })
}

/// Opens a shell in the job of session `s`, `cols` × `rows`.
pub async fn open(
    db: &DatabaseConnection,
    access: &SrunAccess,
    s: &session::Model,
    cols: u16,
    rows: u16,
) -> DomainResult<Shell> {
    let job = engine_job::Entity::find_by_id(s.id)
        .one(db)
        .await?
        .map(|j| j.job_id)
        .filter(|j| !j.is_empty())
        .ok_or_else(|| not_offered("the terminal opens once the session's Slurm job runs"))?;
    let (program, args, env) = command(access, &job);
    spawn(&program, &args, &env, Some(Path::new(&access.dir)), cols, rows)
        .map_err(|e| DomainError::invariant(format!("opening a terminal in Slurm job {job} failed: {e}")))
}

/// The program, arguments and environment that open a shell in job `job`.
fn command(access: &SrunAccess, job: &str) -> (PathBuf, Vec<String>, Vec<(String, String)>) {
    let mut args: Vec<String> = Vec::new();
    let program = if access.switch_user {
        args.extend(["-u".into(), access.user.clone(), "--".into()]);
        args.push(access.srun.display().to_string());
        PathBuf::from("runuser")
    } else {
        access.srun.clone()
    };
    args.extend([
        format!("--jobid={job}"),
        "--overlap".into(),
        "--pty".into(),
        "--quiet".into(),
        format!("--chdir={}", access.dir),
        "/bin/sh".into(),
        "-i".into(),
    ]);
    let mut env = vec![("TERM".to_owned(), "xterm-256color".to_owned())];
    if let Some(conf) = &access.conf {
        env.push(("SLURM_CONF".to_owned(), conf.clone()));
    }
    (program, args, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_server_joins_the_job_as_its_user() {
        let access = SrunAccess {
            srun: PathBuf::from("/usr/bin/srun"),
            conf: Some("/etc/cluster/slurm.conf".into()),
            user: "alice".into(),
            switch_user: true,
            dir: "/shared/out".into(),
        };
        let (program, args, env) = command(&access, "42");
        assert_eq!(program, PathBuf::from("runuser"));
        assert_eq!(
            args,
            [
                "-u",
                "alice",
                "--",
                "/usr/bin/srun",
                "--jobid=42",
                "--overlap",
                "--pty",
                "--quiet",
                "--chdir=/shared/out",
                "/bin/sh",
                "-i"
            ]
        );
        assert!(env.contains(&("SLURM_CONF".to_owned(), "/etc/cluster/slurm.conf".to_owned())));
        let (program, args, _) = command(&SrunAccess { switch_user: false, ..access }, "7");
        assert_eq!((program.to_str(), args[0].as_str()), (Some("/usr/bin/srun"), "--jobid=7"));
    }
}
