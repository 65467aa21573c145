//! Which browser origins may call the API (`--cors-origin`): CORS for HTTP, through
//! tower-http's layer, and the `Origin` of a WebSocket's upgrade (a browser sends one; a
//! page of another site must not open a subscription or a terminal with a token it got
//! elsewhere). With no list, HTTP answers no cross-origin request and a WebSocket is
//! accepted from the server's own origin alone. A client that sends no `Origin` (not a
//! browser) is not concerned.

use axum::http::{HeaderMap, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The CORS layer of the listed origins, or none.
pub fn cors(origins: &[String]) -> Option<CorsLayer> {
    let allowed: Vec<HeaderValue> =
        origins.iter().filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok()).collect();
    if allowed.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(allowed))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT, header::RANGE])
            .expose_headers([header::CONTENT_DISPOSITION, header::CONTENT_RANGE])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// Whether a WebSocket upgrade with `headers` comes from an origin that may open one: none
/// sent, one listed, or the server's own (the `Host` it was asked by).
pub fn websocket_allowed(headers: &HeaderMap, origins: &[String]) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else { return true };
    if origins.iter().any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin)) {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let authority = origin.split_once("://").map(|(_, rest)| rest);
    matches!((authority, host), (Some(a), Some(h)) if a.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).expect("a host"));
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).expect("an origin"));
        }
        h
    }

    #[test]
    fn a_websocket_comes_from_its_own_origin_or_a_listed_one() {
        let none: Vec<String> = Vec::new();
        assert!(websocket_allowed(&headers(None, "api:8080"), &none), "not a browser");
        assert!(websocket_allowed(&headers(Some("http://api:8080"), "api:8080"), &none), "its own page");
        assert!(!websocket_allowed(&headers(Some("http://evil.example"), "api:8080"), &none));
        assert!(!websocket_allowed(&headers(Some("null"), "api:8080"), &none), "a sandboxed page");
        let listed = vec!["http://localhost:3000".to_owned()];
        assert!(websocket_allowed(&headers(Some("http://localhost:3000"), "api:8080"), &listed));
        assert!(!websocket_allowed(&headers(Some("http://localhost:3001"), "api:8080"), &listed));
    }
}
