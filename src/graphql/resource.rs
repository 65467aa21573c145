//! Resource groups, images and limit layers as the API shows them.

use async_graphql::{Enum, Object};

use crate::domain::model;
use crate::domain::slots::ResourceSlots as Slots;

use super::errors::ApiResult;
use super::session::{SessionType, SlotAmount};

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::model::SchedulerStrategy")]
pub enum SchedulerStrategy {
    Fifo,
    Lifo,
    Drf,
}

/// Which limit a figure or a pending reason is about.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum LimitLayer {
    Keypair,
    Project,
    Domain,
    ResourceGroup,
}

fn session_types(value: &serde_json::Value) -> Vec<SessionType> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| model::SessionType::parse(t.as_str()?))
        .map(Into::into)
        .collect()
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
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
    async fn strategy(&self) -> Option<SchedulerStrategy> {
        model::SchedulerStrategy::parse(&self.0.scheduler).map(Into::into)
    }
    /// A session pending longer is cancelled; null: no limit.
    async fn pending_timeout_seconds(&self) -> Option<i64> {
        self.0.pending_timeout_seconds
    }
    async fn allowed_session_types(&self) -> Vec<SessionType> {
        session_types(&self.0.allowed_session_types)
    }
}

/// A runtime image sessions start from.
pub struct Image(pub entity::image::Model);

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
        let slots = Slots::from_json(&self.0.minimum_slots)?;
        Ok(slots.iter().map(|(slot, amount)| SlotAmount { slot: slot.to_owned(), amount }).collect())
    }
    /// Applications a running session offers, e.g. jupyter, terminal.
    async fn apps(&self) -> Vec<String> {
        strings(&self.0.apps)
    }
}
