//! Occupancy and limits: what sessions hold (summed by aggregate SQL, never by loading
//! sessions), and why a request could not start now. One definition of occupancy: the
//! occupied slots of sessions in an occupying status (SCHEDULED up to TERMINATING).

use std::collections::HashMap;

use sea_orm::{ConnectionTrait, DbBackend, Statement, Value};
use uuid::Uuid;

use super::DomainResult;
use super::slots::ResourceSlots;
use super::status::SessionStatus;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitLayer {
    Keypair,
    Project,
    Domain,
    ResourceGroup,
}

impl LimitLayer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Keypair => "KEYPAIR",
            Self::Project => "PROJECT",
            Self::Domain => "DOMAIN",
            Self::ResourceGroup => "RESOURCE_GROUP",
        }
    }
}

/// Why a session cannot start now: a stable code and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingReason {
    /// `QUOTA_EXCEEDED`, `CONCURRENCY_LIMIT`, `NO_CAPACITY`, `QUEUED_BEHIND`.
    pub code: &'static str,
    pub message: String,
    pub layer: Option<LimitLayer>,
    pub slot: Option<String>,
    pub requested: Option<f64>,
    pub remaining: Option<f64>,
}

/// Whose occupancy to sum.
#[derive(Clone, Debug)]
pub enum Holder {
    Keypair(Uuid),
    Project(Uuid),
    Domain(Uuid),
    ResourceGroup(String),
}

fn occupying_sql() -> String {
    let list: Vec<String> =
        SessionStatus::ALL.iter().filter(|s| s.is_occupying()).map(|s| format!("'{}'", s.as_str())).collect();
    format!("({})", list.join(", "))
}

/// The slots held by `holder`'s sessions, in one aggregate statement.
pub async fn occupied(db: &impl ConnectionTrait, holder: &Holder) -> DomainResult<ResourceSlots> {
    let (column, value): (&str, Value) = match holder {
        Holder::Keypair(id) => ("keypair_id", (*id).into()),
        Holder::Project(id) => ("project_id", (*id).into()),
        Holder::Domain(id) => ("domain_id", (*id).into()),
        Holder::ResourceGroup(name) => ("resource_group", name.clone().into()),
    };
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => format!(
            "SELECT j.key AS slot, SUM(j.value::float8) AS amount FROM sessions s, jsonb_each_text(s.occupied_slots) j \
             WHERE s.status IN {} AND s.{column} = $1 GROUP BY j.key",
            occupying_sql()
        ),
        _ => format!(
            "SELECT j.key AS slot, TOTAL(j.value) AS amount FROM sessions s, json_each(s.occupied_slots) j \
             WHERE s.status IN {} AND s.{column} = ? GROUP BY j.key",
            occupying_sql()
        ),
    };
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, [value])).await?;
    let mut out = ResourceSlots::new();
    for r in rows {
        let slot: String = r.try_get("", "slot")?;
        let amount: f64 = r.try_get("", "amount")?;
        out.set(&slot, amount);
    }
    Ok(out)
}

/// What each agent of a group holds, in one aggregate statement.
pub async fn occupied_per_agent(
    db: &impl ConnectionTrait,
    group: &str,
) -> DomainResult<HashMap<String, ResourceSlots>> {
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => format!(
            "SELECT s.agent_id AS agent, j.key AS slot, SUM(j.value::float8) AS amount FROM sessions s, \
             jsonb_each_text(s.occupied_slots) j WHERE s.status IN {} AND s.resource_group = $1 AND s.agent_id IS NOT NULL \
             GROUP BY s.agent_id, j.key",
            occupying_sql()
        ),
        _ => format!(
            "SELECT s.agent_id AS agent, j.key AS slot, TOTAL(j.value) AS amount FROM sessions s, \
             json_each(s.occupied_slots) j WHERE s.status IN {} AND s.resource_group = ? AND s.agent_id IS NOT NULL \
             GROUP BY s.agent_id, j.key",
            occupying_sql()
        ),
    };
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, [Value::from(group.to_owned())])).await?;
    let mut out: HashMap<String, ResourceSlots> = HashMap::new();
    for r in rows {
        let agent: String = r.try_get("", "agent")?;
        let slot: String = r.try_get("", "slot")?;
        let amount: f64 = r.try_get("", "amount")?;
        out.entry(agent).or_default().set(&slot, amount);
    }
    Ok(out)
}

/// The quota failures of adding `extra` to `used` under `limit` (absent slot: unlimited).
pub fn quota_failures(
    layer: LimitLayer,
    limit: &ResourceSlots,
    used: &ResourceSlots,
    extra: &ResourceSlots,
) -> Vec<PendingReason> {
    extra
        .iter()
        .filter_map(|(slot, amount)| {
            let cap = limit.limit(slot)?;
            let remaining = (cap - used.get(slot)).max(0.0);
            (amount > remaining + 1e-9 && amount > 0.0).then(|| PendingReason {
                code: "QUOTA_EXCEEDED",
                message: format!(
                    "the {} limit of `{slot}` is {cap}: {} in use, {remaining} left, {amount} requested",
                    layer.as_str().to_lowercase(),
                    used.get(slot)
                ),
                layer: Some(layer),
                slot: Some(slot.to_owned()),
                requested: Some(amount),
                remaining: Some(remaining),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_failures_name_layer_slot_and_amounts() {
        let limit = ResourceSlots::from_pairs([("cpu", 16.0), ("cuda.device", 2.0)]);
        let used = ResourceSlots::from_pairs([("cpu", 10.0), ("cuda.device", 2.0)]);
        let extra = ResourceSlots::from_pairs([("cpu", 4.0), ("cuda.device", 1.0), ("mem", 1e12)]);
        let f = quota_failures(LimitLayer::Project, &limit, &used, &extra);
        assert_eq!(f.len(), 1, "cpu fits, mem is unlimited, the accelerator does not fit");
        assert_eq!((f[0].slot.as_deref(), f[0].requested, f[0].remaining), (Some("cuda.device"), Some(1.0), Some(0.0)));
    }
}

/// What every key of `column` (`keypair_id`, `project_id`, `domain_id`) holds, in one
/// aggregate statement.
pub async fn occupied_by(db: &impl ConnectionTrait, column: UuidColumn) -> DomainResult<HashMap<Uuid, ResourceSlots>> {
    let column = column.as_str();
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => format!(
            "SELECT s.{column} AS k, j.key AS slot, SUM(j.value::float8) AS amount FROM sessions s, \
             jsonb_each_text(s.occupied_slots) j WHERE s.status IN {} GROUP BY s.{column}, j.key",
            occupying_sql()
        ),
        _ => format!(
            "SELECT s.{column} AS k, j.key AS slot, TOTAL(j.value) AS amount FROM sessions s, \
             json_each(s.occupied_slots) j WHERE s.status IN {} GROUP BY s.{column}, j.key",
            occupying_sql()
        ),
    };
    let rows = db.query_all_raw(Statement::from_string(backend, sql)).await?;
    let mut out: HashMap<Uuid, ResourceSlots> = HashMap::new();
    for r in rows {
        let k: Uuid = r.try_get("", "k")?;
        let slot: String = r.try_get("", "slot")?;
        let amount: f64 = r.try_get("", "amount")?;
        out.entry(k).or_default().set(&slot, amount);
    }
    Ok(out)
}

/// What each owner holds in each resource group, in one aggregate statement.
pub async fn occupied_by_group_owner(
    db: &impl ConnectionTrait,
) -> DomainResult<HashMap<(String, Uuid), ResourceSlots>> {
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => format!(
            "SELECT s.resource_group AS g, s.owner_id AS k, j.key AS slot, SUM(j.value::float8) AS amount FROM sessions s, \
             jsonb_each_text(s.occupied_slots) j WHERE s.status IN {} GROUP BY s.resource_group, s.owner_id, j.key",
            occupying_sql()
        ),
        _ => format!(
            "SELECT s.resource_group AS g, s.owner_id AS k, j.key AS slot, TOTAL(j.value) AS amount FROM sessions s, \
             json_each(s.occupied_slots) j WHERE s.status IN {} GROUP BY s.resource_group, s.owner_id, j.key",
            occupying_sql()
        ),
    };
    let rows = db.query_all_raw(Statement::from_string(backend, sql)).await?;
    let mut out: HashMap<(String, Uuid), ResourceSlots> = HashMap::new();
    for r in rows {
        let g: String = r.try_get("", "g")?;
        let k: Uuid = r.try_get("", "k")?;
        let slot: String = r.try_get("", "slot")?;
        let amount: f64 = r.try_get("", "amount")?;
        out.entry((g, k)).or_default().set(&slot, amount);
    }
    Ok(out)
}

/// How many sessions of each keypair hold resources now, in one statement.
pub async fn active_by_keypair(db: &impl ConnectionTrait) -> DomainResult<HashMap<Uuid, u64>> {
    let backend = db.get_database_backend();
    let sql = format!(
        "SELECT keypair_id AS k, COUNT(*) AS n FROM sessions WHERE status IN {} GROUP BY keypair_id",
        occupying_sql()
    );
    let rows = db.query_all_raw(Statement::from_string(backend, sql)).await?;
    rows.into_iter()
        .map(|r| {
            let k: Uuid = r.try_get("", "k")?;
            let n: i64 = r.try_get("", "n")?;
            Ok((k, u64::try_from(n).unwrap_or(0)))
        })
        .collect()
}

#[derive(Clone, Copy, Debug)]
pub enum UuidColumn {
    Keypair,
    Project,
    Domain,
}

impl UuidColumn {
    fn as_str(self) -> &'static str {
        match self {
            Self::Keypair => "keypair_id",
            Self::Project => "project_id",
            Self::Domain => "domain_id",
        }
    }
}
