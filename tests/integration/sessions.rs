//! Who sees which sessions (the authorization matrix), bad input, the statement count of a
//! list page, and the session generator.

use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{session, session_status_transition};
use sessiond::domain::directory::seed::{demo_project_id, demo_user_id};
use sessiond::domain::model::status::SessionStatus;
use sessiond::graphql::ids::{NodeKind, encode};

use crate::db_tests;
use crate::support::{TestApp, error_codes, project};

const LIST: &str = "query($p: ID!, $scope: SessionScope, $filter: SessionFilter) {
  sessions(projectId: $p, scope: $scope, filter: $filter, first: 500) { totalCount edges { node { id owner { email } } } }
}";
const COUNTS: &str = "query($p: ID!, $scope: SessionScope, $filter: SessionFilter) {
  sessionCounts(projectId: $p, scope: $scope, filter: $filter) { running finished all byType { type count } }
}";

/// What a cell of the matrix expects.
#[derive(Debug, PartialEq)]
enum Expect {
    /// The caller's own sessions only.
    Own,
    /// Everyone's sessions in the project.
    All,
    Code(&'static str),
}

async fn sessions_in_db(app: &TestApp, project: &str, owner: Option<&str>) -> u64 {
    let mut q = session::Entity::find().filter(session::Column::ProjectId.eq(demo_project_id(project)));
    if let Some(email) = owner {
        q = q.filter(session::Column::OwnerId.eq(demo_user_id(email)));
    }
    q.count(&app.db).await.expect("count")
}

async fn authorization_matrix(app: TestApp) {
    app.generate(300, 11).await;
    let alice_session = session::Entity::find()
        .filter(session::Column::OwnerId.eq(demo_user_id("alice@example.com")))
        .filter(session::Column::ProjectId.eq(demo_project_id("default/default")))
        .one(&app.db)
        .await
        .expect("query")
        .expect("alice has a generated session in default");
    let alice_sid = encode(NodeKind::Session, alice_session.id).0;

    use Expect::*;
    // (token, email, MINE, PROJECT, sees alice's session)
    let rows = [
        ("demo-alice", "alice@example.com", Own, Code("FORBIDDEN"), true),
        ("demo-bob", "bob@example.com", Own, Code("FORBIDDEN"), false),
        ("demo-admin", "admin@example.com", Own, All, true),
        ("demo-carol", "carol@other.example", Code("NOT_FOUND"), Code("NOT_FOUND"), false),
        ("demo-root", "root@example.com", Code("FORBIDDEN"), All, true),
    ];
    let p = project("default/default");
    for (token, email, mine, whole, sees) in rows {
        for (scope, expect) in [("MINE", &mine), ("PROJECT", &whole)] {
            let vars = json!({"p": p, "scope": scope});
            let list = app.gql(Some(token), LIST, vars.clone()).await;
            let counts = app.gql(Some(token), COUNTS, vars).await;
            match expect {
                Code(code) => {
                    assert_eq!(error_codes(&list), [*code], "{token} sessions {scope}: {list}");
                    assert_eq!(error_codes(&counts), [*code], "{token} sessionCounts {scope}: {counts}");
                    assert!(!list.to_string().contains("alice@example.com"), "{token} {scope} leaked: {list}");
                }
                Own | All => {
                    assert!(
                        list.get("errors").is_none() && counts.get("errors").is_none(),
                        "{token} {scope}: {list} {counts}"
                    );
                    let edges = list["data"]["sessions"]["edges"].as_array().expect("edges");
                    let owners: Vec<&str> =
                        edges.iter().map(|e| e["node"]["owner"]["email"].as_str().expect("email")).collect();
                    let expected = if *expect == Own {
                        assert!(owners.iter().all(|o| *o == email), "{token} MINE shows only own: {owners:?}");
                        sessions_in_db(&app, "default/default", Some(email)).await
                    } else {
                        sessions_in_db(&app, "default/default", None).await
                    };
                    assert_eq!(edges.len() as u64, expected, "{token} {scope}");
                    assert_eq!(list["data"]["sessions"]["totalCount"], json!(expected));
                    assert_eq!(counts["data"]["sessionCounts"]["all"], json!(expected), "{token} {scope} counts");
                }
            }
        }
        for query in [
            "query($id: ID!) { session(id: $id) { id name } }",
            "query($id: ID!) { node(id: $id) { id ... on Session { name } } }",
        ] {
            let resp = app.gql(Some(token), query, json!({"id": alice_sid})).await;
            assert!(resp.get("errors").is_none(), "{resp}");
            let found = resp["data"].as_object().and_then(|d| d.values().next()).cloned().unwrap_or(Value::Null);
            if sees {
                assert_eq!(found["name"], json!(alice_session.name), "{token} should see it");
            } else {
                assert!(found.is_null(), "{token} must not see alice's session: {resp}");
            }
        }
    }
    // Forged, malformed and other-type ids answer exactly like a missing session.
    let forged = [
        encode(NodeKind::Session, Uuid::new_v4()).0,
        encode(NodeKind::Project, alice_session.id).0,
        encode(NodeKind::User, alice_session.id).0,
        alice_session.id.to_string(),
        "!!!".to_owned(),
    ];
    for id in forged {
        for query in ["query($id: ID!) { session(id: $id) { id } }", "query($id: ID!) { node(id: $id) { id } }"] {
            let resp = app.gql(Some("demo-root"), query, json!({"id": id})).await;
            assert!(resp.get("errors").is_none(), "{id}: {resp}");
            let value = resp["data"].as_object().and_then(|d| d.values().next()).cloned();
            assert_eq!(value, Some(Value::Null), "{id}");
        }
    }
}

async fn bad_input_gets_codes_not_sql(app: TestApp) {
    app.generate(60, 3).await;
    let p = project("default/default");
    let page = "query($p: ID!, $first: Int, $last: Int, $after: String, $before: String, $order: [SessionOrder!], $filter: SessionFilter) {
      sessions(projectId: $p, scope: PROJECT, first: $first, last: $last, after: $after, before: $before, orderBy: $order, filter: $filter) {
        pageInfo { endCursor } edges { node { id } } } }";
    let first_page = app.gql(Some("demo-admin"), page, json!({"p": p, "first": 2})).await;
    let cursor = first_page["data"]["sessions"]["pageInfo"]["endCursor"].as_str().expect("cursor").to_owned();
    let nul_cursor =
        sessiond::graphql::cursor::encode(&json!({"o": "NAME:ASC", "k": ["a\u{0000}"], "id": Uuid::nil()}));

    let cases = [
        (json!({"p": p, "first": 100000}), "BAD_USER_INPUT", Some("first")),
        (json!({"p": p, "first": 501}), "BAD_USER_INPUT", Some("first")),
        (json!({"p": p, "last": -1}), "BAD_USER_INPUT", Some("last")),
        (json!({"p": p, "first": 1, "last": 1}), "BAD_USER_INPUT", Some("last")),
        (json!({"p": p, "after": "not-a-cursor"}), "BAD_USER_INPUT", Some("after")),
        (json!({"p": p, "before": "eyJ4IjoxfQ"}), "BAD_USER_INPUT", Some("before")),
        (
            json!({"p": p, "after": cursor, "order": [{"field": "NAME", "direction": "ASC"}]}),
            "BAD_USER_INPUT",
            Some("after"),
        ),
        (json!({"p": p, "filter": {"launchGroupId": "nope"}}), "BAD_USER_INPUT", Some("filter.launchGroupId")),
        (
            json!({"p": p, "filter": {"createdAfter": "2026-01-02T00:00:00Z", "createdBefore": "2026-01-01T00:00:00Z"}}),
            "BAD_USER_INPUT",
            Some("filter.createdAfter"),
        ),
        (json!({"p": p, "filter": {"statuses": ["SLEEPING"]}}), "BAD_USER_INPUT", None),
        // NUL: PostgreSQL cannot store it and SQLite cuts text at it; refused the same on both.
        (json!({"p": p, "filter": {"nameContains": "a\u{0000}b"}}), "BAD_USER_INPUT", Some("filter.nameContains")),
        (json!({"p": p, "filter": {"ownerEmail": "bob\u{0000}"}}), "BAD_USER_INPUT", Some("filter.ownerEmail")),
        (json!({"p": p, "filter": {"resourceGroup": "\u{0000}"}}), "BAD_USER_INPUT", Some("filter.resourceGroup")),
        (json!({"p": p, "filter": {"nameContains": "a\u{001b}[0m"}}), "BAD_USER_INPUT", Some("filter.nameContains")),
        // Lists are capped (repeats are allowed within the cap and read once).
        (json!({"p": p, "filter": {"statuses": vec!["RUNNING"; 65]}}), "BAD_USER_INPUT", Some("filter.statuses")),
        (
            json!({"p": p, "order": vec![json!({"field": "NAME", "direction": "ASC"}); 33]}),
            "BAD_USER_INPUT",
            Some("orderBy"),
        ),
        (
            json!({"p": p, "after": nul_cursor, "order": [{"field": "NAME", "direction": "ASC"}]}),
            "BAD_USER_INPUT",
            Some("after"),
        ),
        (json!({"p": encode(NodeKind::Project, Uuid::new_v4()).0}), "NOT_FOUND", None),
        (json!({"p": "garbage"}), "NOT_FOUND", None),
        (json!({"p": encode(NodeKind::User, demo_user_id("alice@example.com")).0}), "NOT_FOUND", None),
    ];
    for (vars, code, field) in cases {
        let resp = app.gql(Some("demo-admin"), page, vars.clone()).await;
        assert_eq!(error_codes(&resp), [code], "{vars}: {resp}");
        if let Some(field) = field {
            assert_eq!(resp["errors"][0]["extensions"]["field"], field, "{vars}: {resp}");
        }
        let text = resp.to_string().to_lowercase();
        for sql in ["select ", "sqlite", "postgres", "sqlx", "syntax error"] {
            assert!(!text.contains(sql), "SQL text leaked for {vars}: {resp}");
        }
    }
    // One range of years for every time given (SQLite would compare a fifth digit as text):
    // the list, its counts and an export link refuse the same times, with the same field.
    let years = [
        (json!({"createdAfter": "+10000-01-01T00:00:00Z"}), "filter.createdAfter"),
        (json!({"createdBefore": "0000-12-31T00:00:00Z"}), "filter.createdBefore"),
    ];
    for (filter, field) in years {
        for query in [
            page,
            "query($p: ID!, $filter: SessionFilter) { sessionCounts(projectId: $p, scope: PROJECT, filter: $filter) { all } }",
            "query($p: ID!, $filter: SessionFilter) { sessionExportUrl(projectId: $p, scope: PROJECT, filter: $filter) }",
        ] {
            let resp = app.gql(Some("demo-admin"), query, json!({"p": p, "filter": filter})).await;
            assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{filter} {query}: {resp}");
            assert_eq!(resp["errors"][0]["extensions"]["field"], field, "{filter} {query}: {resp}");
        }
    }
    // Detail-panel fields are not batched: a long page may not ask for them.
    let detail = "query($p: ID!, $n: Int) { sessions(projectId: $p, scope: PROJECT, first: $n) { edges { node { logs schedulingHistory { totalCount } } } } }";
    let resp = app.gql(Some("demo-admin"), detail, json!({"p": p, "n": 500})).await;
    assert_eq!(error_codes(&resp), ["LIMIT_EXCEEDED"], "{resp}");
    let resp = app.gql(Some("demo-admin"), detail, json!({"p": p, "n": 20})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let resp = app
        .gql(Some("demo-alice"), LIST, json!({"p": p, "scope": "MINE", "filter": {"ownerEmail": "bob@example.com"}}))
        .await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"]);
    assert_eq!(resp["errors"][0]["extensions"]["field"], "filter.ownerEmail");
}

/// Statements of a list page with scope PROJECT, whatever its size: auth (the keypair
/// joined with its user), the project, the page (joined with the owners), totalCount, then
/// the transitions (the project is the one already read; resource groups and images come
/// from the catalog, read once per revision on the live feeds' connection:
/// `apply::a_page_shows_the_catalog_as_applied`). `SESSIOND_TEST_SQL=1` prints them.
const LIST_PROJECT_STATEMENTS: usize = 5;
/// The same with scope MINE, which also checks the caller's membership of the project
/// (once).
const LIST_MINE_STATEMENTS: usize = 6;
/// One more, on either scope, when a session of the page has a launch group (its loader).
const LAUNCH_GROUP_LOADER_STATEMENTS: usize = 1;

const FULL_PAGE: &str = "query($p: ID!, $n: Int, $scope: SessionScope) {
  sessions(projectId: $p, scope: $scope, first: $n) {
    totalCount
    pageInfo { hasNextPage endCursor }
    edges { cursor node {
      id name type status statusInfo result exitCode agent clusterSize priority startupCommand batchTimeoutSeconds
      createdAt scheduledAt startedAt terminatedAt elapsedSeconds queuePosition
      owner { id email role } project { id name } resourceGroup { name strategy allowedSessionTypes }
      image { name apps supportedTypes minimumSlots { slot amount } }
      launchGroup { id name count }
      requestedSlots { cpu memory accelerators { slot amount } all { slot amount } }
      occupiedSlots { cpu memory }
      environment { name value }
      pendingReasons { code } apps { name } statusTransitions { fromStatus toStatus occurredAt }
    } }
  }
}";

async fn a_page_costs_the_same_statements_whatever_its_size(app: TestApp) {
    app.generate(1500, 21).await;
    let p = project("default/default");
    let with_group = |resp: &Value| {
        let edges = resp["data"]["sessions"]["edges"].as_array().expect("edges");
        usize::from(edges.iter().any(|e| !e["node"]["launchGroup"].is_null())) * LAUNCH_GROUP_LOADER_STATEMENTS
    };
    for (token, scope, base, large_len) in
        [("demo-admin", "PROJECT", LIST_PROJECT_STATEMENTS, 500), ("demo-alice", "MINE", LIST_MINE_STATEMENTS, 0)]
    {
        let vars = |n: i64| json!({"p": p, "n": n, "scope": scope});
        let (small, resp10) = app.count_statements(app.gql(Some(token), FULL_PAGE, vars(10))).await;
        assert!(resp10.get("errors").is_none(), "{resp10}");
        assert_eq!(resp10["data"]["sessions"]["edges"].as_array().map(Vec::len), Some(10));
        let (large, resp500) = app.count_statements(app.gql(Some(token), FULL_PAGE, vars(500))).await;
        assert!(resp500.get("errors").is_none(), "{resp500}");
        let rows = resp500["data"]["sessions"]["edges"].as_array().map_or(0, Vec::len);
        if large_len > 0 {
            assert_eq!(rows, large_len, "{scope}");
        } else {
            assert!(rows > 100, "{scope}: alice's page is large too: {rows}");
        }
        assert_eq!(with_group(&resp500), 1, "{scope}: the large page exercises the launch-group loader");
        assert_eq!(small, base + with_group(&resp10), "{scope}: statements for a page of 10");
        assert_eq!(large, base + 1, "{scope}: statements for a page of {rows}");
    }
}

async fn generated_sessions_are_consistent_and_deterministic(app: TestApp) {
    let report = app.generate(400, 5).await;
    assert_eq!(report.sessions, 400);
    assert_eq!(report.live, 8);
    let again = sessiond::domain::directory::generate::generate(
        &app.db,
        &sessiond::domain::directory::generate::GenerateOptions {
            sessions: 10,
            seed: 5,
            now: sessiond::domain::model::clock::now(),
        },
    )
    .await;
    match again {
        Err(sessiond::domain::DomainError::BadInput(problems)) => {
            assert_eq!(problems.iter().map(|p| p.code.as_str()).collect::<Vec<_>>(), ["ALREADY_GENERATED"]);
        }
        other => panic!("the same seed twice is refused: {:?}", other.map(|r| r.sessions)),
    }

    let all = session::Entity::find().order_by_asc(session::Column::Id).all(&app.db).await.expect("sessions");
    assert_eq!(all.len(), 400);
    let mut statuses = std::collections::BTreeSet::new();
    let mut types = std::collections::BTreeSet::new();
    // How often each conditional check below ran: each must have run.
    let (mut timed, mut batch_ends, mut errors) = (0, 0, 0);
    for s in &all {
        let status = SessionStatus::parse(&s.status).expect("status");
        statuses.insert(s.status.clone());
        types.insert(s.session_type.clone());
        if status.is_terminal() {
            let end = s.terminated_at.expect("terminal sessions have ended");
            assert!(end >= s.created_at, "{}", s.name);
            if let (Some(sch), Some(st)) = (s.scheduled_at, s.started_at) {
                assert!(s.created_at <= sch && sch <= st && st <= end, "{}", s.name);
                timed += 1;
            }
            if s.session_type == "BATCH" && s.status == "TERMINATED" {
                assert_eq!(s.exit_code == Some(0), s.result == "SUCCESS", "{}", s.name);
                assert!(s.exit_code.is_some());
                batch_ends += 1;
            }
            if s.status == "ERROR" {
                assert_eq!(s.result, "FAILURE");
                assert!(s.status_info.is_some());
                errors += 1;
            }
        } else {
            assert!(s.terminated_at.is_none());
            assert_eq!(s.agent_id.is_some(), status == SessionStatus::Running, "{}", s.name);
        }
        assert!(sessiond::domain::model::slots::ResourceSlots::from_json(&s.requested_slots).is_ok());
    }
    assert!(timed > 0 && batch_ends > 0 && errors > 0, "checks ran: {timed} {batch_ends} {errors}");
    assert_eq!(statuses.len(), 5, "PENDING, RUNNING and the three terminal statuses: {statuses:?}");
    assert_eq!(types.len(), 4, "{types:?}");

    // Every status path is legal and ends in the session's status.
    let transitions = session_status_transition::Entity::find()
        .order_by_asc(session_status_transition::Column::Id)
        .all(&app.db)
        .await
        .expect("transitions");
    let mut last: std::collections::HashMap<Uuid, SessionStatus> = Default::default();
    for t in &transitions {
        let to = SessionStatus::parse(&t.to_status).expect("to");
        match (t.from_status.as_deref().map(|f| SessionStatus::parse(f).expect("from")), last.get(&t.session_id)) {
            (None, None) => assert_eq!(to, SessionStatus::Pending),
            (Some(from), Some(prev)) => {
                assert_eq!(from, *prev);
                assert!(from.can_become(to), "{from} → {to}");
            }
            other => panic!("broken path {other:?}"),
        }
        last.insert(t.session_id, to);
    }
    for s in &all {
        assert_eq!(last.get(&s.id).map(|st| st.as_str()), Some(s.status.as_str()), "{}", s.name);
    }

    // The same seed in another database gives the same sessions.
    let other = TestApp::start(app.backend).await.expect("second database");
    other.generate(400, 5).await;
    let twin = session::Entity::find().order_by_asc(session::Column::Id).all(&other.db).await.expect("sessions");
    let key = |s: &session::Model| {
        (s.id, s.name.clone(), s.status.clone(), s.session_type.clone(), s.requested_slots.clone())
    };
    assert_eq!(all.iter().map(key).collect::<Vec<_>>(), twin.iter().map(key).collect::<Vec<_>>());
}

db_tests!(
    authorization_matrix,
    bad_input_gets_codes_not_sql,
    a_page_costs_the_same_statements_whatever_its_size,
    generated_sessions_are_consistent_and_deterministic,
);
