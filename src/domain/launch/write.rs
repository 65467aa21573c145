//! Writing a launch: every row in one transaction, each table in one statement whatever
//! the count; the transitions go last, and the bus hears of them after the commit.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, Set, SqlErr,
};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{idempotency_key, launch_group, scheduling_history, session};

use super::admission::admissible;
use super::idempotency::{IDEMPOTENCY_RETENTION, fingerprint, stored_result};
use super::{Launched, Origin, Plan};
use crate::domain::directory::auth::Viewer;
use crate::domain::lifecycle::history::SchedulingResult;
use crate::domain::lifecycle::{self, Transitions, transition_row};
use crate::domain::live::events::EventBus;
use crate::domain::model::actor::Actor;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::{DomainError, store::rows};

pub enum WriteError {
    /// A name (or the idempotency key) is already taken, as the unique index said (the
    /// name is then unknown: empty).
    Taken(String),
    Other(DomainError),
}

impl From<sea_orm::DbErr> for WriteError {
    fn from(e: sea_orm::DbErr) -> Self {
        match e.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(_)) => Self::Taken(String::new()),
            _ => Self::Other(e.into()),
        }
    }
}

impl From<DomainError> for WriteError {
    fn from(e: DomainError) -> Self {
        Self::Other(e)
    }
}

/// All rows of a launch in one transaction, each table in one statement.
pub async fn write(
    db: &DatabaseConnection,
    viewer: &Viewer,
    plan: &Plan,
    batch: bool,
    now: DateTime<Utc>,
    bus: &EventBus,
) -> Result<Launched, WriteError> {
    let txn = crate::domain::begin_write(db).await?;
    // The admission checks count this keypair's sessions: serialise launches of one keypair
    // (SQLite's write lock already does; PostgreSQL takes a transaction-scoped lock).
    if txn.get_database_backend() == sea_orm::DbBackend::Postgres {
        let key = i64::from_be_bytes(viewer.keypair_id.as_bytes()[..8].try_into().unwrap_or([0; 8]));
        txn.execute_raw(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            "SELECT pg_advisory_xact_lock($1)",
            [key.into()],
        ))
        .await?;
    }
    let granted = match admissible(&txn, viewer, plan).await {
        Ok(granted) => granted,
        Err(DomainError::NameTaken(name)) => return Err(WriteError::Taken(name)),
        Err(e) => return Err(WriteError::Other(e)),
    };
    if let Err(e) = crate::domain::storage::mounts::hold(&txn, &plan.mounts).await {
        return Err(WriteError::Other(e));
    }
    if plan.launch.idempotency_key.is_some() {
        // Expired keys go first, so that an old key can be used again.
        idempotency_key::Entity::delete_many()
            .filter(idempotency_key::Column::CreatedAt.lt(now - IDEMPOTENCY_RETENTION))
            .exec(&txn)
            .await?;
    }
    let group = batch.then(|| launch_group::Model {
        id: Uuid::now_v7(),
        name: plan.launch.name.clone(),
        count: i32::try_from(plan.names.len()).unwrap_or(i32::MAX),
        owner_id: viewer.user_id,
        project_id: plan.project.id,
        created_at: now,
    });
    if let Some(g) = &group {
        launch_group::Entity::insert(launch_group::ActiveModel::from(g.clone())).exec_without_returning(&txn).await?;
    }
    let environment =
        Value::Array(plan.launch.environment.iter().map(|(n, v)| json!({"name": n, "value": v})).collect());
    let requested = plan.request.total().to_json();
    let mounts = crate::domain::storage::mounts::stored(&plan.mounts);
    // Nothing to wait for yet: the scheduler's first pass says why, if anything.
    let (no_reasons, no_reasons_digest) = crate::domain::sessions::occupancy::PendingReason::stored(&[]);
    let sessions: Vec<session::Model> = plan
        .names
        .iter()
        .map(|name| session::Model {
            id: Uuid::now_v7(),
            name: name.clone(),
            session_type: plan.launch.session_type.as_str().to_owned(),
            status: SessionStatus::Pending.as_str().to_owned(),
            status_info: None,
            result: SessionResult::Undefined.as_str().to_owned(),
            exit_code: None,
            owner_id: viewer.user_id,
            keypair_id: viewer.keypair_id,
            project_id: plan.project.id,
            domain_id: plan.project.domain_id,
            resource_group: plan.resource_group.name.clone(),
            image: plan.image.name.clone(),
            requested_slots: requested.clone(),
            occupied_slots: json!({}),
            cluster_size: plan.launch.cluster_size,
            environment: environment.clone(),
            startup_command: plan.launch.startup_command.clone(),
            batch_timeout_seconds: plan.launch.batch_timeout_seconds,
            priority: plan.launch.priority,
            agent_id: None,
            launch_group_id: group.as_ref().map(|g| g.id),
            pending_reasons: no_reasons.clone(),
            created_at: now,
            scheduled_at: None,
            started_at: None,
            terminated_at: None,
            status_changed_at: now,
            queue_position: None,
            lifetime_seconds: granted.lifetime,
            extended_seconds: 0,
            extensions: 0,
            expiry_warned_for: None,
            utilization: json!({}),
            utilization_samples: 0,
            utilization_sampled_at: None,
            idle: granted.idle.clone(),
            active_at: None,
            typed_at: None,
            exempt_idle: false,
            cpu_used: 0.0,
            mem_used: 0.0,
            status_actor_user_id: Some(viewer.user_id),
            status_actor_rule: None,
            launched_from_session_id: match &plan.launch.origin {
                Some(Origin::Session { id, .. }) => Some(*id),
                _ => None,
            },
            launched_from_template_id: match &plan.launch.origin {
                Some(Origin::Template { id, .. }) => Some(*id),
                _ => None,
            },
            launched_from_name: plan.launch.origin.as_ref().map(|o| o.name().to_owned()),
            starts_at: plan.launch.starts_at,
            callback_url: plan.launch.callback_url.clone(),
            callback_on_running: plan.launch.callback_url.is_some() && plan.launch.callback_on_running,
            pending_digest: no_reasons_digest,
            pull_progress: None,
            image_digest: plan.launch.image_digest.clone(),
            mounts: mounts.clone(),
        })
        .collect();
    rows::insert_all(&txn, sessions.iter().cloned().map(session::ActiveModel::from).collect(), None).await?;
    let depends_on: Vec<Uuid> = plan.launch.depends_on.iter().flatten().copied().collect();
    crate::domain::scheduling::dependencies::record(&txn, &sessions, &depends_on).await?;
    let ids: Vec<uuid::Uuid> = sessions.iter().map(|s| s.id).collect();
    crate::domain::storage::mounts::record(&txn, &ids, &plan.mounts).await?;
    let enqueued = sessions.iter().map(|s| scheduling_history::ActiveModel {
        id: NotSet,
        session_id: Set(s.id),
        phase: Set("enqueue".into()),
        from_status: Set(None),
        to_status: Set(Some(SessionStatus::Pending.as_str().into())),
        result: Set(SchedulingResult::Success.as_str().into()),
        error_code: Set(None),
        message: Set(format!("queued in resource group `{}`", plan.resource_group.name)),
        sub_steps: Set(json!([])),
        attempts: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
        actor_user_id: Set(Some(viewer.user_id)),
        actor_rule: Set(None),
        pass: Set(None),
        last_tried_at: Set(None),
    });
    rows::insert_all(&txn, enqueued.collect(), None).await?;
    let launched = Launched { launch_group: group, sessions };
    if let Some(key) = &plan.launch.idempotency_key {
        idempotency_key::Entity::insert(idempotency_key::ActiveModel {
            user_id: Set(viewer.user_id),
            key: Set(key.clone()),
            response: Set(stored_result(&launched, batch, &fingerprint(plan, batch))),
            created_at: Set(now),
        })
        .exec_without_returning(&txn)
        .await?;
    }
    let mut transitions = Transitions::default();
    for s in &launched.sessions {
        let launched_by = Actor::User(viewer.user_id);
        transitions.push(transition_row(
            s.id,
            None,
            SessionStatus::Pending,
            Some("launched".into()),
            now,
            &launched_by,
        ));
    }
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(launched)
}
