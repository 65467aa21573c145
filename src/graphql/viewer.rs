//! `viewer`: who is asking, the projects they may open, and their page settings.

use async_graphql::{Context, ID, Object, SimpleObject};

use crate::domain::{sessions::settings, sessions::visibility};

use super::context::{db, loaders, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::limits::STATEMENT_COST;
use super::loaders::MemberOf;
use super::session_list::SessionScope;
use super::types::{ResourcePanelView, SessionColumnKey};

use super::people::{Project, User};

/// One column of the session table, in display order.
#[derive(SimpleObject)]
pub struct SessionColumn {
    /// Which column.
    pub column: SessionColumnKey,
    /// Whether the table shows it (NAME always does).
    pub visible: bool,
}

/// The user and their settings.
pub struct UserSettings(pub uuid::Uuid, pub settings::UserSettings);

/// A user's Sessions page settings (only ever the viewer's own). The settings mutations
/// return it: a cache keyed on `id` updates `viewer.settings` from their answers.
#[Object]
impl UserSettings {
    /// The settings' global id (one per user).
    pub async fn id(&self) -> ID {
        encode(NodeKind::UserSettings, self.0)
    }
    /// Which resource panel the page shows.
    async fn resource_panel_view(&self) -> ResourcePanelView {
        self.1.resource_panel_view.into()
    }
    /// Every column exactly once, in display order: as set, or (with `scope`) as a list
    /// of that scope shows them: everyone's sessions (PROJECT) show OWNER right after NAME
    /// whatever the settings say. The CSV export without `columns` has the same.
    async fn session_list_columns(
        &self,
        #[graphql(desc = "The list the columns are for; without it, the columns as set.")] scope: Option<SessionScope>,
    ) -> Vec<SessionColumn> {
        let columns = match scope {
            Some(scope) => self.1.columns_shown(scope.into()),
            None => self.1.session_list_columns.clone(),
        };
        columns.iter().map(|c| SessionColumn { column: c.column.into(), visible: c.visible }).collect()
    }
}

/// The authenticated caller; its projects and settings read together, once, when asked
/// ([`visibility::home`]: one statement for both).
#[derive(Default)]
pub struct Viewer {
    home: tokio::sync::OnceCell<visibility::Home>,
}

impl Viewer {
    async fn home(&self, ctx: &Context<'_>) -> ApiResult<&visibility::Home> {
        let (db, viewer) = (db(ctx)?, viewer(ctx)?);
        Ok(self.home.get_or_try_init(|| visibility::home(db, viewer)).await?)
    }
}

/// The authenticated caller: who they are, the projects they may open, and their settings.
#[Object]
impl Viewer {
    /// The caller's own account.
    async fn user(&self, ctx: &Context<'_>) -> ApiResult<User> {
        Ok(viewer(ctx)?.into())
    }
    /// The projects the viewer may open, by name.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn projects(&self, ctx: &Context<'_>) -> ApiResult<Vec<Project>> {
        let home = self.home(ctx).await?;
        // Their `sessionScopes` need no statement of their own: the membership came along.
        let user = viewer(ctx)?.user_id;
        let known = home.projects.iter().map(|(p, member)| (MemberOf(user, p.id), *member));
        loaders(ctx)?.feed_many(known).await;
        Ok(home.projects.iter().map(|(p, _)| Project(p.clone())).collect())
    }
    /// The key that signs the completion callbacks of the viewer's sessions: a receiver
    /// checks that the `X-Sessiond-Signature-256` header is `sha256=` and the hex
    /// HMAC-SHA256 of the request's body keyed with this text's bytes. The same on every
    /// call until `rotateCallbackSigningKey`; keep it secret.
    #[graphql(complexity = "STATEMENT_COST")]
    async fn callback_signing_key(&self, ctx: &Context<'_>) -> ApiResult<String> {
        Ok(crate::domain::lifecycle::callbacks::owner_key(db(ctx)?, viewer(ctx)?.user_id).await?)
    }
    /// The caller's Sessions page settings: resource panel and table columns.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn settings(&self, ctx: &Context<'_>) -> ApiResult<UserSettings> {
        Ok(UserSettings(viewer(ctx)?.user_id, self.home(ctx).await?.settings.clone()))
    }
}

#[derive(Default)]
pub struct ViewerQuery;

#[Object]
impl ViewerQuery {
    /// The caller, as authenticated by the bearer token.
    async fn viewer(&self, ctx: &Context<'_>) -> ApiResult<Viewer> {
        viewer(ctx)?;
        Ok(Viewer::default())
    }
}
