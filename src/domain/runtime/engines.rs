//! Engines are declared, never implied: `[engines.NAME]` in `sessiond apply` gives a kind
//! and the kind's settings, and each resource group names the engine that runs its
//! sessions. A group that names none runs nothing (its sessions are never placed).
//!
//! - `simulated`: nothing runs; sessions walk through their statuses on timers. For the demo
//!   and tests only, and every report says so.
//! - `local`: the server's own machine (`--runtime local`), its sessions in a sandbox.
//! - `slurm`: a Slurm cluster through `slurmrestd` ([`super::slurm`]).

use std::collections::BTreeMap;

use sea_orm::{DatabaseConnection, EntityTrait};

use serde::{Deserialize, Serialize};

use entity::{engine, resource_group};

use crate::domain::DomainResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EngineKind {
    Simulated,
    Local,
    Slurm,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [EngineKind::Simulated, EngineKind::Local, EngineKind::Slurm];

    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Simulated => "simulated",
            EngineKind::Local => "local",
            EngineKind::Slurm => "slurm",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// Where an engine's secret comes from: a file or an environment variable of the server,
/// read when it is used; the secret itself is never stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    File(String),
    Env(String),
}

impl TokenSource {
    /// The secret, trimmed.
    pub fn read(&self) -> Result<String, String> {
        let text = match self {
            TokenSource::File(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?,
            TokenSource::Env(name) => std::env::var(name).map_err(|_| format!("the variable {name} is not set"))?,
        };
        // `scontrol token` prints `SLURM_JWT=…`: either form is accepted.
        let text = text.trim();
        let token = text.strip_prefix("SLURM_JWT=").unwrap_or(text);
        if token.is_empty() {
            return Err(format!("{} holds no token", self.describe()));
        }
        Ok(token.to_owned())
    }

    pub fn describe(&self) -> String {
        match self {
            TokenSource::File(path) => format!("token file {path}"),
            TokenSource::Env(name) => format!("variable {name}"),
        }
    }
}

/// A Slurm engine's settings, as declared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmSettings {
    /// slurmrestd's base URL, e.g. `http://127.0.0.1:6820`.
    pub url: String,
    pub partition: String,
    /// The Slurm user jobs are submitted and run as (the token's user).
    pub user: String,
    pub token: TokenSource,
    /// The REST API version to use (`v0.0.38`); none: the newest one both sides know.
    #[serde(default)]
    pub api_version: Option<String>,
    /// A directory every node and this server see (the jobs' output is written there).
    pub output_dir: String,
    /// The cluster's `slurm.conf` for this server's Slurm client commands (the terminal's
    /// `srun`); none: the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_conf: Option<String>,
    /// The `sessiond` executable on the nodes, whose `supervise` runs each job's session in
    /// the local runtime's sandbox where bubblewrap is there too; none: this server's own
    /// path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessiond: Option<String>,
}

impl SlurmSettings {
    /// The path of `sessiond` on the nodes: as declared, else this server's own executable
    /// (when it is `sessiond`: nodes installed alike).
    pub fn sessiond_on_nodes(&self) -> Option<String> {
        self.sessiond.clone().or_else(|| {
            let me = std::env::current_exe().ok()?;
            (me.file_name()? == "sessiond").then(|| me.display().to_string())
        })
    }
}

/// One declared engine.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineSettings {
    Simulated,
    Local,
    Slurm(SlurmSettings),
}

impl EngineSettings {
    pub fn kind(&self) -> EngineKind {
        match self {
            EngineSettings::Simulated => EngineKind::Simulated,
            EngineSettings::Local => EngineKind::Local,
            EngineSettings::Slurm(_) => EngineKind::Slurm,
        }
    }

    /// As stored in `engines.settings`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            EngineSettings::Slurm(s) => serde_json::to_value(s).unwrap_or_default(),
            _ => serde_json::json!({}),
        }
    }

    pub fn from_row(row: &engine::Model) -> Option<Self> {
        Some(match EngineKind::parse(&row.kind)? {
            EngineKind::Simulated => EngineSettings::Simulated,
            EngineKind::Local => EngineSettings::Local,
            EngineKind::Slurm => EngineSettings::Slurm(serde_json::from_value(row.settings.clone()).ok()?),
        })
    }
}

/// A stored engine and the resource groups it runs.
#[derive(Clone, Debug)]
pub struct StoredEngine {
    pub name: String,
    pub settings: EngineSettings,
    pub groups: Vec<String>,
}

/// Every stored engine with its groups, by name.
pub async fn stored(db: &impl sea_orm::ConnectionTrait) -> DomainResult<BTreeMap<String, StoredEngine>> {
    let rows = engine::Entity::find().all(db).await?;
    Ok(stored_from(rows, &resource_group::Entity::find().all(db).await?))
}

/// The engines of `rows` with their groups among `groups`.
pub fn stored_from(rows: Vec<engine::Model>, groups: &[resource_group::Model]) -> BTreeMap<String, StoredEngine> {
    let mut out: BTreeMap<String, StoredEngine> = BTreeMap::new();
    for row in rows {
        let Some(settings) = EngineSettings::from_row(&row) else {
            tracing::error!(engine = %row.name, kind = %row.kind, "a stored engine cannot be read; it runs nothing");
            continue;
        };
        out.insert(row.name.clone(), StoredEngine { name: row.name, settings, groups: Vec::new() });
    }
    for g in groups {
        if let Some(e) = g.engine.as_ref().and_then(|name| out.get_mut(name)) {
            e.groups.push(g.name.clone());
        }
    }
    out
}

/// The health of the running Slurm engines, for `{ runtime }`, `configuration` and metrics.
pub fn registry() -> &'static super::slurm::Registry {
    static REGISTRY: std::sync::OnceLock<super::slurm::Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Runs every stored Slurm engine until the process ends: started when declared (read every
/// few seconds, so `sessiond apply` needs no restart), restarted when its settings or group
/// change, stopped when it is pruned.
pub async fn run_declared(db: DatabaseConnection, bus: crate::domain::events::EventBus, grace: std::time::Duration) {
    /// A running engine's task, ended with this loop (aborted, or its future dropped).
    struct Task(tokio::task::JoinHandle<()>);
    impl Drop for Task {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    type Running = (SlurmSettings, String, Task);
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    loop {
        match stored(&db).await {
            Ok(engines) => {
                let wanted: BTreeMap<String, (SlurmSettings, String)> = engines
                    .into_values()
                    .filter_map(|e| match e.settings {
                        EngineSettings::Slurm(s) => {
                            if e.groups.len() > 1 {
                                tracing::warn!(engine = %e.name, "a Slurm engine runs one resource group; it runs {}", e.groups[0]);
                            }
                            Some((e.name, (s, e.groups.into_iter().next()?)))
                        }
                        _ => None,
                    })
                    .collect();
                running.retain(|name, (settings, group, handle)| {
                    let keep =
                        wanted.get(name).is_some_and(|(s, g)| s == settings && g == group) && !handle.0.is_finished();
                    if !keep {
                        registry().write().unwrap_or_else(std::sync::PoisonError::into_inner).remove(name);
                    }
                    keep
                });
                for (name, (settings, group)) in wanted {
                    if running.contains_key(&name) {
                        continue;
                    }
                    if let Err(why) = prepare_output_dir(&settings.output_dir) {
                        tracing::error!(engine = %name, "the Slurm engine cannot start: {why}");
                        continue;
                    }
                    tracing::info!(engine = %name, group = %group, url = %settings.url, partition = %settings.partition, "Slurm engine started");
                    let engine = super::slurm::SlurmEngine::new(
                        name.clone(),
                        group.clone(),
                        settings.clone(),
                        grace,
                        registry().clone(),
                    );
                    let handle = tokio::spawn(super::run(engine, db.clone(), bus.clone()));
                    running.insert(name, (settings, group, Task(handle)));
                }
            }
            Err(e) => tracing::error!(error = ?e, "reading the engines failed"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

/// The directory jobs write their output to: created open to the jobs' user (sticky, as
/// `/tmp`), with the copy offsets in `.sessiond` beside it.
fn prepare_output_dir(dir: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::path::Path::new(dir);
    if !path.exists() {
        std::fs::create_dir_all(path).map_err(|e| format!("cannot create {dir}: {e}"))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o1777))
            .map_err(|e| format!("cannot open {dir} to the jobs: {e}"))?;
    }
    std::fs::create_dir_all(path.join(".sessiond")).map_err(|e| format!("cannot create {dir}/.sessiond: {e}"))
}

/// Resource groups that name no engine: nothing runs their sessions.
pub async fn groups_without_engine(db: &impl sea_orm::ConnectionTrait) -> DomainResult<Vec<String>> {
    use sea_orm::{ColumnTrait, QueryFilter};
    let groups = resource_group::Entity::find().filter(resource_group::Column::Engine.is_null()).all(db).await?;
    Ok(groups.into_iter().map(|g| g.name).collect())
}

/// What an engine is and whether it answers, as `{ runtime }` and `configuration` show it.
#[derive(Clone, Debug)]
pub struct EngineReport {
    pub name: String,
    pub kind: EngineKind,
    pub groups: Vec<String>,
    pub answering: bool,
    pub reason: String,
    pub api_version: Option<String>,
    /// Nodes of its partition (Slurm).
    pub nodes: Option<usize>,
    /// Jobs tagged by sessiond with no session here (Slurm: reported, never killed).
    pub orphan_jobs: Option<usize>,
}

/// Every stored engine and how it is doing.
pub async fn report(db: &impl sea_orm::ConnectionTrait) -> DomainResult<Vec<EngineReport>> {
    Ok(reports(stored(db).await?))
}

/// How `engines` are doing.
pub fn reports(engines: BTreeMap<String, StoredEngine>) -> Vec<EngineReport> {
    let health = registry().read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    engines.into_values().map(|e| describe(e, &health)).collect()
}

fn describe(e: StoredEngine, health: &BTreeMap<String, super::slurm::Health>) -> EngineReport {
    let kind = e.settings.kind();
    let (answering, reason, api_version, nodes, orphans) = match &e.settings {
        EngineSettings::Simulated => (
            true,
            "simulated: nothing runs; sessions walk through their statuses on timers (for the demo and tests only)"
                .to_owned(),
            None,
            None,
            None,
        ),
        EngineSettings::Local => {
            (true, "this machine: sessions run in a sandbox here (--runtime local)".to_owned(), None, None, None)
        }
        EngineSettings::Slurm(s) => match health.get(&e.name) {
            Some(h) => (
                h.answering,
                format!(
                    "{} ({}, partition {}); {}; {}",
                    h.reason,
                    s.url,
                    s.partition,
                    match s.sessiond_on_nodes() {
                        Some(path) => format!(
                            "jobs run in sessiond's sandbox on nodes that have {path} and bubblewrap \
                             (on other nodes plainly, as {})",
                            s.user
                        ),
                        None => format!("jobs run plainly as {} (no sessiond for the nodes is declared)", s.user),
                    },
                    match &h.terminal {
                        Ok(_) => "interactive sessions' terminals open with srun --overlap --pty".to_owned(),
                        Err(why) => why.clone(),
                    }
                ),
                h.api_version.clone(),
                Some(h.nodes),
                Some(h.orphans),
            ),
            None if e.groups.is_empty() => {
                (false, "runs no resource group, so it is not started".to_owned(), None, None, None)
            }
            None => (false, format!("not started yet ({}, partition {})", s.url, s.partition), None, None, None),
        },
    };
    EngineReport { name: e.name, kind, groups: e.groups, answering, reason, api_version, nodes, orphan_jobs: orphans }
}
