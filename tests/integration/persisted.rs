//! Automatic persisted queries (Apollo's protocol), on both databases: a hash alone is
//! answered PERSISTED_QUERY_NOT_FOUND, the client's fallback (document and hash) runs and is
//! kept, and the hash alone is then answered; a hash that is not the document's is refused;
//! a kept mutation is not run by GET.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::db_tests;
use crate::support::TestApp;

const QUERY: &str = "query Me { viewer { user { email } } }";

fn hash(query: &str) -> String {
    Sha256::digest(query.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

async fn post(app: &TestApp, body: Value) -> (StatusCode, Value) {
    let req = Request::post("/graphql")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, "Bearer demo-alice")
        .body(Body::from(body.to_string()))
        .expect("a request");
    let (status, _, bytes) = app.send(req).await;
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&bytes))))
}

fn code(v: &Value) -> &str {
    v["errors"][0]["extensions"]["code"].as_str().unwrap_or("")
}

async fn a_hash_alone_runs_the_document_sent_before(app: TestApp) {
    let persisted = json!({"persistedQuery": {"version": 1, "sha256Hash": hash(QUERY)}});
    let (status, first) = post(&app, json!({"extensions": persisted})).await;
    assert_eq!((status, code(&first)), (StatusCode::OK, "PERSISTED_QUERY_NOT_FOUND"), "{first}");
    let (status, fallback) = post(&app, json!({"query": QUERY, "extensions": persisted})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fallback["data"]["viewer"]["user"]["email"], "alice@example.com", "{fallback}");
    let (status, again) = post(&app, json!({"extensions": persisted})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, fallback, "the hash alone is answered as the document was");

    // A GET with the hash alone, as Apollo's link sends queries.
    let uri = format!("/graphql?extensions={}", urlencode(&persisted.to_string()));
    let req =
        Request::get(uri).header(header::AUTHORIZATION, "Bearer demo-alice").body(Body::empty()).expect("a request");
    let (status, _, bytes) = app.send(req).await;
    let got: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!((status, &got), (StatusCode::OK, &fallback));

    // A hash that is not the document's; another version.
    let wrong = json!({"persistedQuery": {"version": 1, "sha256Hash": hash("query { viewer { id } }")}});
    let (status, refused) = post(&app, json!({"query": QUERY, "extensions": wrong})).await;
    assert_eq!((status, code(&refused)), (StatusCode::BAD_REQUEST, "BAD_USER_INPUT"), "{refused}");
    let v2 = json!({"persistedQuery": {"version": 2, "sha256Hash": hash(QUERY)}});
    assert_eq!(code(&post(&app, json!({"extensions": v2})).await.1), "PERSISTED_QUERY_NOT_SUPPORTED");

    // A mutation kept by POST is still not run by GET.
    let mutation =
        "mutation { updateSessionListColumns(columns: [{column: NAME, visible: true}]) { resourcePanelView } }";
    let persisted = json!({"persistedQuery": {"version": 1, "sha256Hash": hash(mutation)}});
    post(&app, json!({"query": mutation, "extensions": persisted})).await;
    let uri = format!("/graphql?extensions={}", urlencode(&persisted.to_string()));
    let req =
        Request::get(uri).header(header::AUTHORIZATION, "Bearer demo-alice").body(Body::empty()).expect("a request");
    assert_eq!(app.send(req).await.0, StatusCode::METHOD_NOT_ALLOWED);
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

db_tests!(a_hash_alone_runs_the_document_sent_before);
