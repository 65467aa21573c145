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

use crate::domain::error::codes::{INTERNAL, INTERNAL_MESSAGE};
use crate::domain::error::{camel, code_of};
use crate::domain::sessions::export::{self, Export, ExportRequest};
use crate::domain::{DomainError, directory::auth, model::clock};

use super::AppState;

pub mod query;

/// The answer to a request that cannot be served.
pub(super) struct Refusal {
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

/// What a caller gets for a domain error: its status, `{"error": {code, message, field}}`.
pub(super) fn refusal(e: &DomainError) -> Refusal {
    let status = match e {
        DomainError::Unauthenticated => StatusCode::UNAUTHORIZED,
        DomainError::Forbidden(_) => StatusCode::FORBIDDEN,
        DomainError::NotFound(_) => StatusCode::NOT_FOUND,
        DomainError::BadInput(_) => StatusCode::BAD_REQUEST,
        DomainError::QuotaExceeded(_) => StatusCode::INSUFFICIENT_STORAGE,
        DomainError::Internal(detail) => {
            tracing::error!(error = %detail, debug = ?detail, "request failed");
            return error(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, INTERNAL_MESSAGE, None);
        }
        DomainError::Unavailable(detail) => {
            tracing::warn!(error = %detail, "database unavailable");
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let field = match e {
        DomainError::BadInput(problems) => problems.first().and_then(|p| p.field.as_deref()).map(camel),
        _ => None,
    };
    let mut refused = error(status, code_of(e), &e.to_string(), field.as_deref());
    if let DomainError::BadInput(problems) = e {
        // Each problem's own code, as the GraphQL answer's `extensions.problems` has them.
        let (shown, _) = crate::domain::error::shown(problems);
        let listed: Vec<serde_json::Value> = shown
            .iter()
            .map(|p| json!({"code": p.code, "field": p.field.as_deref().map(camel), "message": p.message}))
            .collect();
        let mut body: serde_json::Value = serde_json::from_str(&refused.body).unwrap_or_default();
        body["error"]["problems"] = json!(listed);
        refused.body = body.to_string();
    }
    refused
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
    let request = match query::request(&params) {
        Ok(r) => r,
        Err(e) => return refusal(&e).into_response(),
    };
    let viewer = match viewer(&state, &headers, &params, &request, now).await {
        Ok(v) => v,
        Err(e) => return refusal(&e).into_response(),
    };
    let export = match export::prepare(&state.db, &viewer, &request, now).await {
        Ok(e) => e,
        Err(e) => return refusal(&e).into_response(),
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
