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
    Owner(Uuid),
    OwnerInGroup(Uuid, String),
    Keypair(Uuid),
    Project(Uuid),
    Domain(Uuid),
    ResourceGroup(String),
}

impl Holder {
    /// The SQL condition on `sessions s`, with its parameters.
    fn condition(&self) -> (String, Vec<Value>) {
        match self {
            Holder::Owner(id) => ("s.owner_id = ?".into(), vec![(*id).into()]),
            Holder::OwnerInGroup(id, g) => {
                ("(s.owner_id = ? AND s.resource_group = ?)".into(), vec![(*id).into(), g.clone().into()])
            }
            Holder::Keypair(id) => ("s.keypair_id = ?".into(), vec![(*id).into()]),
            Holder::Project(id) => ("s.project_id = ?".into(), vec![(*id).into()]),
            Holder::Domain(id) => ("s.domain_id = ?".into(), vec![(*id).into()]),
            Holder::ResourceGroup(g) => ("s.resource_group = ?".into(), vec![g.clone().into()]),
        }
    }
}

fn occupying_sql() -> String {
    let list: Vec<String> =
        SessionStatus::ALL.iter().filter(|s| s.is_occupying()).map(|s| format!("'{}'", s.as_str())).collect();
    format!("({})", list.join(", "))
}

/// What each of `holders` holds, in one aggregate statement (one conditional sum per
/// holder), in the order given.
pub async fn occupied(db: &impl ConnectionTrait, holders: &[Holder]) -> DomainResult<Vec<ResourceSlots>> {
    if holders.is_empty() {
        return Ok(Vec::new());
    }
    let backend = db.get_database_backend();
    // SQLite's TOTAL is always a float (SUM of integers is an integer).
    let (sum, value) = match backend {
        DbBackend::Postgres => ("SUM", "j.value::float8"),
        _ => ("TOTAL", "j.value"),
    };
    let mut values: Vec<Value> = Vec::new();
    let mut sums = Vec::new();
    let mut any = Vec::new();
    let conditions: Vec<(String, Vec<Value>)> = holders.iter().map(Holder::condition).collect();
    for (i, (cond, params)) in conditions.iter().enumerate() {
        sums.push(format!("{sum}(CASE WHEN {cond} THEN {value} ELSE 0 END) AS h{i}"));
        values.extend(params.iter().cloned());
    }
    for (cond, params) in &conditions {
        any.push(cond.clone());
        values.extend(params.iter().cloned());
    }
    let each = match backend {
        DbBackend::Postgres => "jsonb_each_text(s.occupied_slots)",
        _ => "json_each(s.occupied_slots)",
    };
    let mut sql = format!(
        "SELECT j.key AS slot, {} FROM sessions s, {each} j WHERE s.status IN {} AND ({}) GROUP BY j.key",
        sums.join(", "),
        occupying_sql(),
        any.join(" OR ")
    );
    if backend == DbBackend::Postgres {
        // Number the placeholders as PostgreSQL wants them.
        let mut n = 0;
        sql = sql.split('?').enumerate().fold(String::new(), |mut acc, (i, part)| {
            if i > 0 {
                n += 1;
                acc.push_str(&format!("${n}"));
            }
            acc.push_str(part);
            acc
        });
    }
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    let mut out = vec![ResourceSlots::new(); holders.len()];
    for r in rows {
        let slot: String = r.try_get("", "slot")?;
        for (i, slots) in out.iter_mut().enumerate() {
            let amount: Option<f64> = r.try_get("", &format!("h{i}"))?;
            if let Some(a) = amount.filter(|a| *a != 0.0) {
                slots.set(&slot, a);
            }
        }
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
