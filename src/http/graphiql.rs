//! GraphiQL, served entirely by sessiond: the page and its scripts and styles are built into
//! the binary (vendored from the npm packages `graphiql@3`, `react@18`, `react-dom@18`, and
//! `graphql-ws@6` for subscriptions over `/graphql/ws`), so it works with no network. The
//! page has a field for the bearer token, kept for the tab only (`sessionStorage`, as the
//! Sessions page keeps it).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("graphiql/index.html");

/// Only our own origin: no CDN can be reached, and none is needed.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "graphiql.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("graphiql/graphiql.min.js"),
    },
    Asset {
        name: "graphiql.min.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("graphiql/graphiql.min.css"),
    },
    Asset {
        name: "react.production.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("graphiql/react.production.min.js"),
    },
    Asset {
        name: "react-dom.production.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("graphiql/react-dom.production.min.js"),
    },
    Asset {
        name: "graphql-ws.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("graphiql/graphql-ws.min.js"),
    },
    Asset { name: "init.js", content_type: "text/javascript; charset=utf-8", body: include_bytes!("graphiql/init.js") },
];

pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        PAGE,
    )
        .into_response()
}

pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => (
            [
                (header::CONTENT_TYPE, a.content_type),
                (header::CACHE_CONTROL, "public, max-age=3600"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            a.body,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
