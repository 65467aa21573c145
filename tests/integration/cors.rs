//! Browsers of other origins (`--cors-origin`), on both databases: a preflight from a
//! listed origin is allowed and one from another is not; a WebSocket (a subscription, a
//! terminal) is opened from the server's own origin or a listed one, never from another
//! page's; without a list nothing cross-origin is allowed.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};

use crate::support::{Backend, TestApp};

const ALLOWED: &str = "http://localhost:3000";

async fn preflight(app: &TestApp, origin: &str) -> (StatusCode, Option<String>) {
    let req = Request::builder()
        .method(Method::OPTIONS)
        .uri("/graphql")
        .header(header::ORIGIN, origin)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "authorization, content-type")
        .body(Body::empty())
        .expect("a request");
    let (status, headers, _) = app.send(req).await;
    let allowed = headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).map(|v| v.to_str().unwrap_or("").to_owned());
    (status, allowed)
}

/// The status of a WebSocket upgrade of `path` with `origin` (none: no header).
async fn upgrade(addr: std::net::SocketAddr, path: &str, origin: Option<&str>) -> u16 {
    let mut request =
        tungstenite::client::IntoClientRequest::into_client_request(format!("ws://{addr}{path}")).expect("a request");
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().expect("a value"));
    if let Some(o) = origin {
        request.headers_mut().insert("origin", o.parse().expect("an origin"));
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((_, response)) => response.status().as_u16(),
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("{e}"),
    }
}

async fn other_origins_are_what_the_list_says(backend: Backend) {
    let limits = sessiond::config::HttpLimits { cors_origins: vec![ALLOWED.to_owned()], ..Default::default() };
    let Some(mut app) = TestApp::start_with(backend, limits).await else { return };
    let (status, allowed) = preflight(&app, ALLOWED).await;
    assert!(status.is_success(), "{status}");
    assert_eq!(allowed.as_deref(), Some(ALLOWED));
    assert_eq!(preflight(&app, "http://evil.example").await.1, None, "another origin is not allowed");

    let addr = app.serve().await;
    let own = format!("http://{addr}");
    assert_eq!(upgrade(addr, "/graphql/ws", None).await, 101, "not a browser");
    assert_eq!(upgrade(addr, "/graphql/ws", Some(&own)).await, 101, "the server's own page");
    assert_eq!(upgrade(addr, "/graphql/ws", Some(ALLOWED)).await, 101, "a listed origin");
    assert_eq!(upgrade(addr, "/graphql/ws", Some("http://evil.example")).await, 403, "another site's page");
    assert_eq!(upgrade(addr, "/sessions/x/terminal", Some("http://evil.example")).await, 403, "a terminal too");
}

async fn without_a_list_nothing_is_cross_origin(backend: Backend) {
    let Some(mut app) = TestApp::start(backend).await else { return };
    assert_eq!(preflight(&app, ALLOWED).await.1, None);
    let addr = app.serve().await;
    assert_eq!(upgrade(addr, "/graphql/ws", Some(ALLOWED)).await, 403);
    assert_eq!(upgrade(addr, "/graphql/ws", Some(&format!("http://{addr}"))).await, 101);
}

macro_rules! both {
    ($($name:ident),+) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(crate::support::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(crate::support::Backend::Postgres).await
            }
        }
    )+};
}

both!(other_origins_are_what_the_list_says, without_a_list_nothing_is_cross_origin);
