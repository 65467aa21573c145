//! `sessionExportUrl`: a short-lived link that downloads a session list as CSV without a
//! header, so that a page's "Download CSV" can be a plain link.

use async_graphql::{Context, ID, Object};

use crate::domain::sessions::export::{self, ExportRequest};
use crate::domain::{model::clock, sessions as dom};

use super::context::{db, viewer};
use super::errors::{ApiResult, with_paths};
use super::ids::project_uuid;
use super::limits::STATEMENT_COST;
use super::session_list::{SessionFilter, SessionOrder, SessionScope, to_domain_orders};
use super::session_paging::list_path;
use super::types::SessionColumnKey;

#[derive(Default)]
pub struct ExportQuery;

#[Object]
impl ExportQuery {
    /// A link (a path on this server) to `GET /export/sessions.csv` with these arguments,
    /// signed for the caller and valid for 60 seconds: it downloads without a header. The
    /// arguments are those of `sessions`; `columns` defaults to the caller's visible list
    /// columns. Refused like the list with the same arguments.
    #[graphql(complexity = "STATEMENT_COST")]
    async fn session_export_url(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The project whose sessions are listed, as for `sessions`.")] project_id: ID,
        #[graphql(
            default_with = "Some(SessionScope::Mine)",
            desc = "Whose sessions: the caller's own (MINE) or everyone's (PROJECT), as for `sessions`."
        )]
        scope: Option<SessionScope>,
        #[graphql(desc = "Which sessions, as for `sessions`; none: all of the scope.")] filter: Option<SessionFilter>,
        #[graphql(desc = "The order of the rows, as for `sessions`: newest first unless it says otherwise.")]
        order_by: Option<Vec<SessionOrder>>,
        #[graphql(desc = "The file's columns, in this order; none: the caller's visible list columns.")]
        columns: Option<Vec<SessionColumnKey>>,
    ) -> ApiResult<String> {
        let mut orders = to_domain_orders(order_by);
        if orders.is_empty() {
            orders.push(dom::SessionOrder::DEFAULT);
        }
        let request = ExportRequest {
            project_id: project_uuid(&project_id)?,
            scope: scope.unwrap_or_default().into(),
            filter: filter.unwrap_or_default().to_domain()?,
            orders,
            columns: columns.map(|c| c.into_iter().map(Into::into).collect()),
        };
        let (db, viewer, now) = (db(ctx)?, viewer(ctx)?, clock::now());
        // Checked now, so that a link that would fail is never handed out.
        export::prepare(db, viewer, &request, now).await.map_err(|e| with_paths(e, list_path))?;
        let signature = export::sign(db, viewer, &request, now).await?;
        Ok(crate::http::export::query::link(&request, &signature))
    }
}
