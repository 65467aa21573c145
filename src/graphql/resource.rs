//! Resource groups, images and limit layers as the API shows them.

use async_graphql::{Context, Enum, ID, Object, SimpleObject};

use crate::domain::model::slots::ResourceSlots as Slots;
use crate::domain::{directory::catalog, model, sessions::panels, sessions::visibility};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::ids::project_uuid;
use super::limits::{AGGREGATE_COST, STATEMENT_COST};
use super::types::{LimitLayer, ResourcePanelView, SessionType, SlotAmount};

/// How a resource group orders its pending sessions of one priority (higher priorities
/// always go first).
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::model::SchedulerStrategy")]
pub enum SchedulerStrategy {
    /// Oldest first, by creation.
    Fifo,
    /// Newest first, by creation.
    Lifo,
    /// Dominant resource fairness: the owner whose sessions hold the smallest share of the
    /// group's capacity goes first (ties: the oldest session).
    Drf,
}

/// The values the resolvers below show, also written by the compiled list
/// ([`super::compiled`]).
pub(super) fn session_types(value: &serde_json::Value) -> Vec<SessionType> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| model::SessionType::parse(t.as_str()?))
        .map(Into::into)
        .collect()
}

pub(super) fn scheduler_strategy(group: &entity::resource_group::Model) -> ApiResult<SchedulerStrategy> {
    Ok(model::SchedulerStrategy::stored(&group.scheduler)?.into())
}

pub(super) fn minimum_slots(image: &entity::image::Model) -> ApiResult<Vec<SlotAmount>> {
    Ok(SlotAmount::list(&Slots::from_json(&image.minimum_slots)?))
}

pub(super) fn web_apps(image: &entity::image::Model) -> Vec<String> {
    crate::domain::apps::of_image(image).into_iter().filter(|a| a.port.is_some()).map(|a| a.name).collect()
}

pub(super) fn image_apps(image: &entity::image::Model) -> Vec<String> {
    crate::domain::sessions::image_apps(image)
}

/// A pool of agents that sessions are scheduled on.
pub struct ResourceGroup(pub entity::resource_group::Model);

/// A pool of agents that sessions are scheduled on.
#[Object]
impl ResourceGroup {
    /// Unique on the platform: what `resourceGroup` arguments name.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// What the page shows about the group, as configured; empty when none was given.
    async fn description(&self) -> &str {
        &self.0.description
    }
    /// How pending sessions of one priority are ordered.
    async fn strategy(&self) -> ApiResult<SchedulerStrategy> {
        scheduler_strategy(&self.0)
    }
    /// A session pending longer is cancelled; null: no limit.
    async fn pending_timeout_seconds(&self) -> Option<i64> {
        self.0.pending_timeout_seconds
    }
    /// The session types it takes; a launch of another type is refused (TYPE_NOT_ALLOWED).
    async fn allowed_session_types(&self) -> Vec<SessionType> {
        session_types(&self.0.allowed_session_types)
    }
}

/// A runtime image sessions start from; a session's image carries the digest it ran.
pub struct Image(pub entity::image::Model, pub Option<String>);

impl Image {
    /// An image of the catalog (no session's).
    pub fn catalog(image: entity::image::Model) -> Self {
        Self(image, None)
    }
}

/// A runtime image sessions start from; a session's image carries the digest it ran.
#[Object]
impl Image {
    /// Unique in the catalog: what `LaunchSessionInput.image` names.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The session types it runs; a launch of another type is refused (UNSUPPORTED_TYPE).
    async fn supported_types(&self) -> Vec<SessionType> {
        session_types(&self.0.supported_types)
    }
    /// The least a session of this image must request.
    async fn minimum_slots(&self) -> ApiResult<Vec<SlotAmount>> {
        minimum_slots(&self.0)
    }
    /// Applications a running session offers, e.g. jupyter, terminal.
    async fn apps(&self) -> Vec<String> {
        image_apps(&self.0)
    }
    /// Its apps that open in a browser (declared with a port): `openSessionApp` opens them
    /// while one of its interactive sessions runs.
    async fn web_apps(&self) -> Vec<String> {
        web_apps(&self.0)
    }
    /// The OCI reference it is pulled from, as declared (`REGISTRY/REPOSITORY:TAG` or
    /// `…@sha256:…`); null for an image that runs on a root of the machine.
    async fn reference(&self) -> Option<String> {
        crate::domain::sessions::image_reference(&self.0)
    }
    /// A session's image: the digest that ran, its reference resolved when it was pulled
    /// (`sha256:…`; null before the pull, and for an image on a root of the machine). In the
    /// catalog: the digest its reference pins, if it names one.
    async fn digest(&self) -> Option<String> {
        crate::domain::sessions::image_digest(&self.0, self.1.as_deref())
    }
}

/// One layer's figures for a slot. `limit: null` is unlimited.
#[derive(SimpleObject)]
pub struct LayerUsage {
    /// Which limit these figures are about.
    pub layer: LimitLayer,
    /// The layer's limit for the slot: its policy's, project's or domain's, or the group's
    /// capacity; null: unlimited.
    pub limit: Option<f64>,
    /// What the layer's sessions hold of the slot now: the keypair's, project's, domain's,
    /// or everyone's in the group.
    pub used: f64,
    /// `limit` − `used`, never below 0; null when unlimited.
    pub remaining: Option<f64>,
}

/// A slot of the panel: what is used, and what remains under the strictest layer.
#[derive(SimpleObject)]
pub struct SlotUsage {
    /// The slot's name, e.g. `cpu`, `mem`, `cuda.device`.
    pub slot: String,
    /// What the view counts of the slot: the viewer's sessions (MY_TOTAL, in the group for
    /// MY_IN_RESOURCE_GROUP) or everyone's in the group (TOTAL_IN_RESOURCE_GROUP).
    pub used: f64,
    /// The binding layer's own limit, which `remaining` is left of (that layer's use is
    /// in `layers`; `used` is the view's own); null when every layer is unlimited.
    pub limit: Option<f64>,
    /// What the strictest layer leaves of the slot, never below 0; null when every layer
    /// is unlimited.
    pub remaining: Option<f64>,
    /// The layer that leaves the least.
    pub binding_layer: Option<LimitLayer>,
    /// Each layer's own figures: KEYPAIR, PROJECT and DOMAIN (MY_TOTAL), with
    /// RESOURCE_GROUP (MY_IN_RESOURCE_GROUP), or RESOURCE_GROUP alone
    /// (TOTAL_IN_RESOURCE_GROUP).
    pub layers: Vec<LayerUsage>,
}

/// The resource summary at the top of the Sessions page: per slot, what is used and what
/// remains.
#[derive(SimpleObject)]
pub struct ResourcePanel {
    /// Which summary this is.
    pub view: ResourcePanelView,
    /// The resource group it is about; null for MY_TOTAL asked without one.
    pub resource_group: Option<String>,
    /// Every slot the group's agents have (MY_TOTAL without a group: those of the project's
    /// groups) or the viewer's sessions hold, in the catalog's order.
    pub slots: Vec<SlotUsage>,
}

#[derive(Default)]
pub struct ResourceQuery;

#[Object]
impl ResourceQuery {
    /// The resource summary panel of the Sessions page. `resourceGroup` defaults to the
    /// project's first allowed group (MY_TOTAL spans every group).
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn resource_panel(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A project the caller may open; its quotas are the PROJECT and DOMAIN layers.")]
        project_id: ID,
        #[graphql(desc = "Which summary to compute.")] view: ResourcePanelView,
        #[graphql(desc = "A resource group the project may use (NOT_FOUND otherwise).")] resource_group: Option<String>,
    ) -> ApiResult<ResourcePanel> {
        let panel = super::limits::aggregate(ctx, async {
            let panel = panels::resource_panel(
                db(ctx)?,
                viewer(ctx)?,
                project_uuid(&project_id)?,
                view.into(),
                resource_group.as_deref(),
            )
            .await?;
            Ok((panel, 0)) // sums over live sessions only: bounded by everyone's quotas
        })
        .await?;
        Ok(ResourcePanel {
            view: panel.view.into(),
            resource_group: panel.resource_group,
            slots: panel
                .slots
                .into_iter()
                .map(|s| SlotUsage {
                    slot: s.slot,
                    used: s.used,
                    limit: s.limit,
                    remaining: s.remaining,
                    binding_layer: s.binding_layer.map(Into::into),
                    layers: s
                        .layers
                        .into_iter()
                        .map(|l| LayerUsage {
                            layer: l.layer.into(),
                            limit: l.limit,
                            used: l.used,
                            remaining: l.remaining,
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    /// The images the launcher offers.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn images(&self, ctx: &Context<'_>) -> ApiResult<Vec<Image>> {
        viewer(ctx)?;
        Ok(catalog::images(db(ctx)?).await?.into_iter().map(Image::catalog).collect())
    }

    /// The resource groups a project may use, its default first.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn resource_groups(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A project the caller may open (NOT_FOUND otherwise).")] project_id: ID,
    ) -> ApiResult<Vec<ResourceGroup>> {
        let groups = visibility::project_resource_groups(db(ctx)?, viewer(ctx)?, project_uuid(&project_id)?).await?;
        Ok(groups.into_iter().map(ResourceGroup).collect())
    }
}
