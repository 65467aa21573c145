//! Changing sessions after launch: a new name (the launch's name rules, unique among the
//! owner's live sessions) and a new priority for PENDING sessions (an owner may lower their
//! own; an administrator of the session's domain may set any, up to the `max_priority` of
//! the session's keypair policy). Each requested id gets an outcome; sessions the viewer
//! may not see, or not work on (an owner removed from its project), are NOT_FOUND, exactly
//! like unknown ones. What changed is in each session's
//! history, with who changed it; the scheduler takes a new priority at its next pass.

use std::collections::{BTreeSet, HashMap};

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

use entity::session;

use crate::domain::directory::auth::Viewer;
use crate::domain::launch::admission::live_name_taken;
use crate::domain::launch::validate::{PRIORITY_RANGE, valid_name};
use crate::domain::lifecycle::{self, Transitions, Written};
use crate::domain::model::actor::Actor;
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, InputProblem, model::clock, sessions::visibility};

/// What to change; at least one of them.
#[derive(Clone, Debug, Default)]
pub struct Modification {
    pub name: Option<String>,
    pub priority: Option<i32>,
}

/// One outcome of a modification request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModifyOutcome {
    Modified,
    /// It already had that name and priority.
    Unchanged,
    NotFound,
    /// A priority is changed only while the session waits.
    NotPending,
    /// Its owner may only lower its priority; raising it is for an administrator.
    Forbidden,
    /// Another live session of its owner has that name.
    NameTaken,
    /// Above the `max_priority` of the session's keypair policy.
    PriorityLimit,
}

/// Applies `m` to each session of `ids` (at most `max_ids`), in one transaction. One outcome
/// per requested id, in order, with the session as it then is (none when NOT_FOUND). A
/// refused session is left exactly as it was.
pub async fn modify(
    db: &DatabaseConnection,
    bus: &crate::domain::live::events::EventBus,
    viewer: &Viewer,
    ids: &[Option<Uuid>],
    m: &Modification,
    max_ids: u32,
) -> DomainResult<Vec<(ModifyOutcome, Option<session::Model>)>> {
    check(ids, m, max_ids)?;
    let wanted: Vec<Uuid> = ids.iter().flatten().copied().collect::<BTreeSet<_>>().into_iter().collect();
    let txn = crate::domain::begin_write(db).await?;
    let seen: Vec<session::Model> = session::Entity::find()
        .filter(session::Column::Id.is_in(crate::domain::padded(wanted)))
        .all(&txn)
        .await?
        .into_iter()
        .filter(|s| visibility::may_see_session(viewer, s.owner_id, s.domain_id))
        .collect();
    let mut visible: HashMap<Uuid, session::Model> =
        visibility::sessions_to_work_on(&txn, viewer, seen).await?.into_iter().map(|s| (s.id, s)).collect();
    let ceilings = match m.priority {
        Some(_) => ceilings(&txn, visible.values()).await?,
        None => HashMap::new(),
    };
    let now = clock::now();
    let mut outcomes: HashMap<Uuid, ModifyOutcome> = HashMap::new();
    let mut transitions = Transitions::default();
    for s in visible.values_mut() {
        let outcome = match decide(viewer, s, m, &ceilings) {
            Err(refused) => refused,
            Ok(change) if change.is_empty() => ModifyOutcome::Unchanged,
            Ok(change) => {
                let (outcome, after) = write(&txn, viewer, s, &change, now, &mut transitions).await?;
                if let Some(after) = after {
                    *s = after;
                }
                outcome
            }
        };
        outcomes.insert(s.id, outcome);
    }
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(ids
        .iter()
        .map(|id| match id.and_then(|id| Some((outcomes.get(&id)?, visible.get(&id)?))) {
            None => (ModifyOutcome::NotFound, None),
            Some((outcome, s)) => (*outcome, Some(s.clone())),
        })
        .collect())
}

/// The request itself: how many ids, something to change, a valid name for one session,
/// a priority in the API's bounds.
fn check(ids: &[Option<Uuid>], m: &Modification, max_ids: u32) -> DomainResult<()> {
    let max = usize::try_from(max_ids).unwrap_or(usize::MAX);
    let mut problems: Vec<InputProblem> =
        InputProblem::too_many("ids", ids.len(), max, "sessions at once").into_iter().collect();
    if ids.is_empty() {
        problems.push(InputProblem::new("EMPTY", Some("ids".into()), "name at least one session"));
    }
    if m.name.is_none() && m.priority.is_none() {
        problems.push(InputProblem::new("NOTHING_TO_CHANGE", Some("input".into()), "give a name, a priority or both"));
    }
    if let Some(name) = &m.name {
        if !valid_name(name) {
            problems.push(InputProblem::new(
                "INVALID_NAME",
                Some("name".into()),
                crate::domain::launch::validate::name_rule(),
            ));
        }
        if ids.iter().flatten().collect::<BTreeSet<_>>().len() > 1 {
            problems.push(InputProblem::new(
                "ONE_SESSION_PER_NAME",
                Some("ids".into()),
                "a name renames one session: give one id with it",
            ));
        }
    }
    if let Some(p) = m.priority.filter(|p| !PRIORITY_RANGE.contains(p)) {
        let (lo, hi) = (PRIORITY_RANGE.start(), PRIORITY_RANGE.end());
        problems.push(InputProblem::new(
            "OUT_OF_RANGE",
            Some("priority".into()),
            format!("{p}: the priority is between {lo} and {hi}"),
        ));
    }
    if problems.is_empty() { Ok(()) } else { Err(DomainError::BadInput(problems)) }
}

/// The highest priority each keypair's policy allows, by keypair (missing: the API's bound).
async fn ceilings<'a>(
    db: &impl sea_orm::ConnectionTrait,
    sessions: impl Iterator<Item = &'a session::Model>,
) -> DomainResult<HashMap<Uuid, i32>> {
    let policies = crate::domain::directory::auth::policies_of(db, sessions.map(|s| s.keypair_id)).await?;
    Ok(policies.into_iter().filter_map(|(k, p)| Some((k, p.max_priority?))).collect())
}

/// What changes for one session, once allowed.
#[derive(Default)]
struct Change {
    name: Option<String>,
    priority: Option<i32>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.name.is_none() && self.priority.is_none()
    }

    /// The history line: who changed what, from what.
    fn described(&self, who: &str, before: &session::Model) -> String {
        let mut parts = Vec::new();
        if let Some(name) = &self.name {
            parts.push(format!("renamed it from {} to {name}", before.name));
        }
        if let Some(p) = self.priority {
            parts.push(format!("set its priority from {} to {p}", before.priority));
        }
        format!("{who} {}", parts.join(" and "))
    }
}

/// Whether `viewer` may make `m` to `s`, and what actually changes; the refusal if not.
fn decide(
    viewer: &Viewer,
    s: &session::Model,
    m: &Modification,
    ceilings: &HashMap<Uuid, i32>,
) -> Result<Change, ModifyOutcome> {
    let mut change = Change::default();
    if let Some(p) = m.priority.filter(|p| *p != s.priority) {
        if s.status != SessionStatus::Pending.as_str() {
            return Err(ModifyOutcome::NotPending);
        }
        let admin = viewer.administers_domain(s.domain_id);
        if !admin && p > s.priority {
            return Err(ModifyOutcome::Forbidden);
        }
        if p > ceilings.get(&s.keypair_id).copied().unwrap_or(*PRIORITY_RANGE.end()) {
            return Err(ModifyOutcome::PriorityLimit);
        }
        change.priority = Some(p);
    }
    change.name = m.name.clone().filter(|n| *n != s.name);
    Ok(change)
}

/// Writes `change` to `s` through the one writer, guarded: a priority only while the
/// session still waits, a name only if no other live session of its owner has it (the
/// unique index decides races). The session as it now is, when changed.
async fn write(
    txn: &sea_orm::DatabaseTransaction,
    viewer: &Viewer,
    s: &session::Model,
    change: &Change,
    now: chrono::DateTime<chrono::Utc>,
    transitions: &mut Transitions,
) -> DomainResult<(ModifyOutcome, Option<session::Model>)> {
    let status = SessionStatus::stored(&s.status)?;
    if let Some(name) = change.name.as_ref().filter(|_| !status.is_terminal())
        && live_name_taken(txn, s.owner_id, std::slice::from_ref(name), Some(s.id)).await?.is_some()
    {
        return Ok((ModifyOutcome::NameTaken, None));
    }
    let mut m = lifecycle::Modification::new(
        s.id,
        status,
        "modified",
        change.described(&viewer.email, s),
        Actor::User(viewer.user_id),
    );
    // A rename does not wait on the status; a new priority holds only while it waits.
    m.guard_status = change.priority.is_some();
    if let Some(name) = &change.name {
        m.set.push((session::Column::Name, Expr::value(name.clone())));
    }
    if let Some(p) = change.priority {
        m.set.push((session::Column::Priority, Expr::value(p)));
    }
    Ok(match lifecycle::modify(txn, m, now, transitions).await? {
        Written::Done(after) => (ModifyOutcome::Modified, Some(*after)),
        Written::Moved => (ModifyOutcome::NotPending, None),
        Written::Conflict => (ModifyOutcome::NameTaken, None),
    })
}
