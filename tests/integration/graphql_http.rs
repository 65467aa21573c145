//! GraphQL over HTTP as clients see it: methods, media types, request errors, limits,
//! request ids, and the offline GraphiQL page.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, error_codes};

const GRAPHQL_RESPONSE: &str = "application/graphql-response+json";

fn post(body: impl Into<String>, content_type: &str, accept: Option<&str>) -> Request<Body> {
    let mut r = Request::post("/graphql")
        .header(header::CONTENT_TYPE, content_type)
        .header(header::AUTHORIZATION, "Bearer demo-alice");
    if let Some(a) = accept {
        r = r.header(header::ACCEPT, a);
    }
    r.body(Body::from(body.into())).expect("request")
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

async fn post_and_get_follow_graphql_over_http(app: TestApp) {
    let q = r#"{"query":"{ viewer { user { email } projects { name } } }"}"#;
    // Media types: graphql-response+json when accepted, else JSON.
    let (status, headers, body) = app.send(post(q, "application/json", Some(GRAPHQL_RESPONSE))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE].to_str().expect("ct").starts_with(GRAPHQL_RESPONSE));
    // An answer is its viewer's own (a signing key, their sessions): no cache keeps it.
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    // Fields come back in the order they were asked for.
    let text = String::from_utf8(body).expect("utf8");
    assert!(text.find("\"user\"") < text.find("\"projects\""), "{text}");
    let (_, headers, _) = app.send(post(q, "application/json; charset=utf-8", None)).await;
    assert!(headers[header::CONTENT_TYPE].to_str().expect("ct").starts_with("application/json"));
    let (status, _, _) = app.send(post(q, "application/json", Some("text/html"))).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);

    // Bodies a browser can send cross-site without a preflight never execute.
    for ct in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let (status, _, _) = app.send(post(q, ct, None)).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}");
    }

    // GET runs queries, never mutations.
    let get = |query: &str| {
        Request::get(format!("/graphql?query={}", query.replace(' ', "%20").replace('{', "%7B").replace('}', "%7D")))
            .header(header::AUTHORIZATION, "Bearer demo-alice")
            .body(Body::empty())
            .expect("request")
    };
    let (status, headers, body) = app.send(get("{ viewer { user { email } } }")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    assert_eq!(json_of(&body)["data"]["viewer"]["user"]["email"], "alice@example.com");
    let (status, headers, _) = app.send(get("mutation { viewer }")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers[header::ALLOW], "POST");
    // `operationName` picks the operation, as over POST.
    let two = "query A { viewer { user { email } } } query B { viewer { user { role } } }";
    let (status, _, body) = app
        .send(
            Request::get(format!(
                "/graphql?{}",
                serde_urlencoded::to_string([("query", two), ("operationName", "B")]).expect("encode")
            ))
            .header(header::AUTHORIZATION, "Bearer demo-alice")
            .body(Body::empty())
            .expect("request"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let resp = json_of(&body);
    assert!(resp["data"]["viewer"]["user"]["role"].is_string(), "{resp}");
    assert!(resp["data"]["viewer"]["user"].get("email").is_none(), "{resp}");
}

async fn request_errors_are_coded_and_do_not_run(app: TestApp) {
    // A document that does not parse, one that does not fit the schema, and a value its type
    // does not take (async-graphql reports that one for the argument and for the variable).
    let cases: [(&str, &[&str]); 6] = [
        ("not json", &["BAD_USER_INPUT"]),
        (r#"[{"query":"{ viewer { user { email } } }"}]"#, &["BAD_USER_INPUT"]),
        (r#"{"query":"{ viewer { "}"#, &["GRAPHQL_PARSE_FAILED"]),
        (r#"{"query":"{ viewer { nope } }"}"#, &["GRAPHQL_VALIDATION_FAILED"]),
        (
            r#"{"query":"query($x: Int!) { viewer { user { email } } }", "variables": {"x": 1}}"#,
            &["GRAPHQL_VALIDATION_FAILED"],
        ),
        (
            r#"{"query":"query($x: Int!) { sessions(projectId: \"p\", first: $x) { totalCount } }", "variables": {"x": "one"}}"#,
            &["BAD_USER_INPUT", "BAD_USER_INPUT"],
        ),
    ];
    for (body, codes) in cases {
        let (status, _, bytes) = app.send(post(body, "application/json", Some(GRAPHQL_RESPONSE))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let resp = json_of(&bytes);
        assert_eq!(error_codes(&resp), codes, "{body}: {resp}");
        assert!(resp.get("data").is_none(), "{body}: nothing ran: {resp}");
        // Legacy JSON clients get the same body, with 200 for GraphQL errors but 400 for a
        // body that is no GraphQL request (GraphQL over HTTP).
        let (status, _, bytes) = app.send(post(body, "application/json", None)).await;
        let not_a_request = body == "not json" || body.starts_with('[');
        assert_eq!(status, if not_a_request { StatusCode::BAD_REQUEST } else { StatusCode::OK }, "{body}");
        assert_eq!(error_codes(&json_of(&bytes)), codes);
    }

    let deep = format!("{{ __schema {{ types {{ {}name{} }} }} }}", "fields { type { ".repeat(12), " } }".repeat(12));
    let resp = app.gql(Some("demo-alice"), &deep, json!({})).await;
    assert_eq!(error_codes(&resp), ["LIMIT_EXCEEDED"], "{resp}");

    // GraphiQL's own introspection query stays within the limits.
    let introspection = "query { __schema { queryType { name } types { name kind fields(includeDeprecated: true) { name args { name type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } } } } }";
    let resp = app.gql(Some("demo-alice"), introspection, json!({})).await;
    assert!(resp.get("errors").is_none(), "{resp}");

    // Fragments that each spread the previous one twice: 2^25 fields once expanded, from
    // about a kilobyte (validation took ~19 s to walk them). Refused before it starts.
    let mut fan_out = String::from("{ viewer { user { ...F25 } } } fragment F0 on User { email } ");
    for i in 1..=25 {
        fan_out.push_str(&format!("fragment F{i} on User {{ ...F{} ...F{} }} ", i - 1, i - 1));
    }
    let resp = app.gql(Some("demo-alice"), &fan_out, json!({})).await;
    assert_eq!(error_codes(&resp), ["LIMIT_EXCEEDED"], "{resp}");
    assert!(resp["errors"][0]["message"].as_str().is_some_and(|m| m.contains("fragments are expanded")), "{resp}");
    // Nested past what the parser reads: a limit, not the client's syntax, and a short
    // answer (the parser's message quotes the offending line, here the whole document).
    for n in [100, 20_000] {
        let nested = format!("{{ viewer {}{} }}", "{ user ".repeat(n), "}".repeat(n));
        let resp = app.gql(Some("demo-alice"), &nested, json!({})).await;
        assert_eq!(error_codes(&resp), ["LIMIT_EXCEEDED"], "{n} levels");
        assert!(resp.to_string().len() < 2_000, "{n} levels: a short answer");
    }
    let long_line = format!("{{ viewer {{ user {{ email }} }} }} {}", "x ".repeat(100_000));
    let resp = app.gql(Some("demo-alice"), &long_line, json!({})).await;
    assert_eq!(error_codes(&resp), ["GRAPHQL_PARSE_FAILED"], "{resp}");
    assert!(resp.to_string().len() < 2_000, "a syntax error quotes at most a little of the line");
    let resp = app.gql(Some("demo-alice"), "{ viewer { user { email } } }", json!({})).await;
    assert!(resp.get("errors").is_none(), "{resp}");

    let huge = format!(
        r#"{{"query":"{{ viewer {{ user {{ email }} }} }}","extensions":{{"pad":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    let (status, _, bytes) = app.send(post(huge, "application/json", None)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let resp = json_of(&bytes);
    assert_eq!(error_codes(&resp), ["LIMIT_EXCEEDED"], "{resp}");
    assert!(resp["errors"][0]["message"].as_str().is_some_and(|m| m.contains("bytes")), "the limit is named: {resp}");
}

/// Every budget is applied before any of the work: the answer is LIMIT_EXCEEDED naming the
/// limit, no statement runs beyond the caller's authentication, and `/healthz` is served
/// meanwhile.
async fn work_is_bounded_before_it_is_done(app: TestApp) {
    let input = json!({"i": crate::support::launch_input("budget", 1.0)});
    let refused = |resp: &Value, limit: &str| {
        assert_eq!(error_codes(resp), ["LIMIT_EXCEEDED"], "{resp}");
        let message = resp["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(message.contains(limit), "the limit is named ({limit}): {resp}");
        assert!(resp.get("data").is_none(), "nothing ran: {resp}");
    };
    // Database-backed aliases: each checkLaunch is an aggregate; 2 000 of them in one
    // request ran for seconds.
    let checks: String = (0..2000).map(|i| format!("c{i}: checkLaunch(input: $i) {{ valid }} ")).collect();
    let checks = format!("query($i: LaunchSessionInput!) {{ {checks} }}");
    let (statements, resp) = app.count_statements(app.gql(Some("demo-alice"), &checks, input.clone())).await;
    refused(&resp, "root fields");
    assert!(statements <= 2, "only the token was read: {statements} statements");
    // The same through a fragment and an inline fragment at the root.
    let spread: String = (0..20).map(|i| format!("c{i}: checkLaunch(input: $i) {{ valid }} ")).collect();
    let spread = format!(
        "query($i: LaunchSessionInput!) {{ ...C ... on Query {{ {spread} }} }} fragment C on Query {{ {spread} }}"
    );
    refused(&app.gql(Some("demo-alice"), &spread, input.clone()).await, "root fields");
    // Within the root cap, each aggregate costs what it reads.
    let counts: String = (0..16)
        .map(|i| format!("n{i}: sessionCounts(projectId: $p) {{ all }} r{i}: resourcePanel(projectId: $p, view: MY_TOTAL) {{ view }} "))
        .collect();
    let counts = format!("query($p: ID!) {{ {counts} }}");
    let p = json!({"p": crate::support::project("default/default")});
    // The message names the budget (async-graphql's own says only "Query is too complex.").
    refused(&app.gql(Some("demo-alice"), &counts, p.clone()).await, "too complex: it costs over the limit of 100000");
    // A list's size multiplies what each item selects.
    let nested = "query($p: ID!) { sessions(projectId: $p, first: 100) { edges { node {
        launchGroup { sessions(first: 100) { totalCount } } } } } }";
    refused(&app.gql(Some("demo-alice"), nested, p.clone()).await, "too complex");
    // Selections nested past the depth budget, each list of size one (cheap).
    let mut deep = String::from("id");
    for _ in 0..6 {
        deep = format!("launchGroup {{ sessions(first: 1) {{ edges {{ node {{ {deep} }} }} }} }}");
    }
    let deep = format!("query($p: ID!) {{ sessions(projectId: $p, first: 1) {{ edges {{ node {{ {deep} }} }} }} }}");
    refused(&app.gql(Some("demo-alice"), &deep, p.clone()).await, "nested too deep: over the limit of 24 levels");
    // A cycle of fragments that spread each other twice is refused before anything walks
    // it (async-graphql's recursion check would take 2^depth steps).
    let cycle = "{ viewer { user { ...A } } } fragment A on User { email ...B ...B } fragment B on User { ...A ...A }";
    let resp = app.gql(Some("demo-alice"), cycle, json!({})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert!(resp["errors"][0]["message"].as_str().unwrap_or_default().contains("spreads itself"), "{resp}");
    // Aliases deep in the document.
    let aliased: String = (0..201).map(|i| format!("e{i}: email ")).collect();
    refused(
        &app.gql(Some("demo-alice"), &format!("{{ viewer {{ user {{ {aliased} }} }} }}"), json!({})).await,
        "aliases",
    );

    // What the page asks for in one request fits: its list, counts, panels and launcher.
    let page = "query($p: ID!) {
        viewer { user { email } projects { name } settings { resourcePanelView sessionListColumns { column visible } } }
        sessions(projectId: $p, first: 100) { totalCount edges { cursor node { id name status type elapsedSeconds
          owner { email } project { name } resourceGroup { name } image { name } requestedSlots { cpu memory accelerators { slot amount } }
          pendingReasons { code message } queuePosition statusTransitions { toStatus occurredAt } apps { name } } } pageInfo { hasNextPage endCursor } }
        sessionCounts(projectId: $p) { running finished all byType { type count } }
        mine: resourcePanel(projectId: $p, view: MY_TOTAL) { slots { slot used limit } }
        group: resourcePanel(projectId: $p, view: TOTAL_IN_RESOURCE_GROUP) { slots { slot used limit } }
        resourceGroups(projectId: $p) { name } images { name } }";
    let resp = app.gql(Some("demo-alice"), page, p).await;
    assert!(resp.get("errors").is_none(), "{resp}");

    // While budget-breaking requests arrive, the health check is answered.
    let mut fan_out = String::from("{ viewer { user { ...F28 } } } fragment F0 on User { email } ");
    for i in 1..=28 {
        fan_out.push_str(&format!("fragment F{i} on User {{ ...F{} ...F{} }} ", i - 1, i - 1));
    }
    let attacks = futures_util::future::join_all((0..4).map(|i| {
        let (query, vars) = if i % 2 == 0 { (fan_out.as_str(), json!({})) } else { (checks.as_str(), input.clone()) };
        app.gql(Some("demo-alice"), query, vars)
    }));
    let (answers, (health, _, _)) = tokio::join!(attacks, app.get("/healthz"));
    assert_eq!(health, StatusCode::OK);
    for resp in answers {
        assert_eq!(error_codes(&resp), ["LIMIT_EXCEEDED"], "{resp}");
    }
}

/// graphql-http's server audits (npm, pinned in `tests/http-audit/package-lock.json`): every
/// MUST and SHOULD of GraphQL over HTTP, with no failure and no warning.
async fn graphql_over_http_audits_pass(mut app: TestApp) {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/http-audit");
    if !crate::support::node_package(&dir, "graphql-http", "the graphql-http audits") {
        return;
    }
    let addr = app.serve().await;
    let out = tokio::process::Command::new("node")
        .arg("audit.mjs")
        .args([format!("http://{addr}/graphql"), "demo-alice".into()])
        .current_dir(&dir)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run node");
    assert!(out.status.success(), "the audit ran: {}", String::from_utf8_lossy(&out.stderr));
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON result per line"))
        .collect();
    assert!(results.len() > 20, "every audit ran: {results:?}");
    let not_ok: Vec<&Value> = results.iter().filter(|r| r["status"] != "ok").collect();
    assert!(not_ok.is_empty(), "audits not passed: {not_ok:#?}");
}

/// GraphiQL in a real browser: Debian's chromium, driven by playwright-core (pinned in
/// `tests/browser/package-lock.json`, no browser download), with no network beyond the
/// server. It runs a query with alice's token and sees her email; the screenshot is kept in
/// `target/test-artifacts/`. Without chromium the test is skipped with a NOTICE, unless
/// `SESSIOND_REQUIRE_BROWSER=1` (set by `.ci/run`, which installs it).
async fn graphiql_answers_in_a_real_browser(mut app: TestApp) {
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "playwright-core", "the browser check") {
        return;
    }
    let artifacts = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifact directory");
    let screenshot = artifacts.join(format!("graphiql-{:?}.png", app.backend).to_lowercase());
    let _ = std::fs::remove_file(&screenshot);
    let addr = app.serve().await;
    let args = [format!("http://{addr}"), "demo-alice".into(), screenshot.display().to_string()];
    let report = crate::support::browser_script("graphiql.mjs", &args, &chromium).await;
    let result = report["result"].as_str().unwrap_or_default();
    assert!(result.contains("alice@example.com"), "{report}");
    assert_eq!(report["blocked"], json!([]), "the page reached for something beyond the server");
    assert!(std::fs::metadata(&screenshot).is_ok_and(|m| m.len() > 1000), "a screenshot is kept");
}

async fn every_response_has_a_request_id(app: TestApp) {
    let (_, h1, _) = app.get("/healthz").await;
    let (_, h2, _) = app.send(post(r#"{"query":"{ viewer { user { email } } }"}"#, "application/json", None)).await;
    let id1 = h1["x-request-id"].to_str().expect("id");
    let id2 = h2["x-request-id"].to_str().expect("id");
    assert_ne!(id1, id2);
    assert_eq!(id2.len(), 36, "a UUID: {id2}");
}

async fn graphiql_works_offline(app: TestApp) {
    let (status, headers, body) = app.get("/graphiql").await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE].to_str().expect("ct").starts_with("text/html"));
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().expect("csp");
    assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
    let page = String::from_utf8(body).expect("utf8");
    assert!(!page.contains("http:") && !page.contains("https:") && !page.contains("\"//"), "an external URL: {page}");
    assert!(page.contains("id=\"token\""), "a place for the bearer token");

    // Every script and stylesheet the page loads is ours and is served.
    let mut assets = 0;
    for attr in ["src=\"", "href=\""] {
        for piece in page.split(attr).skip(1) {
            let url = piece.split('"').next().expect("quoted");
            assert!(url.starts_with("/graphiql/"), "{url}");
            let (status, headers, body) = app.get(url).await;
            assert_eq!(status, StatusCode::OK, "{url}");
            assert!(body.len() > 500, "{url} is empty");
            let ct = headers[header::CONTENT_TYPE].to_str().expect("ct");
            assert!(ct.starts_with("text/javascript") || ct.starts_with("text/css"), "{url}: {ct}");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{url}");
            assets += 1;
        }
    }
    assert_eq!(assets, 6, "react, react-dom, graphiql js and css, the graphql-ws client, and our start-up script");
    let (_, _, init) = app.get("/graphiql/init.js").await;
    let init = String::from_utf8(init).expect("utf8");
    assert!(init.contains("'/graphql'") && init.contains("Authorization"), "talks to our endpoint with the token");
    // The token is kept for the tab only, as the Sessions page keeps it.
    assert!(init.contains("sessionStorage") && !init.contains("localStorage"), "{init}");
    assert!(
        init.contains("'/graphql/ws'") && init.contains("graphqlWs.createClient") && init.contains("authorization"),
        "subscribes over our WebSocket with the token"
    );
    let (status, _, _) = app.get("/graphiql/nope.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

db_tests!(
    post_and_get_follow_graphql_over_http,
    request_errors_are_coded_and_do_not_run,
    work_is_bounded_before_it_is_done,
    graphql_over_http_audits_pass,
    graphiql_answers_in_a_real_browser,
    every_response_has_a_request_id,
    graphiql_works_offline,
);
