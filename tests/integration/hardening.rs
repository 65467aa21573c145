//! What one caller may make the server do: connections that send nothing, more requests
//! than it answers at once, and HTTP refusals; and the metrics that show it.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use sessiond::config::HttpLimits;

use crate::db_tests;
use crate::support::{TestApp, error_codes, hold_the_in_flight_cap};

/// Reads until the peer closes the connection (at most `patience`, else panics); returns
/// what arrived.
async fn until_closed(tcp: &mut TcpStream, patience: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(patience, async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.expect("the server closes the connection");
    got
}

/// Whether the peer has closed `tcp` already (EOF or reset readable without waiting long).
async fn is_closed(tcp: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(Duration::from_millis(50), tcp.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

async fn slow_and_idle_connections_are_closed_and_capped(app: TestApp) {
    let limits = HttpLimits { header_read_timeout_ms: 300, max_connections: 2, ..HttpLimits::default() };
    let mut app = app.reopen_with(limits).await;
    let addr = app.serve().await;

    // Half a request head, then nothing: closed once the head is late.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.expect("write");
    until_closed(&mut slow, Duration::from_secs(20)).await;

    // A keep-alive connection is answered, then closed when idle as long.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let answer = until_closed(&mut idle, Duration::from_secs(20)).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));

    // Two connections are the cap: a third is not accepted until one of them closes, so
    // when its answer comes, one of the first two has been closed by the server.
    let mut first = TcpStream::connect(addr).await.expect("connect");
    let mut second = TcpStream::connect(addr).await.expect("connect");
    let mut third = TcpStream::connect(addr).await.expect("connect (queued)");
    third.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("write");
    let answer = until_closed(&mut third, Duration::from_secs(20)).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    let closed = usize::from(is_closed(&mut first).await) + usize::from(is_closed(&mut second).await);
    assert!(closed >= 1, "the third connection was served while both others were open");
}

async fn requests_over_the_in_flight_cap_are_shed(app: TestApp) {
    let limits = HttpLimits { max_in_flight: 1, ..HttpLimits::default() };
    let app = std::sync::Arc::new(app.reopen_with(limits).await);
    // A request waits in flight: another is refused at once, with a code and a time to
    // retry after.
    let ((_, headers, body), held, waiting) = hold_the_in_flight_cap(&app).await;
    assert_eq!(headers[header::RETRY_AFTER], "1");
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(error_codes(&body), ["UNAVAILABLE"], "{body}");
    // Health checks are not work: answered meanwhile.
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
    drop(held);
    let resp = waiting.await.expect("task");
    assert_eq!(resp["data"]["viewer"]["user"]["email"], "alice@example.com", "{resp}");
    assert_eq!(app.get("/graphiql").await.0, StatusCode::OK, "the cap is free again");
}

async fn http_refusals_carry_a_json_code(app: TestApp) {
    let cases = [
        // 405: a method the path does not answer.
        (Request::put("/graphql").body(Body::empty()), StatusCode::METHOD_NOT_ALLOWED, "BAD_USER_INPUT"),
        // 406: no acceptable media type.
        (
            Request::get("/graphql?query=%7B__typename%7D").header(header::ACCEPT, "text/html").body(Body::empty()),
            StatusCode::NOT_ACCEPTABLE,
            "BAD_USER_INPUT",
        ),
        // 415: not JSON.
        (
            Request::post("/graphql").header(header::CONTENT_TYPE, "text/plain").body(Body::from("{}")),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "BAD_USER_INPUT",
        ),
        // 400 for a body that is not JSON, even for a legacy JSON client.
        (
            Request::post("/graphql")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json")
                .body(Body::from("{not json")),
            StatusCode::BAD_REQUEST,
            "BAD_USER_INPUT",
        ),
    ];
    for (request, status, code) in cases {
        let (got, headers, body) = app.send(request.expect("request")).await;
        assert_eq!(got, status);
        let ct = headers[header::CONTENT_TYPE].to_str().expect("content type");
        assert!(ct.contains("json"), "{status}: {ct}");
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(error_codes(&body), [code], "{status}: {body}");
    }
}

/// The figures of `/metrics` whose name and labels start with `prefix`, summed.
fn figure(text: &str, prefix: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

async fn metrics_show_requests_connections_the_scheduler_and_the_database(app: TestApp) {
    let mut app = app;
    let resp = app.gql(Some("demo-alice"), "{ viewer { user { email } } }", json!({})).await;
    assert!(resp.get("errors").is_none());
    let resp = app.gql(Some("demo-alice"), "{ viewer { nope } }", json!({})).await;
    assert_eq!(error_codes(&resp), ["GRAPHQL_VALIDATION_FAILED"]);
    let resp = app.gql(Some("demo-alice"), "{ viewer { ", json!({})).await;
    assert_eq!(error_codes(&resp), ["GRAPHQL_PARSE_FAILED"]);
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let resp = app.gql(Some("demo-alice"), launch, json!({"i": crate::support::launch_input("metrics-1", 1.0)})).await;
    assert!(resp.get("errors").is_none(), "{resp}");

    let (status, headers, body) = app.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE].to_str().expect("ct").starts_with("application/openmetrics-text"));
    let text = String::from_utf8(body).expect("utf8");
    let requests = "sessiond_requests_total";
    assert_eq!(figure(&text, &format!("{requests}{{operation=\"query\",outcome=\"OK\"}}")), 1.0, "{text}");
    let validation = format!("{requests}{{operation=\"query\",outcome=\"GRAPHQL_VALIDATION_FAILED\"}}");
    assert_eq!(figure(&text, &validation), 1.0);
    assert_eq!(figure(&text, &format!("{requests}{{operation=\"unknown\",outcome=\"GRAPHQL_PARSE_FAILED\"}}")), 1.0);
    assert_eq!(figure(&text, &format!("{requests}{{operation=\"mutation\",outcome=\"OK\"}}")), 1.0);
    assert_eq!(
        figure(&text, "sessiond_request_duration_seconds_count{operation=\"query\",outcome=\"OK\"}"),
        1.0,
        "{text}"
    );
    // Read from the database when scraped: the launched session waits (no scheduler yet).
    assert_eq!(figure(&text, "sessiond_sessions_pending{resource_group=\"default\"}"), 1.0, "{text}");
    assert!(figure(&text, "sessiond_db_pool_connections ") >= 1.0, "{text}");
    assert!(text.contains("sessiond_db_pool_connections_in_use"), "{text}");

    // The scheduler's passes, and the open connections of a served app.
    app.start_workers();
    let addr = app.serve().await;
    let mut open = TcpStream::connect(addr).await.expect("connect");
    open.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let mut buf = [0u8; 256];
    let n = open.read(&mut buf).await.expect("answer");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let mut text = String::new();
    for _ in 0..500 {
        let (_, _, body) = app.get("/metrics").await;
        text = String::from_utf8(body).expect("utf8");
        if figure(&text, "sessiond_scheduler_pass_duration_seconds_count") >= 1.0
            && figure(&text, "sessiond_sessions_pending{") == 0.0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(figure(&text, "sessiond_scheduler_pass_duration_seconds_count") >= 1.0, "{text}");
    assert_eq!(figure(&text, "sessiond_sessions_pending{"), 0.0, "scheduled, so no longer pending: {text}");
    assert_eq!(figure(&text, "sessiond_connections_open "), 1.0, "{text}");
}

db_tests!(
    slow_and_idle_connections_are_closed_and_capped,
    requests_over_the_in_flight_cap_are_shed,
    http_refusals_carry_a_json_code,
    metrics_show_requests_connections_the_scheduler_and_the_database,
);
