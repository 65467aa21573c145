//! Engines are declared, never implied: `[engines.NAME]` in `sessiond apply` gives a kind
//! and the kind's settings, and each resource group names the engine that runs its
//! sessions. A group that names none runs nothing (its sessions are never placed).
//!
//! - `simulated`: nothing runs; sessions walk through their statuses on timers. For the demo
//!   and tests only, and every report says so.
//! - `local`: the server's own machine (`--runtime local`), its sessions in a sandbox.
//! - `slurm`: a Slurm cluster through `slurmrestd` ([`super::slurm`]).
//!
//! What runs the declared engines, and how each is doing, is [`super::declared`].

use std::collections::BTreeMap;

use sea_orm::EntityTrait;

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
    /// The address each job's supervisor listens on for this server alone to reach its
    /// session's apps (its relay); none: every address of the node, reached by its
    /// hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_bind: Option<String>,
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
    Slurm(Box<SlurmSettings>),
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
            EngineKind::Slurm => EngineSettings::Slurm(Box::new(serde_json::from_value(row.settings.clone()).ok()?)),
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
