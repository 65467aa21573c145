//! A session list's paging: the arguments as the client sent them, what a page costs, the
//! API paths of the list's arguments, and the one read of a page that the list resolvers
//! and the compiled list share.

use crate::domain::model::clock;
use crate::domain::sessions::{self as dom, SessionPosition, SessionSet};
use crate::domain::store::inline::InlineReads;
use crate::domain::store::paging::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PageRequest};

use super::cursor;
use super::errors::{ApiResult, camel, with_paths};
use super::limits::{AGGREGATE_COST, STATEMENT_COST};

/// The API path of a domain field of the list's arguments: paging as it is, the rest
/// inside `filter`.
pub(super) fn list_path(field: &str) -> String {
    if ["first", "last", "after", "before"].contains(&field) {
        field.to_owned()
    } else if field == "order_by" {
        "orderBy".to_owned()
    } else {
        format!("filter.{}", camel(field))
    }
}

/// A page of sessions costs its statement, the count it may be asked for (`totalCount`
/// costs nothing itself: what a connection selects is counted per session), and its size
/// times what each session selects. A size over the maximum counts as the maximum: the
/// resolver refuses it with BAD_USER_INPUT.
pub fn page_complexity(size: Option<i32>, per_session: usize) -> usize {
    let size = size.map_or(DEFAULT_PAGE_SIZE, |n| u64::try_from(n).unwrap_or(0).min(MAX_PAGE_SIZE)) as usize;
    size.max(1).saturating_mul(per_session).saturating_add(STATEMENT_COST + AGGREGATE_COST)
}

/// Relay paging arguments as the client sent them.
#[derive(Default)]
pub struct PageArgs {
    pub first: Option<i32>,
    pub after: Option<String>,
    pub last: Option<i32>,
    pub before: Option<String>,
}

/// Reads one page of `set` as the arguments ask: what the list resolvers and the compiled
/// list ([`super::compiled`]) both read.
pub(super) async fn read_page(
    db: &sea_orm::DatabaseConnection,
    inline: Option<&InlineReads>,
    set: &SessionSet,
    orders: &[dom::SessionOrder],
    args: PageArgs,
) -> ApiResult<dom::SessionPage> {
    let request: PageRequest<SessionPosition> =
        cursor::page_request(args.first, args.last, args.after.as_deref(), args.before.as_deref(), list_path)?;
    Ok(set.page(db, inline, orders, &request, clock::now()).await.map_err(|e| with_paths(e, list_path))?)
}
