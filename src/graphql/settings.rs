//! The viewer's own settings: which resource panel shows, the session table's columns,
//! and the key that signs their callbacks.

use async_graphql::{Context, InputObject, Object};

use crate::domain::sessions::settings::{self, ColumnSetting};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::types::{ResourcePanelView, SessionColumnKey};
use super::viewer::UserSettings;

/// One column in the order the table should show it.
#[derive(InputObject)]
pub struct SessionColumnInput {
    /// Which column; each at most once.
    pub column: SessionColumnKey,
    /// Whether the table shows it; NAME cannot be hidden.
    pub visible: bool,
}

#[derive(Default)]
pub struct SettingsMutation;

#[Object]
impl SettingsMutation {
    /// Chooses the resource panel the Sessions page shows.
    async fn set_resource_panel_view(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The panel to show from now on.")] view: ResourcePanelView,
    ) -> ApiResult<UserSettings> {
        let user = viewer(ctx)?.user_id;
        Ok(UserSettings(user, settings::set_resource_panel_view(db(ctx)?, user, view.into()).await?))
    }

    /// Sets the session table's columns: the full list in display order. A column given
    /// twice or NAME hidden is refused; columns left out are appended hidden.
    async fn update_session_list_columns(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Every column to show or hide, in display order.")] columns: Vec<SessionColumnInput>,
    ) -> ApiResult<UserSettings> {
        let columns: Vec<ColumnSetting> =
            columns.into_iter().map(|c| ColumnSetting { column: c.column.into(), visible: c.visible }).collect();
        let user = viewer(ctx)?.user_id;
        Ok(UserSettings(user, settings::update_session_list_columns(db(ctx)?, user, &columns).await?))
    }

    /// Replaces the key that signs the viewer's completion callbacks with a new random one,
    /// and returns it (`Viewer.callbackSigningKey` from now on). For a day the old key goes
    /// on signing too, in `X-Sessiond-Signature-256-Previous`, so a receiver that checks
    /// either signature refuses no callback while it switches; a second rotation within
    /// that day ends the first key's at once.
    async fn rotate_callback_signing_key(&self, ctx: &Context<'_>) -> ApiResult<String> {
        Ok(crate::domain::lifecycle::callbacks::rotate_key(db(ctx)?, viewer(ctx)?.user_id).await?)
    }
}
