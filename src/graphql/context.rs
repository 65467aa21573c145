//! What every resolver reads from the request: the authenticated viewer and the database.

use async_graphql::Context;
use sea_orm::DatabaseConnection;

use crate::domain::{DomainError, directory::auth::Viewer};

use super::errors::ApiResult;

/// The viewer of this request. The HTTP layer authenticates before executing, so its
/// absence means a transport forgot to: refuse rather than guess.
pub fn viewer<'a>(ctx: &Context<'a>) -> ApiResult<&'a Viewer> {
    ctx.data_opt::<Viewer>().ok_or_else(|| DomainError::Unauthenticated.into())
}

pub fn db<'a>(ctx: &Context<'a>) -> ApiResult<&'a DatabaseConnection> {
    ctx.data_opt::<DatabaseConnection>()
        .ok_or_else(|| DomainError::invariant("the schema was built without a database").into())
}

/// The process's event bus.
pub fn bus<'a>(ctx: &Context<'a>) -> ApiResult<&'a crate::domain::live::events::EventBus> {
    Ok(&live(ctx)?.bus)
}

/// The process's live feeds (events, replays, logs, credentials, shares).
pub fn live<'a>(ctx: &Context<'a>) -> ApiResult<&'a crate::domain::live::Live> {
    ctx.data_opt::<crate::domain::live::Live>()
        .ok_or_else(|| DomainError::invariant("the schema was built without its live feeds").into())
}

/// The request's DataLoaders.
pub fn loaders<'a>(ctx: &Context<'a>) -> ApiResult<&'a super::loaders::Loaders> {
    ctx.data_opt::<super::loaders::Loaders>()
        .ok_or_else(|| DomainError::invariant("the request was prepared without loaders").into())
}
