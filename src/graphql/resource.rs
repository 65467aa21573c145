//! Resource groups, images and limit layers as the API shows them.

use async_graphql::{Context, Enum, ID, Object, SimpleObject};

use crate::domain::slots::ResourceSlots as Slots;
use crate::domain::{catalog, model, panels, visibility};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::ids::project_uuid;
use super::limits::{AGGREGATE_COST, STATEMENT_COST};
use super::types::{LimitLayer, ResourcePanelView, SessionType, SlotAmount};

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::model::SchedulerStrategy")]
pub enum SchedulerStrategy {
    Fifo,
    Lifo,
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

#[Object]
impl ResourceGroup {
    async fn name(&self) -> &str {
        &self.0.name
    }
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

#[Object]
impl Image {
    async fn name(&self) -> &str {
        &self.0.name
    }
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
    pub layer: LimitLayer,
    pub limit: Option<f64>,
    pub used: f64,
    pub remaining: Option<f64>,
}

/// A slot of the panel: what is used, and what remains under the strictest layer.
#[derive(SimpleObject)]
pub struct SlotUsage {
    pub slot: String,
    pub used: f64,
    /// The binding layer's own limit, which `remaining` is left of (that layer's use is
    /// in `layers`; `used` is the view's own); null when every layer is unlimited.
    pub limit: Option<f64>,
    pub remaining: Option<f64>,
    /// The layer that leaves the least.
    pub binding_layer: Option<LimitLayer>,
    pub layers: Vec<LayerUsage>,
}

#[derive(SimpleObject)]
pub struct ResourcePanel {
    pub view: ResourcePanelView,
    pub resource_group: Option<String>,
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
        project_id: ID,
        view: ResourcePanelView,
        resource_group: Option<String>,
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
    async fn resource_groups(&self, ctx: &Context<'_>, project_id: ID) -> ApiResult<Vec<ResourceGroup>> {
        let groups = visibility::project_resource_groups(db(ctx)?, viewer(ctx)?, project_uuid(&project_id)?).await?;
        Ok(groups.into_iter().map(ResourceGroup).collect())
    }
}
