//! `openSessionApp`: a short-lived, single-use link that opens one app of the caller's
//! running session in a browser, on the apps' own origin ([`crate::http::apps`]).

use async_graphql::{Context, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::domain::apps::grants;
use crate::domain::model::ids::{NodeKind, decode_uuid};
use crate::domain::{DomainError, model::clock};

use super::context::{db, viewer};
use super::errors::ApiResult;

#[derive(Default)]
pub struct AppsMutation;

/// Where to send the browser to open an app, and until when that link works (once).
#[derive(SimpleObject)]
pub struct OpenedApp {
    /// On the apps' origin: it sets the app's cookie and goes on to the app.
    pub url: String,
    /// When the link stops working, 60 seconds after it was made (RFC 3339, UTC).
    pub expires_at: DateTime<Utc>,
}

#[Object]
impl AppsMutation {
    /// Opens app `name` of the caller's own running interactive session: a link for a
    /// browser, good for 60 seconds and once. Another user's session (an administrator's
    /// too) and an app the session's image does not declare are NOT_FOUND; a session that
    /// does not run is NOT_RUNNING.
    async fn open_session_app(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A running interactive session of the caller's own.")] session_id: ID,
        #[graphql(desc = "One of the web apps of the session's image (`Image.webApps`).")] name: String,
    ) -> ApiResult<OpenedApp> {
        let id = decode_uuid(&session_id, NodeKind::Session).ok_or(DomainError::NotFound("session"))?;
        let runtime = ctx.data_opt::<crate::domain::runtime::RuntimeInfo>();
        let Some(apps_url) = runtime.and_then(|r| r.apps_url.clone()) else {
            return Err(
                DomainError::bad_input("APPS_NOT_SERVED", None, "this server serves no apps (--apps-bind)").into()
            );
        };
        let ticket = grants::open(db(ctx)?, viewer(ctx)?, id, &name, clock::now()).await?;
        Ok(OpenedApp {
            url: format!("{}/open?ticket={}", apps_url.trim_end_matches('/'), ticket.secret),
            expires_at: ticket.expires_at,
        })
    }
}
