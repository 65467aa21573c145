//! `GET /export/sessions.csv`: the same rows as the list, the columns of the view, CSV
//! quoting and spreadsheet safety, and every error status.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, project, session_row};

/// GETs an export as `token` with the query string `query`.
pub(crate) async fn export(
    app: &TestApp,
    token: Option<&str>,
    query: &str,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut req = Request::get(format!("/export/sessions.csv?{query}"));
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    app.send(req.body(Body::empty()).expect("request")).await
}

/// The records of a CSV body (header first).
pub(crate) fn records(body: &[u8]) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(body)
        .records()
        .map(|r| r.expect("a CSV record").iter().map(str::to_owned).collect())
        .collect()
}

fn default_project() -> String {
    project("default/default")
}

/// The names of every session the GraphQL list gives for these arguments, in order.
async fn list_names(app: &TestApp, token: &str, scope: &str, filter: Value, order: Value) -> Vec<String> {
    let query = "query($p: ID!, $scope: SessionScope, $f: SessionFilter, $o: [SessionOrder!], $after: String) {
      sessions(projectId: $p, scope: $scope, filter: $f, orderBy: $o, first: 500, after: $after) {
        edges { node { name } } pageInfo { hasNextPage endCursor } } }";
    let mut names = Vec::new();
    let mut after = Value::Null;
    loop {
        let vars = json!({"p": default_project(), "scope": scope, "f": filter, "o": order, "after": after});
        let resp = app.gql(Some(token), query, vars).await;
        let page = &resp["data"]["sessions"];
        let edges = page["edges"].as_array().unwrap_or_else(|| panic!("{resp}"));
        names.extend(edges.iter().map(|e| e["node"]["name"].as_str().expect("name").to_owned()));
        if page["pageInfo"]["hasNextPage"] != true {
            return names;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

async fn an_export_holds_exactly_the_rows_of_the_list(app: TestApp) {
    app.generate(1_200, 7).await;
    let p = default_project();
    let cases: [(&str, &str, Value, Value, &str); 5] = [
        ("demo-alice", "MINE", json!({}), json!(null), ""),
        ("demo-admin", "PROJECT", json!({}), json!(null), ""),
        (
            "demo-admin",
            "PROJECT",
            json!({"tab": "FINISHED", "types": ["BATCH", "INTERACTIVE"]}),
            json!([{"field": "NAME", "direction": "ASC"}]),
            "&tab=FINISHED&types=BATCH,INTERACTIVE&orderBy=NAME_ASC",
        ),
        (
            "demo-bob",
            "MINE",
            json!({"tab": "RUNNING"}),
            json!([{"field": "ELAPSED", "direction": "DESC"}]),
            "&tab=RUNNING&orderBy=ELAPSED_DESC",
        ),
        (
            "demo-admin",
            "PROJECT",
            json!({"nameContains": "a", "ownerEmail": "bob@example.com"}),
            json!(null),
            "&nameContains=a&ownerEmail=bob%40example.com",
        ),
    ];
    for (token, scope, filter, order, extra) in cases {
        let (status, headers, body) =
            export(&app, Some(token), &format!("projectId={p}&scope={scope}&columns=NAME{extra}")).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert_eq!(headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");
        let rows = records(&body);
        assert_eq!(rows[0], ["Name"]);
        let exported: Vec<String> = rows[1..].iter().map(|r| r[0].clone()).collect();
        let listed = list_names(&app, token, scope, filter.clone(), order.clone()).await;
        assert!(!listed.is_empty(), "{token} {scope} {filter}: the case tests something");
        assert_eq!(exported, listed, "{token} {scope} {filter} {order}");
    }
}

async fn mine_holds_only_the_callers_sessions_whatever_the_role(app: TestApp) {
    app.generate(400, 3).await;
    let p = default_project();
    for (token, email) in
        [("demo-alice", "alice@example.com"), ("demo-bob", "bob@example.com"), ("demo-admin", "admin@example.com")]
    {
        let (status, _, body) = export(&app, Some(token), &format!("projectId={p}&columns=OWNER,NAME")).await;
        assert_eq!(status, StatusCode::OK);
        let rows = records(&body);
        assert_eq!(rows[0], ["Owner", "Name"]);
        assert!(rows[1..].iter().all(|r| r[0] == email), "{token}: only own sessions");
        let listed = list_names(&app, token, "MINE", json!({}), json!(null)).await;
        assert_eq!(rows.len() - 1, listed.len(), "{token}");
    }
}

async fn columns_come_from_the_settings_or_the_request(app: TestApp) {
    let p = default_project();
    // Default view: name, status, the accelerators the project's groups serve, CPU,
    // memory, elapsed time (as seconds and as text).
    let (_, headers, body) = export(&app, Some("demo-alice"), &format!("projectId={p}")).await;
    let disposition = headers[header::CONTENT_DISPOSITION].to_str().expect("ascii");
    let name = disposition.strip_prefix("attachment; filename=\"sessions-default-").expect(disposition);
    assert!(name.len() == "20261129T235959Z.csv\"".len() && name.ends_with("Z.csv\""), "{disposition}");
    let header_row = records(&body)[0].clone();
    assert_eq!(
        header_row,
        ["Name", "Status", "Accelerator cuda.device", "CPU (cores)", "Memory (GiB)", "Elapsed (s)", "Elapsed"]
    );
    // The user's own columns, in their order.
    let set = "mutation($c: [SessionColumnInput!]!) { updateSessionListColumns(columns: $c) { sessionListColumns { column } } }";
    let columns = json!([
        {"column": "OWNER", "visible": true}, {"column": "NAME", "visible": true},
        {"column": "CPU", "visible": false}, {"column": "CREATED_AT", "visible": true},
    ]);
    let resp = app.gql(Some("demo-alice"), set, json!({"c": columns})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let (_, _, body) = export(&app, Some("demo-alice"), &format!("projectId={p}")).await;
    let first = records(&body)[0].clone();
    assert_eq!(&first[..3], ["Owner", "Name", "Created at (UTC)"]);
    assert!(!first.contains(&"CPU (cores)".to_owned()));
    // `columns` wins over the settings.
    let (_, _, body) = export(&app, Some("demo-alice"), &format!("projectId={p}&columns=STATUS,PRIORITY")).await;
    assert_eq!(records(&body)[0], ["Status", "Priority"]);
    // Everyone's sessions show whose each is, right after the name, as the page's list does.
    let (_, _, body) = export(&app, Some("demo-admin"), &format!("projectId={p}&scope=PROJECT")).await;
    assert_eq!(&records(&body)[0][..3], ["Name", "Owner", "Status"]);
    let shown = app
        .gql(
            Some("demo-admin"),
            "{ viewer { settings { sessionListColumns(scope: PROJECT) { column visible } } } }",
            json!({}),
        )
        .await;
    let visible: Vec<&str> = shown["data"]["viewer"]["settings"]["sessionListColumns"]
        .as_array()
        .unwrap_or_else(|| panic!("{shown}"))
        .iter()
        .filter(|c| c["visible"] == true)
        .map(|c| c["column"].as_str().expect("a column"))
        .collect();
    assert_eq!(visible, ["NAME", "OWNER", "STATUS", "ACCELERATORS", "CPU", "MEMORY", "ELAPSED"]);
}

async fn cells_are_quoted_and_formulas_neutralised(app: TestApp) {
    use sea_orm::{ActiveModelTrait, Set};
    let mut row = session_row(
        "alice@example.com",
        "default/default",
        "quoted-1",
        "ERROR",
        json!({"cpu": 2.0, "mem": 3_221_225_472_i64}),
    );
    row.status_info = Set(Some("=HYPERLINK(\"http://x\",\"a, b\")\nsecond line".to_owned()));
    row.insert(&app.db).await.expect("insert");
    let mut row = session_row(
        "alice@example.com",
        "default/default",
        "quoted-2",
        "ERROR",
        json!({"cpu": 0.5, "mem": 1_i64 << 30}),
    );
    row.status_info = Set(Some("@cmd|' /C calc'!A0".to_owned()));
    row.insert(&app.db).await.expect("insert");
    let p = default_project();
    let (status, _, body) = export(
        &app,
        Some("demo-alice"),
        &format!("projectId={p}&columns=NAME,STATUS_INFO,CPU,MEMORY&orderBy=NAME_ASC"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body.clone()).expect("utf8");
    assert!(text.contains("\"'=HYPERLINK(\"\"http://x\"\",\"\"a, b\"\")\nsecond line\""), "{text}");
    let rows = records(&body);
    assert_eq!(rows[1], ["quoted-1", "'=HYPERLINK(\"http://x\",\"a, b\")\nsecond line", "2", "3.00"]);
    assert_eq!(rows[2], ["quoted-2", "'@cmd|' /C calc'!A0", "0.5", "1.00"]);
    assert!(text.ends_with("\r\n"));
}

async fn every_error_has_its_status_and_a_json_body(app: TestApp) {
    let p = default_project();
    let cases: Vec<(Option<&str>, String, StatusCode, &str)> = vec![
        (None, format!("projectId={p}"), StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
        (Some("nope"), format!("projectId={p}"), StatusCode::UNAUTHORIZED, "UNAUTHENTICATED"),
        (Some("demo-alice"), format!("projectId={p}&scope=PROJECT"), StatusCode::FORBIDDEN, "FORBIDDEN"),
        (Some("demo-carol"), format!("projectId={p}"), StatusCode::NOT_FOUND, "NOT_FOUND"),
        (Some("demo-alice"), "projectId=garbage".to_owned(), StatusCode::NOT_FOUND, "NOT_FOUND"),
        (Some("demo-alice"), String::new(), StatusCode::BAD_REQUEST, "BAD_USER_INPUT"),
        (Some("demo-alice"), format!("projectId={p}&columns=NAME,NOPE"), StatusCode::BAD_REQUEST, "BAD_USER_INPUT"),
        (Some("demo-alice"), format!("projectId={p}&columns=NAME,NAME"), StatusCode::BAD_REQUEST, "BAD_USER_INPUT"),
        (
            Some("demo-alice"),
            format!("projectId={p}&createdAfter=yesterday"),
            StatusCode::BAD_REQUEST,
            "BAD_USER_INPUT",
        ),
        (Some("demo-alice"), format!("projectId={p}&orderBy=NAME_SIDEWAYS"), StatusCode::BAD_REQUEST, "BAD_USER_INPUT"),
        (Some("demo-alice"), format!("projectId={p}&colums=NAME"), StatusCode::BAD_REQUEST, "BAD_USER_INPUT"),
        (Some("demo-alice"), format!("projectId={p}&scope=MINE&scope=MINE"), StatusCode::BAD_REQUEST, "BAD_USER_INPUT"),
        (
            Some("demo-alice"),
            format!("projectId={p}&ownerEmail=bob%40example.com"),
            StatusCode::BAD_REQUEST,
            "BAD_USER_INPUT",
        ),
    ];
    for (token, query, status, code) in cases {
        let (got, headers, body) = export(&app, token, &query).await;
        assert_eq!(got, status, "{query}: {}", String::from_utf8_lossy(&body));
        assert!(headers[header::CONTENT_TYPE].to_str().expect("ct").starts_with("application/json"), "{query}");
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}

const LINK: &str = "query($p: ID!, $scope: SessionScope, $f: SessionFilter, $c: [SessionColumnKey!]) {
  sessionExportUrl(projectId: $p, scope: $scope, filter: $f, columns: $c) }";

async fn a_signed_link_downloads_without_a_header_for_a_minute(app: TestApp) {
    use sea_orm::ConnectionTrait;
    // The signing key is made when the server first starts, before any link is asked for.
    let stmt = sea_orm::Statement::from_string(app.db.get_database_backend(), "SELECT COUNT(*) AS n FROM signing_keys");
    let row = app.db.query_one_raw(stmt).await.expect("count").expect("a row");
    assert_eq!(row.try_get::<i64>("", "n").expect("n"), 1, "one signing key, stored at start");
    app.generate(200, 5).await;
    let p = default_project();
    let vars = json!({"p": p, "scope": "PROJECT", "f": {"tab": "FINISHED"}, "c": ["NAME", "STATUS", "OWNER"]});
    let resp = app.gql(Some("demo-admin"), LINK, vars).await;
    let url = resp["data"]["sessionExportUrl"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let path_and_query = url.strip_prefix("/export/sessions.csv?").expect("a path on this server").to_owned();
    let (status, _, by_link) = export(&app, None, &path_and_query).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&by_link));
    let (_, _, by_header) = export(
        &app,
        Some("demo-admin"),
        &format!("projectId={p}&scope=PROJECT&tab=FINISHED&columns=NAME,STATUS,OWNER"),
    )
    .await;
    assert_eq!(by_link, by_header, "the link downloads what the same request with a header does");
    assert!(records(&by_link).len() > 1);
    // With the signer's own header it works too; with another user's it does not.
    assert_eq!(export(&app, Some("demo-admin"), &path_and_query).await.0, StatusCode::OK);
    assert_eq!(export(&app, Some("demo-bob"), &path_and_query).await.0, StatusCode::FORBIDDEN);
    // Any change to the link breaks it.
    for (from, to) in
        [("scope=PROJECT", "scope=MINE"), ("tab=FINISHED", "tab=RUNNING"), ("columns=NAME", "columns=AGENT")]
    {
        let altered = path_and_query.replace(from, to);
        assert_ne!(altered, path_and_query);
        let (status, _, body) = export(&app, None, &altered).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{from} → {to}");
        assert_eq!(serde_json::from_slice::<Value>(&body).expect("JSON")["error"]["code"], "FORBIDDEN");
    }
    let forged = format!("{}x", path_and_query);
    assert_eq!(export(&app, None, &forged).await.0, StatusCode::FORBIDDEN);
    // A link signed more than a minute ago has expired.
    let viewer = sessiond::domain::directory::auth::authenticate(&app.db, "demo-admin").await.expect("admin");
    let request = sessiond::domain::sessions::export::ExportRequest {
        project_id: sessiond::domain::directory::seed::demo_project_id("default/default"),
        scope: sessiond::domain::sessions::visibility::SessionScope::Project,
        filter: Default::default(),
        orders: vec![sessiond::domain::sessions::SessionOrder::DEFAULT],
        columns: None,
    };
    let past = chrono::Utc::now() - chrono::TimeDelta::seconds(61);
    let signature = sessiond::domain::sessions::export::sign(&app.db, &viewer, &request, past).await.expect("sign");
    let old = sessiond::http::export::query::link(&request, &signature);
    let (status, _, _) = export(&app, None, old.strip_prefix("/export/sessions.csv?").expect("path")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "expired");
    let fresh =
        sessiond::domain::sessions::export::sign(&app.db, &viewer, &request, chrono::Utc::now()).await.expect("sign");
    let (status, _, _) =
        export(&app, None, sessiond::http::export::query::link(&request, &fresh).split_once('?').expect("q").1).await;
    assert_eq!(status, StatusCode::OK, "the same request signed now works");
    // No link for what the list would refuse.
    let resp = app.gql(Some("demo-carol"), LINK, json!({"p": p})).await;
    assert_eq!(crate::support::error_codes(&resp), ["NOT_FOUND"], "{resp}");
    let resp = app.gql(Some("demo-alice"), LINK, json!({"p": p, "scope": "PROJECT"})).await;
    assert_eq!(crate::support::error_codes(&resp), ["FORBIDDEN"], "{resp}");
}

/// Every column of every row says what the list says of that session: the export reads its
/// own narrow selection of columns, and formats them itself.
async fn every_cell_says_what_the_list_shows(app: TestApp) {
    app.generate(400, 13).await;
    let p = default_project();
    let all = "NAME,STATUS,ACCELERATORS,CPU,MEMORY,ELAPSED,TYPE,IMAGE,RESOURCE_GROUP,OWNER,PROJECT,CREATED_AT,\
               STARTED_AT,TERMINATED_AT,CLUSTER_SIZE,STATUS_INFO,RESULT,AGENT,PRIORITY,QUEUE_POSITION";
    let (status, _, body) =
        export(&app, Some("demo-admin"), &format!("projectId={p}&scope=PROJECT&orderBy=NAME_ASC&columns={all}")).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let rows = records(&body);
    // Each column alone reads what it needs by itself, and gives the same cells.
    for key in all.split(',') {
        let (_, _, alone) =
            export(&app, Some("demo-admin"), &format!("projectId={p}&scope=PROJECT&orderBy=NAME_ASC&columns={key}"))
                .await;
        let alone = records(&alone);
        let from = rows[0].iter().position(|t| *t == alone[0][0]).unwrap_or_else(|| panic!("{key}: {:?}", alone[0]));
        let width = alone[0].len();
        let terminated = rows[0].iter().position(|t| t == "Terminated at (UTC)").expect("a column");
        // Elapsed time of a live session grows between the two exports.
        let compared = |i: usize| key != "ELAPSED" || i == 0 || !rows[i][terminated].is_empty();
        let together: Vec<Vec<String>> = rows.iter().map(|r| r[from..from + width].to_vec()).collect();
        assert_eq!(alone.len(), together.len(), "{key}");
        for (i, (a, t)) in alone.iter().zip(&together).enumerate().filter(|(i, _)| compared(*i)) {
            assert_eq!(a, t, "{key}, row {i}");
        }
    }
    let query = "query($p: ID!) { sessions(projectId: $p, scope: PROJECT, orderBy: [{field: NAME, direction: ASC}], first: 500) {
        pageInfo { hasNextPage }
        edges { node { name status type clusterSize statusInfo result agent priority queuePosition elapsedSeconds
          createdAt startedAt terminatedAt image { name } resourceGroup { name } owner { email } project { name }
          requestedSlots { cpu memory accelerators { slot amount } } } } } }";
    let resp = app.gql(Some("demo-admin"), query, json!({"p": p})).await;
    assert_eq!(resp["data"]["sessions"]["pageInfo"]["hasNextPage"], false, "{resp}");
    let listed = resp["data"]["sessions"]["edges"].as_array().unwrap_or_else(|| panic!("{resp}"));
    assert_eq!(rows.len() - 1, listed.len());
    assert!(listed.iter().any(|e| e["node"]["terminatedAt"].is_null()), "live sessions too");
    let titles = &rows[0];
    let at = |title: &str| titles.iter().position(|t| t == title).unwrap_or_else(|| panic!("no column {title}"));
    let accelerators: Vec<(usize, String)> = titles
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.strip_prefix("Accelerator ").map(|slot| (i, slot.to_owned())))
        .collect();
    assert!(!accelerators.is_empty(), "{titles:?}");
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let seconds = |t: &str| chrono::DateTime::parse_from_rfc3339(t).map(|t| t.timestamp()).ok();
    for (row, edge) in rows[1..].iter().zip(listed) {
        let s = &edge["node"];
        let cell = |title: &str| row[at(title)].as_str();
        let plain = [
            ("Name", &s["name"]),
            ("Status", &s["status"]),
            ("Type", &s["type"]),
            ("Image", &s["image"]["name"]),
            ("Resource group", &s["resourceGroup"]["name"]),
            ("Owner", &s["owner"]["email"]),
            ("Project", &s["project"]["name"]),
            ("Cluster size", &s["clusterSize"]),
            ("Status info", &s["statusInfo"]),
            ("Result", &s["result"]),
            ("Agent", &s["agent"]),
            ("Priority", &s["priority"]),
            ("Queue position", &s["queuePosition"]),
        ];
        for (title, value) in plain {
            assert_eq!(cell(title).trim_start_matches('\''), text(value), "{title} of {s}");
        }
        for (title, value) in [
            ("Created at (UTC)", "createdAt"),
            ("Started at (UTC)", "startedAt"),
            ("Terminated at (UTC)", "terminatedAt"),
        ] {
            assert_eq!(seconds(cell(title)), s[value].as_str().and_then(seconds), "{title} of {s}");
        }
        let slots = &s["requestedSlots"];
        assert_eq!(cell("CPU (cores)").parse::<f64>().ok(), slots["cpu"].as_f64(), "{s}");
        let bytes: f64 = text(&slots["memory"]).parse().expect("bytes");
        assert_eq!(cell("Memory (GiB)"), format!("{:.2}", bytes / f64::from(1u32 << 30)), "{s}");
        for (i, slot) in &accelerators {
            let amount = slots["accelerators"]
                .as_array()
                .and_then(|a| a.iter().find(|x| x["slot"] == slot.as_str()))
                .and_then(|x| x["amount"].as_f64())
                .unwrap_or(0.0);
            assert_eq!(row[*i].parse::<f64>().ok(), Some(amount), "{slot} of {s}");
        }
        // Elapsed: the export and the list measure against their own instants.
        let elapsed: i64 = cell("Elapsed (s)").parse().expect("seconds");
        let listed_elapsed = s["elapsedSeconds"].as_i64().expect("elapsed");
        if s["terminatedAt"].is_null() {
            assert!((elapsed - listed_elapsed).abs() <= 5, "{elapsed} vs {listed_elapsed}");
        } else {
            assert_eq!(elapsed, listed_elapsed, "{s}");
        }
        let (days, clock) = cell("Elapsed").split_once("d ").unwrap_or(("0", cell("Elapsed")));
        let hms: Vec<i64> = clock.split(':').map(|n| n.parse().expect("a number")).collect();
        let days: i64 = days.parse().expect("days");
        assert_eq!(days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2], elapsed, "{row:?}");
    }
}

async fn a_download_dropped_midway_stops_reading(app: TestApp) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    // Several thousand in the project: at least five batches of 2 000, more than the reader
    // runs ahead (one batch waiting, one being read).
    app.generate(20_000, 11).await;
    let p = default_project();
    let request = || {
        Request::get(format!("/export/sessions.csv?projectId={p}&scope=PROJECT&columns=NAME,OWNER"))
            .header(header::AUTHORIZATION, "Bearer demo-admin")
            .body(Body::empty())
            .expect("request")
    };
    let statements = || app.statements.load(std::sync::atomic::Ordering::SeqCst);
    // All of it: the header, then one chunk per batch.
    let before = statements();
    let mut body = app.router.clone().oneshot(request()).await.expect("response").into_body();
    let mut chunks = 0;
    while let Some(frame) = body.frame().await {
        chunks += usize::from(frame.expect("frame").is_data());
    }
    let whole = statements() - before;
    assert!(chunks >= 6, "a header and at least five batches: {chunks}");
    // The header and the first batch only, then the client goes away.
    let before = statements();
    let mut body = app.router.clone().oneshot(request()).await.expect("response").into_body();
    for _ in 0..2 {
        body.frame().await.expect("a chunk").expect("frame");
    }
    drop(body);
    // The reader stops at its next step; one already under way may finish (on a loaded
    // machine, later): the count settles, then stays.
    let mut read = statements() - before;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = statements() - before;
        if now == read {
            break;
        }
        read = now;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(statements() - before, read, "nothing more is read once the download is gone");
    assert!(read < whole, "the first batch costs less than all of them ({read} vs {whole})");
}

/// Every filter field the domain declares goes through the list, the export and a signed
/// link alike: the export holds exactly the list's rows, the link carries the field and
/// downloads the same, and a link whose field is changed or dropped is refused. A value
/// the list refuses, the export refuses with the same code.
async fn every_declared_filter_goes_through_the_list_the_export_and_a_link(app: TestApp) {
    use sessiond::domain::error::camel;
    use sessiond::domain::sessions::SessionFilter;
    app.generate(600, 17).await;
    let p = default_project();
    let all = app
        .gql(
            Some("demo-admin"),
            "query($p: ID!) { sessions(projectId: $p, scope: PROJECT, first: 500, orderBy: [{field: CREATED_AT, direction: ASC}]) {
               nodes { createdAt launchGroup { id } } } }",
            json!({"p": p}),
        )
        .await;
    let nodes = all["data"]["sessions"]["nodes"].as_array().unwrap_or_else(|| panic!("{all}")).clone();
    let created = |at: usize| nodes[at]["createdAt"].as_str().expect("createdAt").to_owned();
    let mut groups: Vec<String> =
        nodes.iter().filter_map(|n| n["launchGroup"]["id"].as_str().map(str::to_owned)).collect();
    groups.dedup();
    assert!(groups.len() >= 2, "two launch groups to tell apart");
    let (early, late) = (created(nodes.len() / 3), created(2 * nodes.len() / 3));
    for field in SessionFilter::FIELDS {
        // A value that keeps some sessions, as the list takes it and as the export's text,
        // and another text to change a link with.
        let (value, text, other): (Value, String, String) = match *field {
            "types" => (json!(["BATCH"]), "BATCH".into(), "INTERACTIVE".into()),
            "tab" => (json!("FINISHED"), "FINISHED".into(), "RUNNING".into()),
            "statuses" => (json!(["TERMINATED", "RUNNING"]), "TERMINATED,RUNNING".into(), "TERMINATED".into()),
            "name_contains" => (json!("a"), "a".into(), "b".into()),
            "resource_group" => (json!("default"), "default".into(), "local".into()),
            "owner_email" => (json!("bob@example.com"), "bob@example.com".into(), "alice@example.com".into()),
            "launch_group_id" => (json!(groups[0]), groups[0].clone(), groups[1].clone()),
            "created_after" => (json!(late), late.clone(), early.clone()),
            "created_before" => (json!(early), early.clone(), late.clone()),
            other => panic!("no case for the filter field `{other}`: add one"),
        };
        let param = camel(field);
        let filter = json!({ param.clone(): value });
        let listed = list_names(&app, "demo-admin", "PROJECT", filter.clone(), Value::Null).await;
        assert!(!listed.is_empty(), "{field}: the case keeps some sessions");
        let query = serde_urlencoded::to_string([
            ("projectId", p.as_str()),
            ("scope", "PROJECT"),
            ("columns", "NAME"),
            (param.as_str(), text.as_str()),
        ])
        .expect("a query");
        let (status, _, body) = export(&app, Some("demo-admin"), &query).await;
        assert_eq!(status, StatusCode::OK, "{field}: {}", String::from_utf8_lossy(&body));
        let exported: Vec<String> = records(&body)[1..].iter().map(|r| r[0].clone()).collect();
        assert_eq!(exported, listed, "{field}: the export holds the list's rows");

        let resp =
            app.gql(Some("demo-admin"), LINK, json!({"p": p, "scope": "PROJECT", "f": filter, "c": ["NAME"]})).await;
        let url = resp["data"]["sessionExportUrl"].as_str().unwrap_or_else(|| panic!("{field}: {resp}")).to_owned();
        let link = url.strip_prefix("/export/sessions.csv?").expect("a path on this server").to_owned();
        let params: Vec<(String, String)> = serde_urlencoded::from_str(&link).expect("a query");
        // (Times as the domain writes them, to the microsecond.)
        let carried = params.iter().any(|(n, v)| *n == param && (*v == text || field.starts_with("created")));
        assert!(carried, "{field}: the link carries it: {link}");
        let (status, _, by_link) = export(&app, None, &link).await;
        assert_eq!((status, &by_link), (StatusCode::OK, &body), "{field}: the link downloads the same");
        let changed: Vec<(String, String)> =
            params.iter().map(|(n, v)| (n.clone(), if *n == param { other.clone() } else { v.clone() })).collect();
        let dropped: Vec<&(String, String)> = params.iter().filter(|(n, _)| *n != param).collect();
        for altered in [serde_urlencoded::to_string(&changed), serde_urlencoded::to_string(&dropped)] {
            let (status, _, _) = export(&app, None, &altered.expect("a query")).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{field}: an altered link is refused");
        }
    }
    // What the list refuses, the export refuses alike: BAD_USER_INPUT, naming the field.
    for (param, value, filter) in [
        ("launchGroupId", "not-an-id", json!({"launchGroupId": "not-an-id"})),
        ("nameContains", "a\u{1}b", json!({"nameContains": "a\u{1}b"})),
        ("resourceGroup", &*"x".repeat(300), json!({"resourceGroup": "x".repeat(300)})),
    ] {
        let resp = app
            .gql(
                Some("demo-admin"),
                "query($p: ID!, $f: SessionFilter) { sessions(projectId: $p, scope: PROJECT, filter: $f) { nodes { id } } }",
                json!({"p": p, "f": filter}),
            )
            .await;
        assert_eq!(crate::support::error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
        let query = serde_urlencoded::to_string([("projectId", p.as_str()), ("scope", "PROJECT"), (param, value)]);
        let (status, _, body) = export(&app, Some("demo-admin"), &query.expect("a query")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{param}: {}", String::from_utf8_lossy(&body));
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            (body["error"]["code"].as_str(), body["error"]["field"].as_str()),
            (Some("BAD_USER_INPUT"), Some(param))
        );
    }
}

db_tests!(
    every_declared_filter_goes_through_the_list_the_export_and_a_link,
    a_download_dropped_midway_stops_reading,
    every_cell_says_what_the_list_shows,
    a_signed_link_downloads_without_a_header_for_a_minute,
    an_export_holds_exactly_the_rows_of_the_list,
    mine_holds_only_the_callers_sessions_whatever_the_role,
    columns_come_from_the_settings_or_the_request,
    cells_are_quoted_and_formulas_neutralised,
    every_error_has_its_status_and_a_json_body,
);
