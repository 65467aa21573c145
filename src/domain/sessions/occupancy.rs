//! Occupancy and limits: what sessions hold (summed by aggregate SQL, never by loading
//! sessions), and why a request could not start now. One definition of occupancy: the
//! occupied slots of sessions in an occupying status (SCHEDULED up to TERMINATING).

use std::collections::HashMap;

use sea_orm::{ConnectionTrait, DbBackend, Statement, Value};
use uuid::Uuid;

use crate::domain::DomainResult;
use crate::domain::model::slots::ResourceSlots;
use crate::domain::model::status::SessionStatus;
use crate::domain::model::string_enum;

string_enum!(
    /// Which limit a figure or a pending reason is about.
    LimitLayer { Keypair = "KEYPAIR", Project = "PROJECT", Domain = "DOMAIN", ResourceGroup = "RESOURCE_GROUP" }
);

/// The codes of pending reasons.
pub const PENDING_CODES: &[&str] = &[
    // A batch session set to start later (`startsAt`).
    "NOT_YET",
    "QUOTA_EXCEEDED",
    "CONCURRENCY_LIMIT",
    "NO_CAPACITY",
    "QUEUED_BEHIND",
    // A scheduled session waiting in its engine: the engine does not answer, or Slurm's
    // reason (see `runtime::slurm::job::reason_code`).
    "ENGINE_UNREACHABLE",
    "INSUFFICIENT_RESOURCES",
    "PRIORITY",
    "NODES_UNAVAILABLE",
    "PARTITION_DOWN",
    "BEGIN_TIME",
    "DEPENDENCY",
    "HELD",
    "QOS_LIMIT",
    "ASSOCIATION_LIMIT",
    "SLURM_REASON",
];

/// Why a session cannot start now: a stable code and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingReason {
    /// `NOT_YET`, `QUOTA_EXCEEDED`, `CONCURRENCY_LIMIT`, `NO_CAPACITY`, `QUEUED_BEHIND`.
    pub code: &'static str,
    pub message: String,
    pub layer: Option<LimitLayer>,
    pub slot: Option<String>,
    pub requested: Option<f64>,
    pub remaining: Option<f64>,
}

impl PendingReason {
    /// The form stored with a pending session (`sessions.pending_reasons`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "code": self.code, "message": self.message, "layer": self.layer.map(LimitLayer::as_str),
            "slot": self.slot, "requested": self.requested, "remaining": self.remaining,
        })
    }

    /// The stored form of `reasons` and their digest ([`reasons_digest`]): the two columns
    /// every writer of a session's reasons sets together.
    pub fn stored(reasons: &[PendingReason]) -> (serde_json::Value, i64) {
        (Self::list_to_json(reasons), reasons_digest(reasons))
    }

    /// The stored form of `reasons` (`sessions.pending_reasons`), without the digest.
    pub fn list_to_json(reasons: &[PendingReason]) -> serde_json::Value {
        serde_json::Value::Array(reasons.iter().map(Self::to_json).collect())
    }

    /// Reads what [`Self::to_json`] stored; entries with an unknown code are skipped.
    pub fn list_from_json(stored: &serde_json::Value) -> Vec<PendingReason> {
        let text = |r: &serde_json::Value, k: &str| r.get(k).and_then(serde_json::Value::as_str).map(str::to_owned);
        let number = |r: &serde_json::Value, k: &str| r.get(k).and_then(serde_json::Value::as_f64);
        stored
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let code = r.get("code")?.as_str()?;
                Some(PendingReason {
                    code: PENDING_CODES.iter().copied().find(|c| *c == code)?,
                    message: text(r, "message").unwrap_or_default(),
                    layer: r.get("layer").and_then(serde_json::Value::as_str).and_then(LimitLayer::parse),
                    slot: text(r, "slot"),
                    requested: number(r, "requested"),
                    remaining: number(r, "remaining"),
                })
            })
            .collect()
    }
}

/// A digest of `reasons` as stored (`sessions.pending_digest`): equal reasons, equal
/// digests. Computed from the reasons themselves, not their JSON, so that a pass compares
/// a waiting session's reasons without building or reading any JSON. Never 0 (0 is "not
/// known", what a session has before any writer set it).
pub fn reasons_digest(reasons: &[PendingReason]) -> i64 {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let text = |h: &mut sha2::Sha256, t: Option<&str>| {
        // Each field with its length or absence, so that no two lists feed the same bytes.
        match t {
            Some(t) => {
                h.update([1]);
                h.update((t.len() as u64).to_le_bytes());
                h.update(t.as_bytes());
            }
            None => h.update([0]),
        }
    };
    let number = |h: &mut sha2::Sha256, n: Option<f64>| match n {
        Some(n) => {
            h.update([1]);
            h.update(n.to_bits().to_le_bytes());
        }
        None => h.update([0]),
    };
    h.update((reasons.len() as u64).to_le_bytes());
    for r in reasons {
        text(&mut h, Some(r.code));
        text(&mut h, Some(&r.message));
        text(&mut h, r.layer.map(LimitLayer::as_str));
        text(&mut h, r.slot.as_deref());
        number(&mut h, r.requested);
        number(&mut h, r.remaining);
    }
    let bytes: [u8; 8] = h.finalize()[..8].try_into().expect("eight bytes of a SHA-256");
    match i64::from_le_bytes(bytes) {
        0 => 1,
        d => d,
    }
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

/// An aggregate over the slots held by occupying sessions (`sessions s`, slots `j`):
/// `SELECT keys, slot, sums … GROUP BY group_by, slot`. `sum` in `sums` stands for the
/// backend's float sum of a slot amount expression; `?` placeholders are numbered for
/// PostgreSQL. Every occupancy query is built here, so the occupying statuses, the JSON
/// expansion and the summing are written once.
fn slot_sums_sql(backend: DbBackend, keys: &[&str], sums: &[String], condition: &str, group_by: &[&str]) -> String {
    let each = match backend {
        DbBackend::Postgres => "jsonb_each_text(s.occupied_slots)",
        _ => "json_each(s.occupied_slots)",
    };
    let select: Vec<String> =
        keys.iter().map(|k| (*k).to_owned()).chain(["j.key AS slot".to_owned()]).chain(sums.iter().cloned()).collect();
    let group: Vec<&str> = group_by.iter().copied().chain(["j.key"]).collect();
    let sql = format!(
        "SELECT {} FROM sessions s, {each} j WHERE s.status IN {} AND ({condition}) GROUP BY {}",
        select.join(", "),
        occupying_sql(),
        group.join(", ")
    );
    if backend != DbBackend::Postgres {
        return sql;
    }
    let mut n = 0;
    sql.split('?').enumerate().fold(String::new(), |mut acc, (i, part)| {
        if i > 0 {
            n += 1;
            acc.push_str(&format!("${n}"));
        }
        acc.push_str(part);
        acc
    })
}

/// The backend's float sum of `what` (an expression of the slot amount `v`).
fn float_sum(backend: DbBackend, what: impl Fn(&str) -> String) -> String {
    match backend {
        DbBackend::Postgres => format!("SUM({})", what("j.value::float8")),
        // SQLite's TOTAL is always a float (SUM of integers is an integer).
        _ => format!("TOTAL({})", what("j.value")),
    }
}

/// What each of `holders` holds, in one aggregate statement (one conditional sum per
/// holder), in the order given.
pub async fn occupied(db: &impl ConnectionTrait, holders: &[Holder]) -> DomainResult<Vec<ResourceSlots>> {
    if holders.is_empty() {
        return Ok(Vec::new());
    }
    let backend = db.get_database_backend();
    let conditions: Vec<(String, Vec<Value>)> = holders.iter().map(Holder::condition).collect();
    let sums: Vec<String> = conditions
        .iter()
        .enumerate()
        .map(|(i, (cond, _))| {
            format!("{} AS h{i}", float_sum(backend, |v| format!("CASE WHEN {cond} THEN {v} ELSE 0 END")))
        })
        .collect();
    let any: Vec<&str> = conditions.iter().map(|(c, _)| c.as_str()).collect();
    // Parameters in placeholder order: the sums', then the filter's.
    let values: Vec<Value> = conditions.iter().chain(&conditions).flat_map(|(_, p)| p.iter().cloned()).collect();
    let sql = slot_sums_sql(backend, &[], &sums, &any.join(" OR "), &[]);
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

/// Runs a grouped occupancy query and folds its rows by `key`.
async fn grouped<K: std::hash::Hash + Eq>(
    db: &impl ConnectionTrait,
    keys: &[&str],
    condition: &str,
    group_by: &[&str],
    values: Vec<Value>,
    key: impl Fn(&sea_orm::QueryResult) -> Result<K, sea_orm::DbErr>,
) -> DomainResult<HashMap<K, ResourceSlots>> {
    let backend = db.get_database_backend();
    let sum = format!("{} AS amount", float_sum(backend, str::to_owned));
    let sql = slot_sums_sql(backend, keys, &[sum], condition, group_by);
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    let mut out: HashMap<K, ResourceSlots> = HashMap::new();
    for r in rows {
        let slot: String = r.try_get("", "slot")?;
        let amount: f64 = r.try_get("", "amount")?;
        out.entry(key(&r)?).or_default().set(&slot, amount);
    }
    Ok(out)
}

/// What each agent of a group holds, in one aggregate statement.
pub async fn occupied_per_agent(
    db: &impl ConnectionTrait,
    group: &str,
) -> DomainResult<HashMap<String, ResourceSlots>> {
    grouped(
        db,
        &["s.agent_id AS agent"],
        "s.resource_group = ? AND s.agent_id IS NOT NULL",
        &["s.agent_id"],
        vec![group.to_owned().into()],
        |r| r.try_get("", "agent"),
    )
    .await
}

/// What each agent of every group holds, in one aggregate statement.
pub async fn occupied_per_agent_everywhere(db: &impl ConnectionTrait) -> DomainResult<HashMap<String, ResourceSlots>> {
    grouped(db, &["s.agent_id AS agent"], "s.agent_id IS NOT NULL", &["s.agent_id"], Vec::new(), |r| {
        r.try_get("", "agent")
    })
    .await
}

/// What every key of `column` (`keypair_id`, `project_id`, `domain_id`) holds, in one
/// aggregate statement.
pub async fn occupied_by(db: &impl ConnectionTrait, column: UuidColumn) -> DomainResult<HashMap<Uuid, ResourceSlots>> {
    let key = format!("s.{} AS k", column.as_str());
    let group = format!("s.{}", column.as_str());
    grouped(db, &[&key], "TRUE", &[&group], Vec::new(), |r| r.try_get("", "k")).await
}

/// What each owner holds in each resource group, in one aggregate statement.
pub async fn occupied_by_group_owner(
    db: &impl ConnectionTrait,
) -> DomainResult<HashMap<(String, Uuid), ResourceSlots>> {
    grouped(
        db,
        &["s.resource_group AS g", "s.owner_id AS k"],
        "TRUE",
        &["s.resource_group", "s.owner_id"],
        Vec::new(),
        |r| Ok((r.try_get("", "g")?, r.try_get("", "k")?)),
    )
    .await
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
                message: {
                    let shown = |v: f64| crate::domain::model::slots::shown(slot, v);
                    format!(
                        "the {} limit of `{slot}` is {}: {} in use, {} left, {} requested",
                        layer.as_str().to_lowercase().replace('_', " "),
                        shown(cap),
                        shown(used.get(slot)),
                        shown(remaining),
                        shown(amount)
                    )
                },
                layer: Some(layer),
                slot: Some(slot.to_owned()),
                requested: Some(amount),
                remaining: Some(remaining),
            })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_reasons_round_trip_through_their_stored_form() {
        let reasons = vec![
            PendingReason {
                code: "QUOTA_EXCEEDED",
                message: "over".into(),
                layer: Some(LimitLayer::Project),
                slot: Some("cpu".into()),
                requested: Some(2.0),
                remaining: Some(0.5),
            },
            PendingReason {
                code: "QUEUED_BEHIND",
                message: "behind".into(),
                layer: None,
                slot: None,
                requested: None,
                remaining: None,
            },
        ];
        let (stored, digest) = PendingReason::stored(&reasons);
        assert_eq!(PendingReason::list_from_json(&stored), reasons);
        assert!(PendingReason::list_from_json(&serde_json::json!([{"code": "MADE_UP"}])).is_empty());
        // The digest: the same reasons, the same digest; any field changed, another; never
        // 0 ("not known"), the empty list's included.
        assert_eq!(reasons_digest(&PendingReason::list_from_json(&stored)), digest);
        let mut others = Vec::new();
        let mut changed = |f: &dyn Fn(&mut PendingReason)| {
            let mut r = reasons.clone();
            f(&mut r[0]);
            others.push(reasons_digest(&r));
        };
        changed(&|r| r.code = "NO_CAPACITY");
        changed(&|r| r.message.push('!'));
        changed(&|r| r.layer = None);
        changed(&|r| r.slot = Some("mem".into()));
        changed(&|r| r.requested = Some(2.5));
        changed(&|r| r.remaining = None);
        // Moved between fields: a message ending where a slot begins is not the same.
        changed(&|r| {
            r.message = "overcpu".into();
            r.slot = Some(String::new());
        });
        others.push(reasons_digest(&reasons[..1]));
        others.push(reasons_digest(&[]));
        let mut distinct: Vec<i64> = others.iter().copied().chain([digest]).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), others.len() + 1, "every change changes the digest");
        assert!(distinct.iter().all(|d| *d != 0));
    }

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
