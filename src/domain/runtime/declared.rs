//! The declared engines at work: the Slurm engines started, restarted and stopped as
//! their declarations change ([`run_declared`]), and what each engine is and whether it
//! answers ([`report`]), for `{ runtime }`, `configuration`, metrics and the start-up log.

use std::collections::BTreeMap;

use sea_orm::{DatabaseConnection, EntityTrait};

use entity::resource_group;

use super::engines::{EngineKind, EngineSettings, SlurmSettings, StoredEngine, stored};
use super::slurm;
use crate::domain::DomainResult;

/// Runs every stored Slurm engine until the process ends: started when declared (read every
/// few seconds, so `sessiond apply` needs no restart), restarted when its settings or group
/// change, stopped when it is pruned.
pub async fn run_declared(
    db: DatabaseConnection,
    bus: crate::domain::live::events::EventBus,
    grace: std::time::Duration,
) {
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
                            Some((e.name, (*s, e.groups.into_iter().next()?)))
                        }
                        _ => None,
                    })
                    .collect();
                running.retain(|name, (settings, group, handle)| {
                    let keep =
                        wanted.get(name).is_some_and(|(s, g)| s == settings && g == group) && !handle.0.is_finished();
                    if !keep {
                        slurm::registry().write().unwrap_or_else(std::sync::PoisonError::into_inner).remove(name);
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
                    let engine = slurm::SlurmEngine::new(
                        name.clone(),
                        group.clone(),
                        settings.clone(),
                        grace,
                        slurm::registry().clone(),
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
    let health = slurm::registry().read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    engines.into_values().map(|e| describe(e, &health)).collect()
}

fn describe(e: StoredEngine, health: &BTreeMap<String, slurm::Health>) -> EngineReport {
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
