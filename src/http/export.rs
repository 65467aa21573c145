//! `GET /export/sessions.csv`: the session list as CSV, streamed. The query parameters are
//! those of `sessions` (`projectId`, `scope`, the filter's fields, `orderBy`) plus
//! `columns`; rows come from the same domain query as the list, batch by batch, so any
//! size takes constant memory, and a client that goes away stops the reading.
//!
//! Errors are JSON, `{"error": {"code", "message"}}`: 401 without a valid token, 403 for a
//! scope the caller may not use, 404 for a project it cannot see, 400 for anything
//! malformed or unknown.

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::domain::export::{self, Export, ExportRequest};
use crate::domain::model::{SessionColumnKey, SessionType};
use crate::domain::sessions::{SessionFilter, SessionOrder, SessionOrderField, SessionTab};
use crate::domain::status::SessionStatus;
use crate::domain::visibility::SessionScope;
use crate::domain::{DomainError, auth, clock};
use crate::graphql::errors::{INTERNAL, INTERNAL_MESSAGE, camel, code_of};
use crate::graphql::ids::{NodeKind, decode_uuid};

use super::AppState;

/// The answer to a request that cannot be served.
struct Refusal {
    status: StatusCode,
    body: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response =
            (self.status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], self.body).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, super::RETRY_AFTER_SECONDS.into());
        }
        response
    }
}

fn error(status: StatusCode, code: &str, message: &str, field: Option<&str>) -> Refusal {
    let mut body = json!({"error": {"code": code, "message": message}});
    if let Some(f) = field {
        body["error"]["field"] = json!(f);
    }
    Refusal { status, body: body.to_string() }
}

fn bad(field: &str, message: impl AsRef<str>) -> Refusal {
    error(StatusCode::BAD_REQUEST, "BAD_USER_INPUT", message.as_ref(), Some(field))
}

fn domain_error(e: &DomainError) -> Refusal {
    let status = match e {
        DomainError::Unauthenticated => StatusCode::UNAUTHORIZED,
        DomainError::Forbidden(_) => StatusCode::FORBIDDEN,
        DomainError::NotFound(_) => StatusCode::NOT_FOUND,
        DomainError::BadInput(_) => StatusCode::BAD_REQUEST,
        DomainError::Internal(detail) => {
            tracing::error!(error = %detail, debug = ?detail, "export failed");
            return error(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, INTERNAL_MESSAGE, None);
        }
        DomainError::Unavailable(detail) => {
            tracing::warn!(error = %detail, "export: database unavailable");
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let field = match e {
        DomainError::BadInput(problems) => problems.first().and_then(|p| p.field.as_deref()).map(camel),
        _ => None,
    };
    error(status, code_of(e), &e.to_string(), field.as_deref())
}

/// A comma-separated list of names, each parsed by `parse`.
fn list<T>(field: &str, text: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, Refusal> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| parse(s).ok_or_else(|| bad(field, format!("`{field}`: unknown value `{s}`"))))
        .collect()
}

fn time(field: &str, text: &str) -> Result<DateTime<Utc>, Refusal> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| bad(field, format!("`{field}`: not an RFC 3339 time")))
}

/// `CREATED_AT_DESC`-style orders, comma-separated.
fn orders(text: &str) -> Result<Vec<SessionOrder>, Refusal> {
    list("orderBy", text, |s| {
        let (field, direction) = s.rsplit_once('_')?;
        let descending = match direction {
            "ASC" => false,
            "DESC" => true,
            _ => return None,
        };
        Some(SessionOrder { field: SessionOrderField::parse(field)?, descending })
    })
}

/// The export the query string asks for.
fn request(params: &[(String, String)]) -> Result<ExportRequest, Refusal> {
    let mut project_id = None;
    let mut scope = SessionScope::Mine;
    let mut filter = SessionFilter::default();
    let mut order = Vec::new();
    let mut columns = None;
    let mut seen = std::collections::BTreeSet::new();
    for (name, value) in params {
        if !seen.insert(name.as_str()) {
            return Err(bad(name, format!("`{name}` is given twice")));
        }
        if value.contains('\0') {
            return Err(bad(name, format!("`{name}` contains a NUL character")));
        }
        match name.as_str() {
            "projectId" => project_id = Some(value.clone()),
            "scope" => scope = SessionScope::parse(value).ok_or_else(|| bad(name, "`scope` is MINE or PROJECT"))?,
            "types" => filter.types = Some(list(name, value, SessionType::parse)?),
            "statuses" => filter.statuses = Some(list(name, value, SessionStatus::parse)?),
            "tab" => {
                filter.tab = Some(SessionTab::parse(value).ok_or_else(|| bad(name, "`tab` is RUNNING or FINISHED"))?)
            }
            "nameContains" => filter.name_contains = Some(value.clone()),
            "resourceGroup" => filter.resource_group = Some(value.clone()),
            "ownerEmail" => filter.owner_email = Some(value.clone()),
            "createdAfter" => filter.created_after = Some(time(name, value)?),
            "createdBefore" => filter.created_before = Some(time(name, value)?),
            "launchGroupId" => {
                // An id that names no launch group selects nothing, as in the list.
                filter.launch_group_id = Some(decode_uuid(value, NodeKind::LaunchGroup).unwrap_or(uuid::Uuid::nil()));
            }
            "orderBy" => order = orders(value)?,
            "columns" => columns = Some(list(name, value, SessionColumnKey::parse)?),
            "key" | "expires" | "sig" => {} // a signed link's own parameters
            other => return Err(bad(other, format!("unknown parameter `{other}`"))),
        }
    }
    let Some(project_id) = project_id else {
        return Err(bad("projectId", "`projectId` is required"));
    };
    let Some(project_id) = decode_uuid(&project_id, NodeKind::Project) else {
        return Err(error(StatusCode::NOT_FOUND, "NOT_FOUND", "project not found", None));
    };
    if order.is_empty() {
        order.push(SessionOrder::DEFAULT);
    }
    Ok(ExportRequest { project_id, scope, filter, orders: order, columns })
}

/// What a spreadsheet would run as a formula is made plain text with a leading `'`.
fn neutralised(cell: String) -> String {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{cell}"),
        _ => cell,
    }
}

pub async fn sessions_csv(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<Vec<(String, String)>>,
) -> Response {
    let now = clock::now();
    let request = match request(&params) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    let viewer = match viewer(&state, &headers, &params, &request, now).await {
        Ok(v) => v,
        Err(e) => return domain_error(&e).into_response(),
    };
    let export = match export::prepare(&state.db, &viewer, &request, now).await {
        Ok(e) => e,
        Err(e) => return domain_error(&e).into_response(),
    };
    let filename = format!(
        "sessions-{}-{}.csv",
        export
            .project_name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect::<String>(),
        now.format("%Y%m%dT%H%M%SZ")
    );
    let body = Body::from_stream(rows(state.db.clone(), export));
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

/// Who asks: the bearer of the `Authorization` header, or the signer of a link (`key`,
/// `expires`, `sig`). A link used with another user's header is refused.
async fn viewer(
    state: &AppState,
    headers: &HeaderMap,
    params: &[(String, String)],
    request: &ExportRequest,
    now: DateTime<Utc>,
) -> Result<auth::Viewer, DomainError> {
    let bearer = super::header_viewer(&state.db, headers).await?;
    let param = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let Some(mac) = param("sig") else {
        return bearer.ok_or(DomainError::Unauthenticated);
    };
    let keypair_id = param("key").and_then(|k| uuid::Uuid::parse_str(k).ok()).ok_or_else(export::link_refused)?;
    let expires = param("expires").and_then(|e| e.parse().ok()).ok_or_else(export::link_refused)?;
    let signature = export::Signature { keypair_id, expires, mac: mac.to_owned() };
    let signer = export::verify(&state.db, &signature, request, now).await?;
    if bearer.is_some_and(|b| b.user_id != signer.user_id) {
        return Err(DomainError::Forbidden("this export link belongs to another user".to_owned()));
    }
    Ok(signer)
}

/// The path of a signed link to the export `request`.
pub fn link(request: &ExportRequest, signature: &export::Signature) -> String {
    use crate::graphql::ids::encode;
    use chrono::SecondsFormat;
    let f = &request.filter;
    let join = |names: Vec<&str>| names.join(",");
    let mut q: Vec<(&str, String)> = vec![("projectId", encode(NodeKind::Project, request.project_id).0)];
    q.push(("scope", request.scope.as_str().to_owned()));
    if let Some(t) = &f.types {
        q.push(("types", join(t.iter().map(|t| t.as_str()).collect())));
    }
    if let Some(t) = f.tab {
        q.push(("tab", t.as_str().to_owned()));
    }
    if let Some(s) = &f.statuses {
        q.push(("statuses", join(s.iter().map(|s| s.as_str()).collect())));
    }
    for (name, value) in
        [("nameContains", &f.name_contains), ("resourceGroup", &f.resource_group), ("ownerEmail", &f.owner_email)]
    {
        if let Some(v) = value {
            q.push((name, v.clone()));
        }
    }
    if let Some(id) = f.launch_group_id {
        q.push(("launchGroupId", encode(NodeKind::LaunchGroup, id).0));
    }
    for (name, value) in [("createdAfter", f.created_after), ("createdBefore", f.created_before)] {
        if let Some(t) = value {
            q.push((name, t.to_rfc3339_opts(SecondsFormat::Micros, true)));
        }
    }
    let orders: Vec<String> = request
        .orders
        .iter()
        .map(|o| format!("{}_{}", o.field.as_str(), if o.descending { "DESC" } else { "ASC" }))
        .collect();
    q.push(("orderBy", orders.join(",")));
    if let Some(c) = &request.columns {
        q.push(("columns", join(c.iter().map(|c| c.as_str()).collect())));
    }
    q.push(("key", signature.keypair_id.to_string()));
    q.push(("expires", signature.expires.to_string()));
    q.push(("sig", signature.mac.clone()));
    format!("/export/sessions.csv?{}", serde_urlencoded::to_string(&q).unwrap_or_default())
}

/// The file: the header row, then one chunk per batch of rows.
fn rows(
    db: sea_orm::DatabaseConnection,
    export: Export,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    use futures_util::StreamExt;
    let free_text = export.free_text();
    let header = write([export.titles()], &[]);
    let batches = std::sync::Arc::new(export).rows(db).map(move |batch| match batch {
        Ok(rows) => Ok(Bytes::from(write(rows, &free_text))),
        Err(e) => {
            // The status is sent already: end the body with an error, so the client sees a
            // broken download rather than a short file.
            tracing::error!(error = ?e, "export failed while streaming");
            Err(std::io::Error::other("export failed"))
        }
    });
    futures_util::stream::once(async move { Ok(Bytes::from(header)) }).chain(batches)
}

/// CSV records (quoted as needed by the csv crate, lines ending in CRLF), free-text cells
/// neutralised.
fn write(rows: impl IntoIterator<Item = Vec<String>>, free_text: &[bool]) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::with_capacity(64 << 10));
    for row in rows {
        let cells = row
            .into_iter()
            .enumerate()
            .map(|(i, c)| if free_text.get(i).copied().unwrap_or(false) { neutralised(c) } else { c });
        if w.write_record(cells).is_err() {
            break; // writing to memory does not fail
        }
    }
    w.into_inner().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_are_neutralised_and_quoting_is_the_csv_crates() {
        let row = write(
            [vec!["=SUM(A1)".into(), "a,b \"c\"\nd".into(), "-5".into(), "@x".into()]],
            &[true, true, false, true],
        );
        assert_eq!(String::from_utf8(row).expect("utf8"), "'=SUM(A1),\"a,b \"\"c\"\"\nd\",-5,'@x\r\n");
    }
}
