//! A folder's files over HTTP ([`crate::domain::storage::files`]), for the bearer of a
//! token, as the export is:
//!
//! ```text
//! GET    /folders/{id}/files/{path}            a directory: its listing (JSON); a file: its bytes (Range)
//! PUT    /folders/{id}/files/{path}            upload, streamed (507 past the folder's quota)
//! DELETE /folders/{id}/files/{path}            a file, link or directory (with what it holds)
//! POST   /folders/{id}/files/{path}?op=mkdir   make a directory
//! POST   /folders/{id}/files/{path}?op=move&to={path}   move or rename
//! ```
//!
//! `{id}` is the folder's id (`Folder.id`). Errors are JSON, `{"error": {"code",
//! "message"}}`: 401 without a valid token, 404 for a folder the caller may not see (or a
//! path that is not there), 403 for writing a folder they may only read, 400 for a bad
//! path, 507 past the quota. A file is always an attachment, never a page of this origin.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::domain::model::ids::{NodeKind, decode_uuid};
use crate::domain::storage::files::{self, Kind, Opened, blocking};
use crate::domain::{DomainError, DomainResult};

use super::AppState;
use super::export::refusal;

/// Bytes of an upload gathered before each write to its file, and the chunks read ahead of
/// the writer.
const UPLOAD_BUFFER: usize = 1 << 20;
const UPLOAD_CHUNKS_AHEAD: usize = 64;

/// What the query string of a POST says.
#[derive(serde::Deserialize)]
pub struct Op {
    op: Option<String>,
    to: Option<String>,
}

async fn opened(state: &AppState, headers: &HeaderMap, id: &str, write: bool) -> DomainResult<Opened> {
    let viewer = super::header_viewer(&state.db, headers).await?.ok_or(DomainError::Unauthenticated)?;
    let id = decode_uuid(id, NodeKind::Folder).ok_or(DomainError::NotFound("folder"))?;
    files::open(&state.db, &viewer, id, write).await
}

fn answer(result: DomainResult<Response>) -> Response {
    result.unwrap_or_else(|e| refusal(&e).into_response())
}

pub async fn get_top(state: State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    answer(get(state, headers, id, String::new()).await)
}

pub async fn get_path(
    state: State<AppState>,
    headers: HeaderMap,
    Path((id, path)): Path<(String, String)>,
) -> Response {
    answer(get(state, headers, id, path).await)
}

async fn get(State(state): State<AppState>, headers: HeaderMap, id: String, path: String) -> DomainResult<Response> {
    let names = files::path(&path)?;
    let folder = opened(&state, &headers, &id, false).await?;
    let (folder, kind) = {
        let names = names.clone();
        blocking(move || {
            let kind = folder.kind(&names)?;
            Ok((folder, kind))
        })
        .await?
    };
    if kind == Kind::Directory {
        let listing = blocking(move || folder.list(&names)).await?;
        let entries: Vec<serde_json::Value> = listing
            .entries
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "kind": e.kind.as_str(),
                    "size": e.size,
                    "modifiedAt": chrono::DateTime::from_timestamp(e.modified, 0).map(|t| t.to_rfc3339()),
                })
            })
            .collect();
        let body = json!({"path": path.trim_matches('/'), "entries": entries, "truncated": listing.truncated});
        return Ok(([(header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response());
    }
    download(folder, names, &headers).await
}

/// A file's bytes, or the one range asked for.
async fn download(folder: Opened, names: Vec<String>, headers: &HeaderMap) -> DomainResult<Response> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let name = names.last().cloned().unwrap_or_default();
    let (file, len) = blocking(move || folder.read(&names)).await?;
    // One satisfiable range is served; a header this does not read (another unit, several
    // ranges) is ignored, as RFC 9110 lets a server do: the whole file.
    let range = match headers.get(header::RANGE).map(|r| byte_range(r.to_str().unwrap_or(""), len)) {
        Some(Asked::Range(first, last)) => Some((first, last)),
        Some(Asked::Unsatisfiable) => {
            let mut refused =
                refusal(&DomainError::bad_input("RANGE_NOT_SATISFIABLE", None, format!("the file has {len} bytes")))
                    .into_response();
            *refused.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            refused.headers_mut().insert(header::CONTENT_RANGE, value(&format!("bytes */{len}")));
            return Ok(refused);
        }
        Some(Asked::Ignored) | None => None,
    };
    let mut file = tokio::fs::File::from_std(file);
    let (status, start, count) = match range {
        Some((start, end)) => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
        None => (StatusCode::OK, 0, len),
    };
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(|e| DomainError::invariant(format!("seeking in a file: {e}")))?;
    }
    let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file.take(count), 256 << 10));
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(header::CONTENT_LENGTH, value(&count.to_string()));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Whatever a session wrote (a page, a script) is a download, never run in this origin.
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect();
    h.insert(header::CONTENT_DISPOSITION, value(&format!("attachment; filename*=UTF-8''{encoded}")));
    if status == StatusCode::PARTIAL_CONTENT {
        h.insert(header::CONTENT_RANGE, value(&format!("bytes {start}-{}/{len}", start + count - 1)));
    }
    Ok(response)
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static(""))
}

/// What a `Range` header asks of a file.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    /// Bytes `first..=last`.
    Range(u64, u64),
    /// A range starting past the end.
    Unsatisfiable,
    /// Not one byte range this serves: the whole file is sent.
    Ignored,
}

/// What `Range: bytes=…` asks of a file of `len` bytes.
fn byte_range(text: &str, len: u64) -> Asked {
    let Some(spec) = text.strip_prefix("bytes=").map(str::trim) else { return Asked::Ignored };
    let Some((first, last)) = spec.split_once('-').filter(|_| !spec.contains(',')) else { return Asked::Ignored };
    let (first, last) = (first.trim(), last.trim());
    let number = |t: &str| t.parse::<u64>().ok();
    match (first, last) {
        ("", suffix) => match number(suffix) {
            Some(0) | None => Asked::Ignored,
            Some(_) if len == 0 => Asked::Unsatisfiable,
            Some(n) => Asked::Range(len.saturating_sub(n), len - 1),
        },
        (f, l) => match (number(f), if l.is_empty() { Some(u64::MAX) } else { number(l) }) {
            (Some(f), Some(l)) if f > l => Asked::Ignored,
            (Some(f), Some(_)) if f >= len => Asked::Unsatisfiable,
            (Some(f), Some(l)) => Asked::Range(f, l.min(len - 1)),
            _ => Asked::Ignored,
        },
    }
}

pub async fn put(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, path)): Path<(String, String)>,
    body: Body,
) -> Response {
    answer(upload(state, headers, id, path, body).await)
}

/// Streams the body into an unnamed file, which takes its name once whole.
async fn upload(state: AppState, headers: HeaderMap, id: String, path: String, body: Body) -> DomainResult<Response> {
    use futures_util::StreamExt;
    let names = files::path(&path)?;
    let folder = opened(&state, &headers, &id, true).await?;
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    folder.accepts(length)?;
    let mut upload = blocking(move || folder.upload(&names)).await?;
    let file = upload.file().ok_or_else(|| DomainError::invariant("an upload without its file"))?;
    // A writer of its own on the blocking pool, a few chunks behind the socket: reading the
    // next chunk and writing the last overlap.
    let (chunks, mut to_write) = tokio::sync::mpsc::channel::<axum::body::Bytes>(UPLOAD_CHUNKS_AHEAD);
    let writer = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut file = std::io::BufWriter::with_capacity(UPLOAD_BUFFER, file);
        while let Some(chunk) = to_write.blocking_recv() {
            file.write_all(&chunk)?;
        }
        file.flush()
    });
    let mut stream = body.into_data_stream();
    let mut written: u64 = 0;
    let mut broke: Option<DomainError> = None;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            broke = Some(DomainError::bad_input("INCOMPLETE", None, "the upload broke off"));
            break;
        };
        match upload.wrote(chunk.len() as u64) {
            Ok(n) => written = n,
            Err(e) => {
                broke = Some(e);
                break;
            }
        }
        // A writer that stopped (its write failed) says why below.
        if chunks.send(chunk).await.is_err() {
            break;
        }
    }
    drop(chunks);
    let wrote = writer.await.map_err(|e| DomainError::invariant(format!("an upload's writer: {e}")))?;
    wrote.map_err(io_refused)?;
    if let Some(e) = broke {
        return Err(e);
    }
    let created = blocking(move || upload.finish()).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(json!({"path": path.trim_matches('/'), "size": written}))).into_response())
}

fn io_refused(e: std::io::Error) -> DomainError {
    match e.raw_os_error() {
        Some(code) => rustix::io::Errno::from_raw_os_error(code).into(),
        None => DomainError::invariant(format!("writing a file: {e}")),
    }
}

pub async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, path)): Path<(String, String)>,
) -> Response {
    answer(
        async {
            let names = files::path(&path)?;
            let folder = opened(&state, &headers, &id, true).await?;
            blocking(move || folder.remove(&names)).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

pub async fn post(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, path)): Path<(String, String)>,
    Query(op): Query<Op>,
) -> Response {
    answer(
        async {
            let names = files::path(&path)?;
            let to = match (op.op.as_deref(), op.to.as_deref()) {
                (Some("mkdir"), _) => None,
                (Some("move"), Some(to)) => Some(files::path(to)?),
                _ => {
                    return Err(DomainError::bad_input(
                        "UNKNOWN_OP",
                        "op".to_owned(),
                        "`op` is `mkdir`, or `move` with `to`",
                    ));
                }
            };
            let folder = opened(&state, &headers, &id, true).await?;
            blocking(move || match &to {
                None => folder.make_directory(&names),
                Some(to) => folder.rename(&names, to),
            })
            .await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_byte_range_within_the_file() {
        assert_eq!(byte_range("bytes=0-9", 100), Asked::Range(0, 9));
        assert_eq!(byte_range("bytes=90-", 100), Asked::Range(90, 99));
        assert_eq!(byte_range("bytes=-10", 100), Asked::Range(90, 99));
        assert_eq!(byte_range("bytes=50-1000", 100), Asked::Range(50, 99));
        assert_eq!(byte_range("bytes=100-", 100), Asked::Unsatisfiable);
        assert_eq!(byte_range("bytes=0-", 0), Asked::Unsatisfiable);
        for ignored in ["bytes=5-2", "bytes=0-1,5-6", "items=0-1", "bytes=x-1", "bytes=-0"] {
            assert_eq!(byte_range(ignored, 100), Asked::Ignored, "{ignored}");
        }
    }
}
