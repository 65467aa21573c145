//! Session templates: `sessionTemplates`, `saveSessionTemplate`, `deleteSessionTemplate`
//! (launching from one is `launchSessions(templateId: …)`).

use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};

use crate::domain::{DomainError, launch::templates};

use super::context::{db, loaders, viewer};
use super::errors::{ApiResult, camel, with_paths};
use super::ids::{NodeKind, decode_uuid, encode, project_uuid};
use super::launch::{LaunchSessionInput, launch_limits};
use super::limits::AGGREGATE_COST;
use super::loaders::{ProjectId, UserId};
use super::people::{Project, User};
use super::session_values::EnvVar;
use super::types::{SessionType, SlotAmount};

/// A named launch input: the launcher filled in once, to launch again with any field
/// changed (`launchSessions(templateId: …, overrides: …)`).
pub struct SessionTemplate(pub templates::Template);

/// A named launch input: the launcher filled in once, to launch again with any field
/// changed (`launchSessions(templateId: …, overrides: …)`).
#[Object]
impl SessionTemplate {
    /// The template's global id (opaque), as `launchSessions(templateId:)` takes it.
    pub async fn id(&self) -> ID {
        encode(NodeKind::SessionTemplate, self.0.id)
    }
    /// Unique among its owner's templates of its project.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// Shared with its project's members by an administrator.
    async fn shared(&self) -> bool {
        self.0.shared
    }
    /// Who saved it; null once that user is gone.
    async fn owner(&self, ctx: &Context<'_>) -> ApiResult<Option<User>> {
        let found = loaders(ctx)?.load_one(UserId(self.0.owner_id)).await?;
        Ok(found.map(User::try_from).transpose()?)
    }
    /// The project it belongs to, where its sessions launch; null once the project is gone.
    async fn project(&self, ctx: &Context<'_>) -> ApiResult<Option<Project>> {
        Ok(loaders(ctx)?.load_one(ProjectId(self.0.project_id)).await?.map(Project))
    }
    /// The name of the sessions it launches (`<name>-1` … in a batch).
    async fn session_name(&self) -> &str {
        &self.0.request.name
    }
    /// The kind of session it launches.
    #[graphql(name = "type")]
    async fn session_type(&self) -> SessionType {
        self.0.request.session_type.into()
    }
    /// The image its sessions run, by name (`Image.name`).
    async fn image(&self) -> &str {
        &self.0.request.image
    }
    /// Null: the project's first allowed group at launch.
    async fn resource_group(&self) -> Option<&str> {
        self.0.request.resource_group.as_deref()
    }
    /// Per container.
    async fn resources(&self) -> Vec<SlotAmount> {
        self.0
            .request
            .resources
            .iter()
            .map(|(slot, amount)| SlotAmount { slot: slot.clone(), amount: *amount })
            .collect()
    }
    /// How many containers each of its sessions has.
    async fn cluster_size(&self) -> i32 {
        self.0.request.cluster_size
    }
    /// The environment variables its sessions are given.
    async fn environment(&self) -> Vec<EnvVar> {
        self.0
            .request
            .environment
            .iter()
            .map(|(name, value)| EnvVar { name: name.clone(), value: value.clone() })
            .collect()
    }
    /// The folders its launches mount, each checked again at launch.
    async fn mounts(&self) -> Vec<super::folders::TemplateMount> {
        self.0.request.mounts.iter().cloned().map(super::folders::TemplateMount).collect()
    }
    /// The command its batch sessions run; null when none was given.
    async fn startup_command(&self) -> Option<&str> {
        self.0.request.startup_command.as_deref()
    }
    /// Its batch sessions are stopped this many seconds after they start; null: no timeout.
    async fn batch_timeout_seconds(&self) -> Option<i64> {
        self.0.request.batch_timeout_seconds
    }
    /// Its sessions' priority, −100 … 100.
    async fn priority(&self) -> i32 {
        self.0.request.priority
    }
    /// When it was first saved (RFC 3339, UTC).
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When it was last saved: a save under the same name replaces it (RFC 3339, UTC).
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
}

#[derive(Default)]
pub struct TemplateQuery;

#[Object]
impl TemplateQuery {
    /// The templates the caller may launch from in a project: their own, and those shared
    /// with the project, by name. A project the caller may not open is NOT_FOUND.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn session_templates(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A project the caller may open.")] project_id: ID,
    ) -> ApiResult<Vec<SessionTemplate>> {
        let project = project_uuid(&project_id)?;
        let found = templates::list(db(ctx)?, viewer(ctx)?, project).await?;
        Ok(found.into_iter().map(SessionTemplate).collect())
    }
}

#[derive(Default)]
pub struct TemplateMutation;

/// The API path of a domain field of a template: its own name (`template`) is `name`, the
/// rest is inside `input`.
fn template_path(field: &str) -> String {
    match field {
        "template" => "name".to_owned(),
        "session_type" => "input.type".to_owned(),
        _ => format!("input.{}", camel(field)),
    }
}

#[Object]
impl TemplateMutation {
    /// Keeps a launch input as the caller's template `name` in its project (replacing the
    /// caller's template of that name there), checked as its launch would be. `shared`
    /// shares it with the project's members: for an administrator of the project (FORBIDDEN
    /// otherwise). A user keeps at most 100 (QUOTA_EXCEEDED).
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn save_session_template(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "1 to 64 characters, no control characters, no space at either end.")] name: String,
        #[graphql(desc = "The launch to keep, in its project; without start time, dependencies or callback.")]
        input: LaunchSessionInput,
        #[graphql(default = false, desc = "Share it with the project's members (for an administrator).")] shared: bool,
    ) -> ApiResult<SessionTemplate> {
        let request = input.to_domain()?;
        let saved = templates::save(db(ctx)?, viewer(ctx)?, &name, &request, shared, launch_limits(ctx)?)
            .await
            .map_err(|e| with_paths(e, template_path))?;
        Ok(SessionTemplate(saved))
    }

    /// Deletes a template: the caller's own, or a shared one for an administrator of its
    /// project (FORBIDDEN for its members); NOT_FOUND for one the caller does not see. The
    /// id of the deleted template.
    #[graphql(complexity = "AGGREGATE_COST")]
    async fn delete_session_template(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The template's global id.")] id: ID,
    ) -> ApiResult<ID> {
        let uuid = decode_uuid(&id, NodeKind::SessionTemplate).ok_or(DomainError::NotFound("template"))?;
        templates::delete(db(ctx)?, viewer(ctx)?, uuid).await?;
        Ok(id)
    }
}
