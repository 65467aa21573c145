//! Launching sessions: one, or N identical ones ("Launch Multiple Sessions"), validated as
//! a whole, written in one transaction with a constant number of statements, and made
//! idempotent by an optional key. Also the dry run (`check`) and termination.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, Set, SqlErr,
};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{agent, idempotency_key, image, launch_group, project, resource_group, resource_group_project};
use entity::{scheduling_history, session, slot_type};

use super::auth::Viewer;
use super::events::{EventBus, SessionEvent};
use super::lifecycle::{self, Applied, Change, insert_transitions, transition_row};
use super::model::SessionType;
use super::occupancy;
use super::slots::ResourceSlots;
use super::status::{SessionResult, SessionStatus};
use super::visibility;
use super::{DomainError, DomainResult, InputProblem, clock};
use super::{scheduler, scheduling};

pub const NAME_MIN: usize = 4;
pub const NAME_MAX: usize = 64;
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i32> = -100..=100;
pub const MAX_CLUSTER_SIZE: i32 = 64;
pub const MAX_ENV_VARS: usize = 100;
pub const MAX_ENV_VALUE_BYTES: usize = 4096;
pub const MAX_STARTUP_COMMAND_BYTES: usize = 8192;
pub const MAX_IDEMPOTENCY_KEY: usize = 200;
/// Idempotency keys are honoured for at least this long.
pub const IDEMPOTENCY_RETENTION: TimeDelta = TimeDelta::hours(24);

/// What the launcher sends.
#[derive(Clone, Debug)]
pub struct LaunchInput {
    pub project_id: Uuid,
    pub name: String,
    pub session_type: SessionType,
    pub image: String,
    pub resource_group: Option<String>,
    /// Per container: (slot, amount).
    pub resources: Vec<(String, f64)>,
    pub cluster_size: i32,
    pub environment: Vec<(String, String)>,
    pub startup_command: Option<String>,
    pub batch_timeout_seconds: Option<i64>,
    pub priority: i32,
    pub idempotency_key: Option<String>,
}

/// Whether `name` follows the session name rule.
pub fn valid_name(name: &str) -> bool {
    let len = name.chars().count();
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let edge = |c: char| c.is_ascii_alphanumeric() || c == '_';
    (NAME_MIN..=NAME_MAX).contains(&len)
        && name.chars().all(inner)
        && name.chars().next().is_some_and(edge)
        && name.chars().last().is_some_and(edge)
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The names of a launch of `count`: the name itself for one session launched alone,
/// `<name>-1` … `<name>-<count>` for a batch.
pub fn session_names(name: &str, count: Option<u32>) -> Vec<String> {
    match count {
        None => vec![name.to_owned()],
        Some(n) => (1..=n).map(|i| format!("{name}-{i}")).collect(),
    }
}

/// A validated launch: everything needed to write it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub project: project::Model,
    pub image: image::Model,
    pub resource_group: resource_group::Model,
    /// Per container.
    pub per_container: ResourceSlots,
    /// For the whole session: per container × cluster size.
    pub requested: ResourceSlots,
    pub names: Vec<String>,
    pub input: LaunchInput,
}

fn field(name: &str) -> Option<String> {
    Some(format!("input.{name}"))
}

/// Every check of a launch; all input problems are reported together.
pub async fn validate(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    input: &LaunchInput,
    count: Option<i64>,
    max_count: u32,
) -> DomainResult<Plan> {
    let project = visibility::visible_project(db, viewer, input.project_id).await?;
    if !visibility::is_member(db, viewer.user_id, project.id).await? {
        return Err(DomainError::Forbidden(format!("you are not a member of project `{}`", project.name)));
    }
    let mut problems = Vec::new();
    let count = match count {
        None => None,
        Some(n) if (1..=i64::from(max_count)).contains(&n) => u32::try_from(n).ok(),
        Some(_) => {
            problems.push(InputProblem::new(
                "OUT_OF_RANGE",
                Some("count".to_owned()),
                format!("`count` is between 1 and {max_count}"),
            ));
            None
        }
    };
    let names = session_names(&input.name, count);
    if !valid_name(&input.name) {
        problems.push(InputProblem::new(
            "INVALID_NAME",
            field("name"),
            format!(
                "a name has {NAME_MIN}–{NAME_MAX} characters: letters, digits, `_`, `.` and `-`, starting and ending with a letter, digit or `_`"
            ),
        ));
    } else if let Some(bad) = names.iter().find(|n| !valid_name(n)) {
        problems.push(InputProblem::new(
            "INVALID_NAME",
            field("name"),
            format!("the session name `{bad}` of this batch is longer than {NAME_MAX} characters"),
        ));
    }

    // Image and type.
    let img = image::Entity::find_by_id(input.image.clone()).one(db).await?;
    match &img {
        None => {
            problems.push(InputProblem::new("UNKNOWN_IMAGE", field("image"), format!("no image `{}`", input.image)))
        }
        Some(i) => {
            let supported: Vec<&str> =
                i.supported_types.as_array().into_iter().flatten().filter_map(|t| t.as_str()).collect();
            if !supported.contains(&input.session_type.as_str()) {
                problems.push(InputProblem::new(
                    "UNSUPPORTED_TYPE",
                    field("type"),
                    format!(
                        "image `{}` does not support {} sessions (it supports {})",
                        i.name,
                        input.session_type,
                        supported.join(", ")
                    ),
                ));
            }
        }
    }

    // Slots.
    let known: BTreeSet<String> = slot_type::Entity::find().all(db).await?.into_iter().map(|s| s.name).collect();
    let mut per_container = ResourceSlots::new();
    for (i, (slot, amount)) in input.resources.iter().enumerate() {
        let f = Some(format!("input.resources[{i}]"));
        if !known.contains(slot) {
            problems.push(InputProblem::new(
                "UNKNOWN_SLOT",
                f,
                format!("unknown slot `{slot}` (known: {})", known.iter().cloned().collect::<Vec<_>>().join(", ")),
            ));
        } else if !amount.is_finite() || *amount < 0.0 {
            problems.push(InputProblem::new("INVALID_AMOUNT", f, format!("`{slot}` must be a non-negative number")));
        } else if per_container.limit(slot).is_some() {
            problems.push(InputProblem::new("DUPLICATE_SLOT", f, format!("`{slot}` is given twice")));
        } else {
            per_container.set(slot, *amount);
        }
    }
    if let Some(i) = &img {
        let minimum = ResourceSlots::from_json(&i.minimum_slots)?;
        for (slot, min) in minimum.iter() {
            if per_container.get(slot) + 1e-9 < min {
                problems.push(InputProblem::new(
                    "BELOW_IMAGE_MINIMUM",
                    field("resources"),
                    format!("image `{}` needs at least {min} of `{slot}` per container", i.name),
                ));
            }
        }
    }

    // Resource group.
    let allowed = resource_group_project::Entity::find()
        .filter(resource_group_project::Column::ProjectId.eq(project.id))
        .order_by_asc(resource_group_project::Column::Position)
        .all(db)
        .await?;
    let group_name = input.resource_group.clone().or_else(|| allowed.first().map(|g| g.resource_group.clone()));
    let group = match &group_name {
        None => {
            problems.push(InputProblem::new(
                "NO_RESOURCE_GROUP",
                field("resourceGroup"),
                "the project may use no resource group",
            ));
            None
        }
        Some(name) => match resource_group::Entity::find_by_id(name.clone()).one(db).await? {
            Some(g) if allowed.iter().any(|a| a.resource_group == g.name) => {
                let types: Vec<&str> =
                    g.allowed_session_types.as_array().into_iter().flatten().filter_map(|t| t.as_str()).collect();
                if !types.contains(&input.session_type.as_str()) {
                    problems.push(InputProblem::new(
                        "TYPE_NOT_ALLOWED",
                        field("resourceGroup"),
                        format!("resource group `{}` does not take {} sessions", g.name, input.session_type),
                    ));
                }
                Some(g)
            }
            _ => {
                problems.push(InputProblem::new(
                    "UNKNOWN_RESOURCE_GROUP",
                    field("resourceGroup"),
                    format!("project `{}` may not use a resource group `{name}`", project.name),
                ));
                None
            }
        },
    };

    // Batch settings, cluster, priority, environment.
    let is_batch = input.session_type == SessionType::Batch;
    match input.startup_command.as_deref().map(str::trim) {
        None | Some("") if is_batch => problems.push(InputProblem::new(
            "MISSING_STARTUP_COMMAND",
            field("startupCommand"),
            "a batch session needs a startup command",
        )),
        Some(cmd) if cmd.len() > MAX_STARTUP_COMMAND_BYTES => problems.push(InputProblem::new(
            "TOO_LONG",
            field("startupCommand"),
            format!("the startup command is limited to {MAX_STARTUP_COMMAND_BYTES} bytes"),
        )),
        _ => {}
    }
    match input.batch_timeout_seconds {
        Some(_) if !is_batch => problems.push(InputProblem::new(
            "BATCH_TIMEOUT_NOT_BATCH",
            field("batchTimeoutSeconds"),
            "only batch sessions take a batch timeout",
        )),
        Some(t) if t <= 0 => problems.push(InputProblem::new(
            "OUT_OF_RANGE",
            field("batchTimeoutSeconds"),
            "the batch timeout is a positive number of seconds",
        )),
        _ => {}
    }
    if !(1..=MAX_CLUSTER_SIZE).contains(&input.cluster_size) {
        problems.push(InputProblem::new(
            "OUT_OF_RANGE",
            field("clusterSize"),
            format!("the cluster size is between 1 and {MAX_CLUSTER_SIZE}"),
        ));
    }
    if !PRIORITY_RANGE.contains(&input.priority) {
        problems.push(InputProblem::new(
            "OUT_OF_RANGE",
            field("priority"),
            format!("the priority is between {} and {}", PRIORITY_RANGE.start(), PRIORITY_RANGE.end()),
        ));
    }
    if input.environment.len() > MAX_ENV_VARS {
        problems.push(InputProblem::new(
            "TOO_MANY",
            field("environment"),
            format!("at most {MAX_ENV_VARS} environment variables"),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, (name, value)) in input.environment.iter().enumerate() {
        let f = Some(format!("input.environment[{i}]"));
        if !valid_env_name(name) {
            problems.push(InputProblem::new(
                "INVALID_ENV_NAME",
                f,
                format!("`{name}` is not a variable name (letters, digits and `_`, not starting with a digit)"),
            ));
        } else if !seen.insert(name.as_str()) {
            problems.push(InputProblem::new("DUPLICATE_ENV_NAME", f, format!("`{name}` is given twice")));
        } else if value.len() > MAX_ENV_VALUE_BYTES || value.contains('\0') {
            problems.push(InputProblem::new(
                "INVALID_ENV_VALUE",
                f,
                format!("the value of `{name}` is limited to {MAX_ENV_VALUE_BYTES} bytes without NUL"),
            ));
        }
    }
    if let Some(key) = &input.idempotency_key
        && (key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY)
    {
        problems.push(InputProblem::new(
            "OUT_OF_RANGE",
            field("idempotencyKey"),
            format!("an idempotency key has 1–{MAX_IDEMPOTENCY_KEY} bytes"),
        ));
    }
    if !problems.is_empty() {
        return Err(DomainError::BadInput(problems));
    }
    let (Some(image), Some(resource_group)) = (img, group) else {
        return Err(DomainError::invariant("validation passed without image or group"));
    };

    // A request no agent of the group could ever hold never starts.
    let agents = agent::Entity::find()
        .filter(agent::Column::ResourceGroup.eq(resource_group.name.as_str()))
        .filter(agent::Column::Status.eq("ALIVE"))
        .filter(agent::Column::Schedulable.eq(true))
        .all(db)
        .await?;
    let capacities =
        agents.iter().map(|a| ResourceSlots::from_json(&a.available_slots)).collect::<DomainResult<Vec<_>>>()?;
    if !capacities.iter().any(|cap| per_container.fits_in(cap, false)) {
        let (slot, largest) = per_container
            .iter()
            .map(|(slot, amount)| (slot, amount, capacities.iter().map(|c| c.get(slot)).fold(0.0, f64::max)))
            .find(|(_, amount, largest)| amount > largest)
            .map_or(("cpu", 0.0), |(slot, _, largest)| (slot, largest));
        return Err(DomainError::NeverFits(if capacities.is_empty() {
            format!("resource group `{}` has no schedulable agent", resource_group.name)
        } else if capacities.iter().all(|c| per_container.fits_in(c, false) || slot_everywhere(&per_container, c)) {
            format!("no single agent of resource group `{}` has all the requested slots at once", resource_group.name)
        } else {
            format!(
                "no agent of resource group `{}` can ever hold this request: `{slot}` asks for {} but the largest agent has {largest}",
                resource_group.name,
                per_container.get(slot)
            )
        }));
    }
    let requested = per_container;
    let per_container = requested.scale(1.0 / f64::from(input.cluster_size.max(1)));
    Ok(Plan { project, image, resource_group, per_container, requested, names, input: input.clone() })
}

/// Every slot of `request` alone fits `cap` (the request as a whole may still not).
fn slot_everywhere(request: &ResourceSlots, cap: &ResourceSlots) -> bool {
    request.iter().all(|(slot, amount)| amount <= cap.get(slot) + 1e-9)
}

/// What a launch created.
#[derive(Clone, Debug)]
pub struct Launched {
    pub launch_group: Option<launch_group::Model>,
    pub sessions: Vec<session::Model>,
}

fn stored_result(l: &Launched, batch: bool) -> Value {
    json!({
        "batch": batch,
        "launchGroupId": l.launch_group.as_ref().map(|g| g.id),
        "sessionIds": l.sessions.iter().map(|s| s.id).collect::<Vec<_>>(),
    })
}

async fn replay(db: &impl ConnectionTrait, stored: &Value) -> DomainResult<Launched> {
    let ids: Vec<Uuid> =
        stored["sessionIds"].as_array().into_iter().flatten().filter_map(|v| v.as_str()?.parse().ok()).collect();
    let group_id: Option<Uuid> = stored["launchGroupId"].as_str().and_then(|s| s.parse().ok());
    let mut sessions = session::Entity::find().filter(session::Column::Id.is_in(ids.clone())).all(db).await?;
    sessions.sort_by_key(|s| ids.iter().position(|id| *id == s.id));
    let launch_group = match group_id {
        Some(id) => launch_group::Entity::find_by_id(id).one(db).await?,
        None => None,
    };
    Ok(Launched { launch_group, sessions })
}

/// The result of an earlier launch with this key, if it is recent enough. A key first used
/// for a single launch cannot replay a batch launch, or the reverse.
async fn remembered(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    key: &str,
    batch: bool,
    now: DateTime<Utc>,
) -> DomainResult<Option<Launched>> {
    let row = idempotency_key::Entity::find_by_id((viewer.user_id, key.to_owned())).one(db).await?;
    match row {
        Some(r) if now - r.created_at < IDEMPOTENCY_RETENTION => {
            if r.response["batch"].as_bool() != Some(batch) {
                return Err(DomainError::bad_input(
                    "IDEMPOTENCY_KEY_REUSED",
                    Some("input.idempotencyKey".to_owned()),
                    "this idempotency key was used for another kind of launch",
                ));
            }
            Ok(Some(replay(db, &r.response).await?))
        }
        _ => Ok(None),
    }
}

/// Launches one session (`count: None`) or a batch of `count` sessions in one launch group.
pub async fn launch(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    input: &LaunchInput,
    count: Option<i64>,
    max_count: u32,
) -> DomainResult<Launched> {
    let now = clock::now();
    if let Some(key) = input.idempotency_key.as_deref()
        && let Some(previous) = remembered(db, viewer, key, count.is_some(), now).await?
    {
        return Ok(previous);
    }
    let plan = validate(db, viewer, input, count, max_count).await?;
    let outcome = write(db, viewer, &plan, count.is_some(), now).await;
    let (launched, events) = match outcome {
        Ok(done) => done,
        Err(WriteError::Taken(name)) => {
            // Another request won: maybe a retry with the same idempotency key, which must
            // get that request's result; otherwise the name is taken.
            if let Some(key) = input.idempotency_key.as_deref()
                && let Some(previous) = remembered(db, viewer, key, count.is_some(), now).await?
            {
                return Ok(previous);
            }
            let name = if !name.is_empty() {
                name
            } else if plan.names.len() == 1 {
                plan.names[0].clone()
            } else {
                format!("{}-…", plan.input.name)
            };
            return Err(DomainError::NameTaken(name));
        }
        Err(WriteError::Other(e)) => return Err(e),
    };
    bus.publish(events);
    Ok(launched)
}

/// The refusals that depend on the caller's other sessions: the keypair's pending-session
/// limit (`QUOTA_EXCEEDED`) and names already live (`NAME_TAKEN`; the unique index still
/// decides races).
async fn admissible(db: &impl ConnectionTrait, viewer: &Viewer, plan: &Plan) -> DomainResult<()> {
    let policy = entity::keypair_resource_policy::Entity::find_by_id(viewer.resource_policy.clone()).one(db).await?;
    if let Some(policy) = policy {
        let pending = session::Entity::find()
            .filter(session::Column::KeypairId.eq(viewer.keypair_id))
            .filter(session::Column::Status.eq(SessionStatus::Pending.as_str()))
            .count(db)
            .await?;
        let limit = u64::try_from(policy.max_pending_sessions).unwrap_or(0);
        if pending + plan.names.len() as u64 > limit {
            return Err(DomainError::QuotaExceeded(format!(
                "your keypair may have {limit} pending sessions; {pending} are pending and this launch adds {}",
                plan.names.len()
            )));
        }
    }
    let taken = session::Entity::find()
        .filter(session::Column::OwnerId.eq(viewer.user_id))
        .filter(session::Column::Name.is_in(plan.names.clone()))
        .filter(session::Column::Status.is_not_in(SessionStatus::TERMINAL.iter().map(|s| s.as_str())))
        .one(db)
        .await?;
    match taken {
        Some(s) => Err(DomainError::NameTaken(s.name)),
        None => Ok(()),
    }
}

enum WriteError {
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
async fn write(
    db: &DatabaseConnection,
    viewer: &Viewer,
    plan: &Plan,
    batch: bool,
    now: DateTime<Utc>,
) -> Result<(Launched, Vec<SessionEvent>), WriteError> {
    let txn = super::begin_write(db).await?;
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
    match admissible(&txn, viewer, plan).await {
        Ok(()) => {}
        Err(DomainError::NameTaken(name)) => return Err(WriteError::Taken(name)),
        Err(e) => return Err(WriteError::Other(e)),
    }
    if plan.input.idempotency_key.is_some() {
        // Expired keys go first, so that an old key can be used again.
        idempotency_key::Entity::delete_many()
            .filter(idempotency_key::Column::CreatedAt.lt(now - IDEMPOTENCY_RETENTION))
            .exec(&txn)
            .await?;
    }
    let group = batch.then(|| launch_group::Model {
        id: Uuid::now_v7(),
        name: plan.input.name.clone(),
        count: i32::try_from(plan.names.len()).unwrap_or(i32::MAX),
        owner_id: viewer.user_id,
        project_id: plan.project.id,
        created_at: now,
    });
    if let Some(g) = &group {
        launch_group::Entity::insert(launch_group::ActiveModel::from(g.clone())).exec_without_returning(&txn).await?;
    }
    let environment =
        Value::Array(plan.input.environment.iter().map(|(n, v)| json!({"name": n, "value": v})).collect());
    let sessions: Vec<session::Model> = plan
        .names
        .iter()
        .map(|name| session::Model {
            id: Uuid::now_v7(),
            name: name.clone(),
            session_type: plan.input.session_type.as_str().to_owned(),
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
            requested_slots: plan.requested.to_json(),
            occupied_slots: json!({}),
            cluster_size: plan.input.cluster_size,
            environment: environment.clone(),
            startup_command: plan.input.startup_command.clone(),
            batch_timeout_seconds: plan.input.batch_timeout_seconds,
            priority: plan.input.priority,
            agent_id: None,
            launch_group_id: group.as_ref().map(|g| g.id),
            pending_reasons: json!([]),
            created_at: now,
            scheduled_at: None,
            started_at: None,
            terminated_at: None,
            status_changed_at: now,
            queue_position: None,
        })
        .collect();
    session::Entity::insert_many(sessions.iter().cloned().map(session::ActiveModel::from))
        .exec_without_returning(&txn)
        .await?;
    let transitions = insert_transitions(
        &txn,
        sessions
            .iter()
            .map(|s| transition_row(s.id, None, SessionStatus::Pending, Some("launched".into()), now))
            .collect(),
    )
    .await?;
    scheduling_history::Entity::insert_many(sessions.iter().map(|s| scheduling_history::ActiveModel {
        id: NotSet,
        session_id: Set(s.id),
        phase: Set("enqueue".into()),
        from_status: Set(None),
        to_status: Set(Some(SessionStatus::Pending.as_str().into())),
        result: Set("SUCCESS".into()),
        error_code: Set(None),
        message: Set(format!("queued in resource group `{}`", plan.resource_group.name)),
        sub_steps: Set(json!([])),
        attempts: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
    }))
    .exec_without_returning(&txn)
    .await?;
    let launched = Launched { launch_group: group, sessions };
    if let Some(key) = &plan.input.idempotency_key {
        idempotency_key::Entity::insert(idempotency_key::ActiveModel {
            user_id: Set(viewer.user_id),
            key: Set(key.clone()),
            response: Set(stored_result(&launched, batch)),
            created_at: Set(now),
        })
        .exec_without_returning(&txn)
        .await?;
    }
    txn.commit().await?;
    let by_id: HashMap<Uuid, &session::Model> = launched.sessions.iter().map(|s| (s.id, s)).collect();
    let events = transitions.iter().filter_map(|t| SessionEvent::of(by_id.get(&t.session_id)?, t)).collect();
    Ok((launched, events))
}

/// The dry run: the same validation, nothing written, and whether it would start now.
#[derive(Clone, Debug)]
pub struct LaunchCheck {
    pub problems: Vec<InputProblem>,
    /// A refusal that is not about the input: NEVER_FITS, QUOTA_EXCEEDED, NAME_TAKEN.
    pub refusal: Option<DomainError>,
    pub fits_now: bool,
    pub pending_reasons: Vec<occupancy::PendingReason>,
}

pub async fn check(
    db: &DatabaseConnection,
    viewer: &Viewer,
    input: &LaunchInput,
    count: Option<i64>,
    max_count: u32,
) -> DomainResult<LaunchCheck> {
    let plan = match validate(db, viewer, input, count, max_count).await {
        Ok(plan) => plan,
        Err(DomainError::BadInput(problems)) => {
            return Ok(LaunchCheck { problems, refusal: None, fits_now: false, pending_reasons: Vec::new() });
        }
        Err(e @ DomainError::NeverFits(_)) => {
            return Ok(LaunchCheck {
                problems: Vec::new(),
                refusal: Some(e),
                fits_now: false,
                pending_reasons: Vec::new(),
            });
        }
        Err(e) => return Err(e),
    };
    if let Err(e) = admissible(db, viewer, &plan).await {
        return match e {
            DomainError::QuotaExceeded(_) | DomainError::NameTaken(_) => {
                Ok(LaunchCheck { problems: Vec::new(), refusal: Some(e), fits_now: false, pending_reasons: Vec::new() })
            }
            other => Err(other),
        };
    }
    // The new sessions, queued behind what is pending, as the scheduler would see them.
    let created = clock::now().timestamp_micros();
    let extra: Vec<scheduler::PendingSession> = (0..plan.names.len())
        .map(|i| scheduler::PendingSession {
            id: Uuid::new_v4(),
            owner: viewer.user_id,
            keypair: viewer.keypair_id,
            project: plan.project.id,
            domain: plan.project.domain_id,
            priority: plan.input.priority,
            created: created + i as i64,
            per_container: plan.per_container.clone(),
            cluster_size: usize::try_from(plan.input.cluster_size).unwrap_or(1),
        })
        .collect();
    let decisions = scheduling::dry_run(db, &plan.resource_group.name, extra).await?;
    let mut reasons: Vec<occupancy::PendingReason> = Vec::new();
    for d in &decisions {
        if let scheduler::Outcome::Wait { reasons: r, .. } = &d.outcome {
            for reason in r {
                if !reasons.contains(reason) {
                    reasons.push(reason.clone());
                }
            }
        }
    }
    let fits_now = decisions.iter().all(|d| matches!(d.outcome, scheduler::Outcome::Schedule { .. }));
    Ok(LaunchCheck { problems: Vec::new(), refusal: None, fits_now, pending_reasons: reasons })
}

/// One outcome of a termination request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminateOutcome {
    Cancelled,
    Terminating,
    Terminated,
    Skipped,
    NotFound,
}

/// Ends sessions: PENDING ones are cancelled at once; started ones go TERMINATING (the
/// runtime finishes them) or, with `force`, TERMINATED at once; terminal ones are skipped;
/// ones the viewer may not see are NOT_FOUND. One outcome per requested id, in order.
pub async fn terminate(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    ids: &[Option<Uuid>],
    force: bool,
) -> DomainResult<Vec<(TerminateOutcome, Option<session::Model>)>> {
    let now = clock::now();
    let wanted: Vec<Uuid> = ids.iter().flatten().copied().collect::<BTreeSet<_>>().into_iter().collect();
    let txn = super::begin_write(db).await?;
    let found = session::Entity::find().filter(session::Column::Id.is_in(wanted)).all(&txn).await?;
    let visible: HashMap<Uuid, session::Model> = found
        .into_iter()
        .filter(|s| visibility::may_see_session(viewer, s.owner_id, s.domain_id))
        .map(|s| (s.id, s))
        .collect();
    // A session may move between the read and the update (the scheduler, the runtime):
    // then the change is worked out again from where it now is.
    let target = |s: &session::Model| -> DomainResult<Option<SessionStatus>> {
        let status = SessionStatus::parse(&s.status)
            .ok_or_else(|| DomainError::invariant(format!("stored status {}", s.status)))?;
        Ok(match status {
            SessionStatus::Pending => Some(SessionStatus::Cancelled),
            s if s.is_terminal() => None,
            SessionStatus::Terminating if !force => None,
            _ if force => Some(SessionStatus::Terminated),
            _ => Some(SessionStatus::Terminating),
        })
    };
    let reason = if force { "force-terminated" } else { "user-requested" };
    let mut current = visible;
    let mut changed: BTreeSet<Uuid> = BTreeSet::new();
    let mut events = Vec::new();
    for _ in 0..3 {
        let mut changes = Vec::new();
        for s in current.values().filter(|s| !changed.contains(&s.id)) {
            if let Some(to) = target(s)? {
                changes.push(Change::new(s.clone(), to, reason.to_owned()));
            }
        }
        if changes.is_empty() {
            break;
        }
        let (applied, more) = lifecycle::apply(&txn, changes, now).await?;
        events.extend(more);
        let mut moved = false;
        for a in applied {
            match a {
                Applied::Changed(s) => {
                    changed.insert(s.id);
                    current.insert(s.id, s);
                }
                Applied::Moved(s) => {
                    moved = true;
                    current.insert(s.id, s);
                }
            }
        }
        if !moved {
            break;
        }
    }
    txn.commit().await?;
    bus.publish(events);

    let after: HashMap<Uuid, (bool, session::Model)> =
        current.into_iter().map(|(id, s)| (id, (changed.contains(&id), s))).collect();
    Ok(ids
        .iter()
        .map(|id| match id.and_then(|id| after.get(&id)) {
            None => (TerminateOutcome::NotFound, None),
            Some((changed, s)) => {
                let outcome = match (changed, SessionStatus::parse(&s.status)) {
                    (true, Some(SessionStatus::Cancelled)) => TerminateOutcome::Cancelled,
                    (true, Some(SessionStatus::Terminating)) => TerminateOutcome::Terminating,
                    (true, Some(SessionStatus::Terminated)) => TerminateOutcome::Terminated,
                    _ => TerminateOutcome::Skipped,
                };
                (outcome, Some(s.clone()))
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_rule() {
        for ok in ["abcd", "my-notebook.v2", "_a_b", "A1_9", &"x".repeat(64)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["abc", "-abc", "abc-", "ab.", "a b c", "ümlaut", &"x".repeat(65), "abc/def"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn batch_names_are_numbered() {
        assert_eq!(session_names("train", Some(3)), ["train-1", "train-2", "train-3"]);
        assert_eq!(session_names("train", None), ["train"]);
    }

    #[test]
    fn environment_names() {
        assert!(valid_env_name("CUDA_VISIBLE_DEVICES"));
        assert!(valid_env_name("_x1"));
        assert!(!valid_env_name("1X"));
        assert!(!valid_env_name("A-B"));
        assert!(!valid_env_name(""));
    }
}
