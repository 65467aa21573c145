//! A batch session may wait for others of its project (`dependsOn`): it is scheduled once
//! every one has TERMINATED with SUCCESS (pending reason DEPENDENCY until then), and
//! CANCELLED ("dependency failed: NAME") when one ends otherwise. Only sessions that exist
//! can be named, so dependencies never make a circle.

use std::collections::{BTreeSet, HashMap};

use sea_orm::sea_query::Query;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use entity::{session, session_dependency as dependency};

use crate::domain::directory::auth::Viewer;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::{DomainResult, InputProblem, sessions::visibility};

/// The most sessions one session waits for.
pub const MAX_DEPENDENCIES: usize = 20;

/// The problems of `ids` as what a launch in project `project_id` by `viewer` waits for:
/// each must be a session of that project the viewer may see (anything else is
/// UNKNOWN_DEPENDENCY, a session the viewer may not see exactly like none).
pub async fn problems(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    ids: &[Option<Uuid>],
    project_id: Uuid,
) -> DomainResult<Vec<InputProblem>> {
    if let Some(p) = InputProblem::too_many("depends_on", ids.len(), MAX_DEPENDENCIES, "sessions to wait for") {
        return Ok(vec![p]);
    }
    let wanted: BTreeSet<Uuid> = ids.iter().flatten().copied().collect();
    let found: HashMap<Uuid, session::Model> = if wanted.is_empty() {
        HashMap::new()
    } else {
        session::Entity::find()
            .filter(session::Column::Id.is_in(crate::domain::padded(wanted)))
            .all(db)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect()
    };
    let known = |id: &Option<Uuid>| {
        id.and_then(|id| found.get(&id))
            .is_some_and(|s| s.project_id == project_id && visibility::may_see_session(viewer, s.owner_id, s.domain_id))
    };
    Ok(ids
        .iter()
        .enumerate()
        .filter(|(_, id)| !known(id))
        .map(|(i, _)| {
            InputProblem::new(
                "UNKNOWN_DEPENDENCY",
                Some(format!("depends_on[{i}]")),
                "no session of this project that you may see has this id",
            )
        })
        .collect())
}

/// Records that each of `sessions` waits for each of `depends_on`: one statement.
pub async fn record(db: &impl ConnectionTrait, sessions: &[session::Model], depends_on: &[Uuid]) -> DomainResult<()> {
    let rows: Vec<dependency::ActiveModel> = sessions
        .iter()
        .flat_map(|s| {
            depends_on
                .iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|d| dependency::ActiveModel { session_id: Set(s.id), depends_on_id: Set(*d) })
        })
        .collect();
    if !rows.is_empty() {
        crate::domain::store::rows::insert_all(db, rows, None).await?;
    }
    Ok(())
}

/// Where a session's dependencies stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Every one TERMINATED with SUCCESS (or it has none).
    Met,
    /// Some have not ended yet: their names.
    Waiting(Vec<String>),
    /// This one ended otherwise (failed, cancelled, in error): its name.
    Failed(String),
}

/// Where dependencies `deps` stand.
pub fn standing(deps: &[session::Model]) -> DomainResult<Standing> {
    let mut waiting = Vec::new();
    for d in deps {
        let status = SessionStatus::stored(&d.status)?;
        if !status.is_terminal() {
            waiting.push(d.name.clone());
        } else if status != SessionStatus::Terminated || d.result != SessionResult::Success.as_str() {
            return Ok(Standing::Failed(d.name.clone()));
        }
    }
    Ok(if waiting.is_empty() { Standing::Met } else { Standing::Waiting(waiting) })
}

/// The dependencies of every PENDING session that has some, by session: two statements,
/// whatever the queue's length.
pub async fn of_pending(db: &impl ConnectionTrait) -> DomainResult<HashMap<Uuid, Vec<session::Model>>> {
    let pending = Query::select()
        .column(session::Column::Id)
        .from(session::Entity)
        .and_where(session::Column::Status.eq(SessionStatus::Pending.as_str()))
        .take();
    let rows = dependency::Entity::find().filter(dependency::Column::SessionId.in_subquery(pending)).all(db).await?;
    grouped(db, rows, |r| (r.session_id, r.depends_on_id)).await
}

/// What each of `ids` waits for, by session.
pub async fn depends_on(db: &impl ConnectionTrait, ids: &[Uuid]) -> DomainResult<HashMap<Uuid, Vec<session::Model>>> {
    let rows = dependency::Entity::find()
        .filter(dependency::Column::SessionId.is_in(crate::domain::padded(ids.iter().copied())))
        .all(db)
        .await?;
    grouped(db, rows, |r| (r.session_id, r.depends_on_id)).await
}

/// What waits for each of `ids`, by session.
pub async fn dependents(db: &impl ConnectionTrait, ids: &[Uuid]) -> DomainResult<HashMap<Uuid, Vec<session::Model>>> {
    let rows = dependency::Entity::find()
        .filter(dependency::Column::DependsOnId.is_in(crate::domain::padded(ids.iter().copied())))
        .all(db)
        .await?;
    grouped(db, rows, |r| (r.depends_on_id, r.session_id)).await
}

/// `rows` as sessions by key: `pair` gives each row's key and the session it names, read in
/// one statement.
async fn grouped(
    db: &impl ConnectionTrait,
    rows: Vec<dependency::Model>,
    pair: impl Fn(&dependency::Model) -> (Uuid, Uuid),
) -> DomainResult<HashMap<Uuid, Vec<session::Model>>> {
    let named: BTreeSet<Uuid> = rows.iter().map(|r| pair(r).1).collect();
    if named.is_empty() {
        return Ok(HashMap::new());
    }
    let sessions: HashMap<Uuid, session::Model> = session::Entity::find()
        .filter(session::Column::Id.is_in(crate::domain::padded(named)))
        .all(db)
        .await?
        .into_iter()
        .map(|s| (s.id, s))
        .collect();
    let mut out: HashMap<Uuid, Vec<session::Model>> = HashMap::new();
    for r in &rows {
        let (key, named) = pair(r);
        if let Some(s) = sessions.get(&named) {
            out.entry(key).or_default().push(s.clone());
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|s| (s.created_at, s.id));
    }
    Ok(out)
}
