//! Session templates: named launch inputs a user keeps (`save`), per project, to launch
//! again with any field changed ([`launch`]). An administrator of the project's domain may
//! share one with the project: its members then see it and launch from it, and only an
//! administrator changes or deletes it. A template no one may see looks exactly like none.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, Condition, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::session_template as template;

use crate::domain::directory::auth::Viewer;
use crate::domain::launch::relaunch::Overrides;
use crate::domain::launch::{self, LaunchLimits, LaunchRequest, Launched, Origin, validate};
use crate::domain::live::events::EventBus;
use crate::domain::model::SessionType;
use crate::domain::storage::mounts::MountRequest;
use crate::domain::{DomainError, DomainResult, InputProblem, model::clock, sessions::visibility};

/// The most templates one user keeps.
pub const MAX_TEMPLATES_PER_USER: u64 = 100;

/// A template as it is kept: its launch input and who may use it.
#[derive(Clone, Debug)]
pub struct Template {
    pub id: Uuid,
    pub name: String,
    pub owner_id: Uuid,
    pub project_id: Uuid,
    /// Shared with the project's members by an administrator.
    pub shared: bool,
    /// What a launch from it sends: its project, and the name of the sessions it launches.
    pub request: LaunchRequest,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Template {
    fn of(t: template::Model) -> DomainResult<Self> {
        let i = &t.input;
        let text = |k: &str| i.get(k).and_then(Value::as_str).map(str::to_owned);
        let bad = || DomainError::invariant(format!("template {}: unreadable input", t.id));
        let request = LaunchRequest {
            project_id: t.project_id,
            name: text("name").ok_or_else(bad)?,
            session_type: SessionType::stored(&text("type").ok_or_else(bad)?)?,
            image: text("image").ok_or_else(bad)?,
            resource_group: text("resourceGroup"),
            resources: i
                .get("resources")
                .and_then(Value::as_array)
                .ok_or_else(bad)?
                .iter()
                .map(|r| Some((r.get("slot")?.as_str()?.to_owned(), r.get("amount")?.as_f64()?)))
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
            cluster_size: i
                .get("clusterSize")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(bad)?,
            environment: i
                .get("environment")
                .and_then(Value::as_array)
                .ok_or_else(bad)?
                .iter()
                .map(|e| Some((e.get("name")?.as_str()?.to_owned(), e.get("value")?.as_str()?.to_owned())))
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
            startup_command: text("startupCommand"),
            batch_timeout_seconds: i.get("batchTimeoutSeconds").and_then(Value::as_i64),
            priority: i.get("priority").and_then(Value::as_i64).and_then(|n| i32::try_from(n).ok()).unwrap_or(0),
            idempotency_key: None,
            origin: None,
            starts_at: None,
            depends_on: Vec::new(),
            // A template may be shared: its sessions' ends go to their own owners' URLs.
            callback_url: None,
            callback_on_running: false,
            image_digest: None,
            mounts: i
                .get("mounts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|m| {
                    Some(MountRequest {
                        folder: m.get("folder").and_then(Value::as_str).and_then(|id| Uuid::parse_str(id).ok()),
                        path: m.get("path").and_then(Value::as_str).map(str::to_owned),
                        read_only: m.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
                    })
                })
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
        };
        Ok(Self {
            id: t.id,
            name: t.name,
            owner_id: t.owner_id,
            project_id: t.project_id,
            shared: t.shared,
            request,
            created_at: t.created_at,
            updated_at: t.updated_at,
        })
    }
}

/// The input a template keeps of `r`.
fn stored_input(r: &LaunchRequest) -> Value {
    json!({
        "name": r.name,
        "type": r.session_type.as_str(),
        "image": r.image,
        "resourceGroup": r.resource_group,
        "resources": r.resources.iter().map(|(slot, amount)| json!({"slot": slot, "amount": amount})).collect::<Vec<_>>(),
        "clusterSize": r.cluster_size,
        "environment": r.environment.iter().map(|(name, value)| json!({"name": name, "value": value})).collect::<Vec<_>>(),
        "startupCommand": r.startup_command,
        "batchTimeoutSeconds": r.batch_timeout_seconds,
        "priority": r.priority,
        "mounts": r.mounts.iter().map(|m| json!({"folder": m.folder, "path": m.path, "readOnly": m.read_only})).collect::<Vec<_>>(),
    })
}

/// The most characters of a template's name.
pub const MAX_NAME: usize = 64;

/// Keeps `request` (in its project) as the viewer's template `name`, replacing the viewer's
/// template of that name in that project. The input is checked as a launch of it would be (a
/// template that could never launch is refused with the same problems); `shared` is for an
/// administrator of the project's domain (FORBIDDEN otherwise).
pub async fn save(
    db: &DatabaseConnection,
    viewer: &Viewer,
    name: &str,
    request: &LaunchRequest,
    shared: bool,
    limits: LaunchLimits,
) -> DomainResult<Template> {
    let length = name.chars().count();
    let controls = InputProblem::control_characters("template", name, crate::domain::error::Text::Line);
    if !(1..=MAX_NAME).contains(&length) || controls.is_some() || name.trim() != name {
        return Err(DomainError::bad_input(
            "INVALID_NAME",
            Some("template".to_owned()),
            format!(
                "a template's name has 1–{MAX_NAME} characters, no control characters (bidirectional ones \
                 included), no space at either end"
            ),
        ));
    }
    let one_run: Vec<InputProblem> = [
        ("starts_at", request.starts_at.is_some()),
        ("depends_on", !request.depends_on.is_empty()),
        ("callback_url", request.callback_url.is_some()),
        ("callback_on_running", request.callback_on_running),
    ]
    .into_iter()
    .filter(|(_, given)| *given)
    .map(|(field, _)| {
        InputProblem::new(
            "NOT_IN_TEMPLATE",
            Some(field.to_owned()),
            "a template keeps no start time, dependencies or callback: they belong to one run (give them when launching)",
        )
    })
    .collect();
    if !one_run.is_empty() {
        return Err(DomainError::BadInput(one_run));
    }
    let plan = validate::validate(db, viewer, request, None, limits).await?;
    if shared && !viewer.administers_domain(plan.project.domain_id) {
        return Err(DomainError::Forbidden("only an administrator shares a template with a project".into()));
    }
    let now = clock::now();
    let txn = crate::domain::begin_write(db).await?;
    let mine = template::Entity::find().filter(template::Column::OwnerId.eq(viewer.user_id));
    let replaced = mine
        .clone()
        .filter(template::Column::ProjectId.eq(plan.project.id))
        .filter(template::Column::Name.eq(name))
        .count(&txn)
        .await?;
    if replaced == 0 && mine.count(&txn).await? >= MAX_TEMPLATES_PER_USER {
        return Err(DomainError::QuotaExceeded(format!(
            "a user keeps at most {MAX_TEMPLATES_PER_USER} templates: delete one first"
        )));
    }
    let row = template::ActiveModel {
        id: Set(Uuid::now_v7()),
        owner_id: Set(viewer.user_id),
        project_id: Set(plan.project.id),
        name: Set(name.to_owned()),
        shared: Set(shared),
        input: Set(stored_input(request)),
        created_at: Set(now),
        updated_at: Set(now),
    };
    template::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([template::Column::OwnerId, template::Column::ProjectId, template::Column::Name])
                .update_columns([template::Column::Shared, template::Column::Input, template::Column::UpdatedAt])
                .to_owned(),
        )
        .exec_without_returning(&txn)
        .await?;
    let saved = template::Entity::find()
        .filter(template::Column::OwnerId.eq(viewer.user_id))
        .filter(template::Column::ProjectId.eq(plan.project.id))
        .filter(template::Column::Name.eq(name))
        .one(&txn)
        .await?
        .ok_or_else(|| DomainError::invariant("a template just saved is gone"))?;
    txn.commit().await?;
    Template::of(saved)
}

/// Whether `viewer` may see template `t`: their own, or one shared with a project they may
/// open.
async fn may_see(db: &DatabaseConnection, viewer: &Viewer, t: &template::Model) -> DomainResult<bool> {
    if t.owner_id == viewer.user_id {
        return Ok(true);
    }
    if !t.shared {
        return Ok(false);
    }
    match visibility::visible_project(db, viewer, t.project_id).await {
        Ok(_) => Ok(true),
        Err(DomainError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The templates the viewer may launch from in project `project_id` (one they may open):
/// their own and the shared ones, by name.
pub async fn list(db: &DatabaseConnection, viewer: &Viewer, project_id: Uuid) -> DomainResult<Vec<Template>> {
    let project = visibility::visible_project(db, viewer, project_id).await?;
    let rows = template::Entity::find()
        .filter(template::Column::ProjectId.eq(project.id))
        .filter(
            Condition::any().add(template::Column::OwnerId.eq(viewer.user_id)).add(template::Column::Shared.eq(true)),
        )
        .order_by_asc(template::Column::Name)
        .order_by_asc(template::Column::Id)
        .all(db)
        .await?;
    rows.into_iter().map(Template::of).collect()
}

/// Template `id` if the viewer may see it (their own, or a shared one of a project they
/// see), else NOT_FOUND.
pub async fn visible(db: &DatabaseConnection, viewer: &Viewer, id: Uuid) -> DomainResult<Template> {
    Template::of(visible_row(db, viewer, id).await?)
}

async fn visible_row(db: &DatabaseConnection, viewer: &Viewer, id: Uuid) -> DomainResult<template::Model> {
    match template::Entity::find_by_id(id).one(db).await? {
        Some(t) if may_see(db, viewer, &t).await? => Ok(t),
        _ => Err(DomainError::NotFound("template")),
    }
}

/// Deletes template `id`: the owner's own, or a shared one for an administrator of its
/// project's domain (its members get FORBIDDEN); NOT_FOUND if the viewer does not see it.
pub async fn delete(db: &DatabaseConnection, viewer: &Viewer, id: Uuid) -> DomainResult<()> {
    let t = visible_row(db, viewer, id).await?;
    if t.owner_id != viewer.user_id {
        let project = visibility::visible_project(db, viewer, t.project_id).await?;
        if !viewer.administers_domain(project.domain_id) {
            return Err(DomainError::Forbidden("only an administrator deletes a shared template".into()));
        }
    }
    template::Entity::delete_by_id(t.id).exec(db).await?;
    Ok(())
}

/// Launches from template `id` (one the viewer sees), with `o` changed: one session, or
/// `count` in a launch group, exactly as a launch of that input. The sessions name the
/// template as their origin.
pub async fn launch_from(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    id: Uuid,
    o: Overrides,
    count: Option<i64>,
    limits: LaunchLimits,
) -> DomainResult<Launched> {
    let t = visible(db, viewer, id).await?;
    let mut request = t.request;
    o.apply(&mut request);
    request.origin = Some(Origin::Template { id: t.id, name: t.name });
    launch::launch(db, bus, viewer, &request, count, limits).await
}
