//! The Sessions page, served by sessiond: `/project/<name>/session` (the caller's own
//! sessions), `/admin/project/<name>/session` (everyone's, for administrators: the API
//! refuses it to anyone else, and the page says so) and `/`, which the page sends on to the
//! signed-in user's default project. The page is one HTML document and its modules under
//! `/web/`, built from `web/` (TypeScript) into `src/http/web/` and checked in, so the
//! server needs no Node to build; it uses only the public API (GraphQL over HTTP, the
//! `sessionEvents` subscription, the signed export link) and nothing from elsewhere.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Only our own origin, no inline script or style attribute.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

const JS: &str = "text/javascript; charset=utf-8";

/// The page's files by name, as `web/build.mjs` writes them.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("index.html", "text/html; charset=utf-8", include_bytes!("web/index.html")),
    ("page.css", "text/css; charset=utf-8", include_bytes!("web/page.css")),
    ("page.js", JS, include_bytes!("web/page.js")),
    ("api.js", JS, include_bytes!("web/api.js")),
    ("columns.js", JS, include_bytes!("web/columns.js")),
    ("detail.js", JS, include_bytes!("web/detail.js")),
    ("dom.js", JS, include_bytes!("web/dom.js")),
    ("folders.js", JS, include_bytes!("web/folders.js")),
    ("labels.js", JS, include_bytes!("web/labels.js")),
    ("launcher.js", JS, include_bytes!("web/launcher.js")),
    ("live.js", JS, include_bytes!("web/live.js")),
    ("panel.js", JS, include_bytes!("web/panel.js")),
];

fn file(name: &str) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CONTENT_SECURITY_POLICY, CSP),
                // Revalidated each load: a new build is seen at once.
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                // A page's address names the project; no link followed from it says so.
                (header::REFERRER_POLICY, "no-referrer"),
            ],
            *body,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The page itself, at any of its addresses (the project's name in one is the page's to
/// read).
pub async fn page() -> Response {
    file("index.html")
}

/// One of the page's scripts or its style sheet.
pub async fn asset(Path(name): Path<String>) -> Response {
    if name == "index.html" {
        return StatusCode::NOT_FOUND.into_response();
    }
    file(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module the built page imports is served: a module added to `web/src` and not
    /// here would fail in the browser only.
    #[test]
    fn every_built_file_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/web");
        let mut built: Vec<String> = std::fs::read_dir(dir)
            .expect("the built page")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        built.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|(n, _, _)| (*n).to_owned()).collect();
        served.sort();
        assert_eq!(built, served);
    }
}
