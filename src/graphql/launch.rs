//! Launch groups: the sessions created together by one "Launch Multiple Sessions".

use async_graphql::{Context, ID, Object};
use chrono::{DateTime, Utc};

use crate::domain::sessions::{PageArgs, SessionSet};

use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::session::{SessionConnection, session_connection};

pub struct LaunchGroup(pub entity::launch_group::Model);

#[Object]
impl LaunchGroup {
    pub async fn id(&self) -> ID {
        encode(NodeKind::LaunchGroup, self.0.id)
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// How many sessions were launched together.
    async fn count(&self) -> i32 {
        self.0.count
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The group's sessions, newest first.
    async fn sessions(&self, ctx: &Context<'_>, first: Option<i32>, after: Option<String>) -> ApiResult<SessionConnection> {
        session_connection(ctx, SessionSet::of_launch_group(&self.0), None, PageArgs { first, after, ..Default::default() })
            .await
    }
}
