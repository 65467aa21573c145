//! Authentication of every demo user, refusal of bad or missing tokens, `viewer` per
//! role, and `node` lookups that reveal nothing the viewer may not see.

use axum::http::StatusCode;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::domain::directory::seed::{DEMO_USERS, demo_project_id, demo_user_id};
use sessiond::graphql::ids::{NodeKind, encode};

use crate::db_tests;
use crate::support::{TestApp, error_codes};

const VIEWER: &str = "{ viewer { user { id email role fullName } projects { name } settings { resourcePanelView } } }";

async fn every_demo_user_authenticates(app: TestApp) {
    let expected = [
        ("demo-alice", "USER", vec!["default", "research"]),
        ("demo-bob", "USER", vec!["default", "research"]),
        ("demo-admin", "ADMIN", vec!["default", "research"]),
        ("demo-root", "SUPERADMIN", vec!["default", "other", "research"]),
        ("demo-carol", "USER", vec!["other"]),
    ];
    for (token, role, projects) in expected {
        let demo = DEMO_USERS.iter().find(|u| u.token == token).expect("demo user");
        let resp = app.gql(Some(token), VIEWER, json!({})).await;
        assert!(resp.get("errors").is_none(), "{token}: {resp}");
        let v = &resp["data"]["viewer"];
        assert_eq!(v["user"]["email"], demo.email);
        assert_eq!(v["user"]["role"], role, "{token}");
        assert_eq!(v["user"]["id"], json!(encode(NodeKind::User, demo_user_id(demo.email)).0));
        let names: Vec<&str> =
            v["projects"].as_array().expect("projects").iter().map(|p| p["name"].as_str().expect("name")).collect();
        assert_eq!(names, projects, "{token}");
        assert_eq!(v["settings"]["resourcePanelView"], "MY_TOTAL");
    }
}

/// The page's own `PageViewer` (web/src/page.ts): its projects, their scopes and the
/// settings in one statement beside the token's, for every role, however many projects.
async fn the_pages_viewer_costs_two_statements(app: TestApp) {
    let document = &crate::support::page_document("page.ts", "VIEWER");
    for token in ["demo-alice", "demo-admin", "demo-root", "demo-carol"] {
        let (statements, resp) = app.count_statements(app.gql(Some(token), document, json!({}))).await;
        assert!(resp.get("errors").is_none(), "{token}: {resp}");
        assert!(!resp["data"]["viewer"]["settings"]["everyone"].as_array().expect("columns").is_empty(), "{resp}");
        assert_eq!(statements, 2, "{token}: the token's, and the viewer's");
    }
    // A user with settings of their own, and no project at all.
    let set = "mutation { setResourcePanelView(view: TOTAL_IN_RESOURCE_GROUP) { resourcePanelView } }";
    app.gql(Some("demo-carol"), set, json!({})).await;
    app.db.execute_unprepared("DELETE FROM project_members").await.expect("no memberships");
    let resp = app.gql(Some("demo-carol"), document, json!({})).await;
    assert_eq!(resp["data"]["viewer"]["projects"], json!([]), "{resp}");
    assert_eq!(resp["data"]["viewer"]["settings"]["resourcePanelView"], "TOTAL_IN_RESOURCE_GROUP", "{resp}");
}

/// Each project says which session lists the viewer may read there, and exactly those
/// answer: MINE for a member, PROJECT for an administrator of its domain.
async fn each_project_says_which_lists_the_viewer_may_read(app: TestApp) {
    let expected = [
        ("demo-alice", vec![("default", vec!["MINE"]), ("research", vec!["MINE"])]),
        ("demo-admin", vec![("default", vec!["MINE", "PROJECT"]), ("research", vec!["MINE", "PROJECT"])]),
        ("demo-root", vec![("default", vec!["PROJECT"]), ("other", vec!["PROJECT"]), ("research", vec!["PROJECT"])]),
        ("demo-carol", vec![("other", vec!["MINE"])]),
    ];
    for (token, projects) in expected {
        let resp = app.gql(Some(token), "{ viewer { projects { id name sessionScopes } } }", json!({})).await;
        let shown = resp["data"]["viewer"]["projects"].as_array().unwrap_or_else(|| panic!("{resp}")).clone();
        let named: Vec<(&str, Vec<&str>)> = shown
            .iter()
            .map(|p| {
                let scopes =
                    p["sessionScopes"].as_array().expect("scopes").iter().map(|s| s.as_str().expect("a scope"));
                (p["name"].as_str().expect("name"), scopes.collect())
            })
            .collect();
        assert_eq!(named, projects, "{token}");
        for p in &shown {
            for scope in ["MINE", "PROJECT"] {
                let list = app
                    .gql(
                        Some(token),
                        "query($p: ID!, $s: SessionScope) { sessions(projectId: $p, scope: $s, first: 1) { totalCount } }",
                        json!({"p": p["id"], "s": scope}),
                    )
                    .await;
                let offered = p["sessionScopes"].as_array().expect("scopes").contains(&json!(scope));
                let refused = error_codes(&list) == ["FORBIDDEN"];
                assert_eq!((offered, refused), (offered, !offered), "{token} {} {scope}: {list}", p["name"]);
            }
        }
    }
}

async fn bad_and_missing_tokens_are_refused(app: TestApp) {
    for token in [None, Some("demo-mallory"), Some(""), Some("DEMO-ALICE")] {
        let (status, resp) = app.gql_full(token, "{ viewer { user { email } } }", json!({})).await;
        assert_eq!(status, StatusCode::OK, "application/json answers 200");
        assert_eq!(error_codes(&resp), ["UNAUTHENTICATED"], "{token:?}: {resp}");
        assert!(resp.get("data").is_none(), "nothing executed: {resp}");
    }
    // Other schemes and malformed headers.
    for header in ["Basic ZGVtby1hbGljZQ==", "demo-alice", "Bearer"] {
        let req = axum::http::Request::post("/graphql")
            .header("content-type", "application/json")
            .header("accept", "application/graphql-response+json")
            .header("authorization", header)
            .body(axum::body::Body::from(r#"{"query":"{ viewer { user { email } } }"}"#))
            .expect("request");
        let (status, _, body) = app.send(req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{header}");
        let resp: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(error_codes(&resp), ["UNAUTHENTICATED"]);
    }
}

async fn tokens_created_later_work_and_are_stored_hashed(app: TestApp) {
    let (token, _) =
        sessiond::domain::directory::auth::create_token(&app.db, "bob@example.com", None).await.expect("token");
    let resp = app.gql(Some(&token), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(resp["data"]["viewer"]["user"]["email"], "bob@example.com");
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let stored = entity::keypair::Entity::find()
        .filter(entity::keypair::Column::SecretHash.eq(sessiond::domain::directory::auth::hash_token(&token)))
        .one(&app.db)
        .await
        .expect("query")
        .expect("keypair by hash");
    assert_ne!(stored.secret_hash, token);
    let unknown = sessiond::domain::directory::auth::create_token(&app.db, "nobody@example.com", None).await;
    assert!(
        matches!(unknown, Err(sessiond::domain::DomainError::NotFound("user"))),
        "unknown users get no token: {unknown:?}"
    );
    let bad_policy = sessiond::domain::directory::auth::create_token(&app.db, "bob@example.com", Some("gold")).await;
    match bad_policy {
        Err(sessiond::domain::DomainError::BadInput(problems)) => {
            assert_eq!((problems[0].code.as_str(), problems[0].field.as_deref()), ("UNKNOWN_POLICY", Some("policy")));
        }
        other => panic!("an unknown policy is refused: {other:?}"),
    }
}

/// `node(id)` per viewer: (token, id, visible?).
async fn node_lookup_reveals_only_what_is_visible(app: TestApp) {
    let project = |p: &str| encode(NodeKind::Project, demo_project_id(p)).0;
    let user = |e: &str| encode(NodeKind::User, demo_user_id(e)).0;
    let cases = [
        ("demo-alice", project("default/default"), true),
        ("demo-alice", project("other/other"), false),
        ("demo-carol", project("default/research"), false),
        ("demo-carol", project("other/other"), true),
        ("demo-admin", project("default/research"), true),
        ("demo-admin", project("other/other"), false),
        ("demo-root", project("other/other"), true),
        ("demo-alice", user("alice@example.com"), true),
        ("demo-alice", user("bob@example.com"), false),
        ("demo-admin", user("bob@example.com"), true),
        ("demo-admin", user("carol@other.example"), false),
        ("demo-root", user("carol@other.example"), true),
        // Forged, malformed and wrong-type ids look exactly like missing ones.
        ("demo-root", encode(NodeKind::Project, uuid::Uuid::new_v4()).0, false),
        ("demo-root", encode(NodeKind::Session, demo_project_id("default/default")).0, false),
        ("demo-root", "not-an-id".to_owned(), false),
        ("demo-root", String::new(), false),
    ];
    for (token, id, visible) in cases {
        let resp = app
            .gql(
                Some(token),
                "query($id: ID!) { node(id: $id) { id ... on Project { name } ... on User { email } } }",
                json!({"id": id}),
            )
            .await;
        assert!(resp.get("errors").is_none(), "{token} {id}: {resp}");
        let node = &resp["data"]["node"];
        if visible {
            assert_eq!(node["id"], json!(id), "{token} should see {id}");
        } else {
            assert!(node.is_null(), "{token} must not see {id}: {resp}");
        }
    }
}

/// `nodes(ids)`: every kind with an `id` found again, in the order asked, each null when it
/// is not the viewer's to see (another's settings or template); at most 100 ids; the
/// answer's roots in the document's order.
async fn nodes_find_every_kind_again(app: TestApp) {
    let template = "mutation($i: LaunchSessionInput!) { saveSessionTemplate(name: \"t\", input: $i) { id } }";
    let input = crate::support::launch_input("node-template", 1.0);
    let saved = app.gql(Some("demo-alice"), template, json!({"i": input})).await;
    let template = saved["data"]["saveSessionTemplate"]["id"].as_str().unwrap_or_else(|| panic!("{saved}")).to_owned();
    let storage = crate::support::StorageDir::new();
    crate::support::declare_storage(&app, storage.path()).await;
    let create = "mutation($p: ID!) { createFolder(projectId: $p, name: \"data\", scope: USER, quotaBytes: 1048576) { folder { id } } }";
    let made = app.gql(Some("demo-alice"), create, json!({"p": crate::support::project("default/default")})).await;
    let folder = made["data"]["createFolder"]["folder"]["id"].as_str().unwrap_or_else(|| panic!("{made}")).to_owned();
    let settings = "{ viewer { settings { id } } }";
    let mine = app.gql(Some("demo-alice"), settings, json!({})).await["data"]["viewer"]["settings"]["id"].clone();
    let bobs = app.gql(Some("demo-bob"), settings, json!({})).await["data"]["viewer"]["settings"]["id"].clone();
    let alice = encode(NodeKind::User, demo_user_id("alice@example.com")).0;
    let ids = json!([template, mine, bobs, alice, "nope", folder]);
    let q = "query($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }";
    let resp = app.gql(Some("demo-alice"), q, json!({"ids": ids})).await;
    let kinds: Vec<Value> =
        resp["data"]["nodes"].as_array().expect("nodes").iter().map(|n| n["__typename"].clone()).collect();
    let expected = ["SessionTemplate", "UserSettings", "", "User", "", "Folder"].map(|k| match k {
        "" => Value::Null,
        k => json!(k),
    });
    assert_eq!(kinds, expected, "{resp}");
    assert_eq!(resp["data"]["nodes"][0]["id"], json!(template));
    let resp = app.gql(Some("demo-bob"), q, json!({"ids": [template, folder]})).await;
    assert_eq!(resp["data"]["nodes"], json!([null, null]), "not shared: not bob's to see");

    // Bob's session's history is his: its entry is nothing to alice, as the session is.
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let bob = crate::support::launch_input("bobs", 1.0);
    let launched = app.gql(Some("demo-bob"), launch, json!({"i": bob})).await;
    let session = launched["data"]["launchSession"]["session"]["id"].clone();
    let history = "query($id: ID!) { session(id: $id) { schedulingHistory(first: 1) { edges { node { id } } } } }";
    let read = app.gql(Some("demo-bob"), history, json!({"id": session})).await;
    let entry = read["data"]["session"]["schedulingHistory"]["edges"][0]["node"]["id"].clone();
    assert!(entry.is_string(), "{read}");
    let ids = json!([entry, session]);
    let bobs = app.gql(Some("demo-bob"), q, json!({"ids": ids})).await;
    assert_eq!(bobs["data"]["nodes"][0]["__typename"], "SchedulingHistoryEntry", "{bobs}");
    let alices = app.gql(Some("demo-alice"), q, json!({"ids": ids})).await;
    assert_eq!(alices["data"]["nodes"], json!([null, null]), "{alices}");

    let many: Vec<String> = (0..101).map(|_| "x".to_owned()).collect();
    let resp = app.gql(Some("demo-alice"), q, json!({"ids": many})).await;
    assert_eq!(crate::support::error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(resp["errors"][0]["extensions"]["field"], "ids", "{resp}");

    // The roots come back in the document's order, however the fields finish.
    let q = "{ b: nodes(ids: []) { id } a: viewer { user { email } } c: node(id: \"x\") { id } }";
    for _ in 0..5 {
        let body = json!({"query": q}).to_string();
        let req = axum::http::Request::post("/graphql")
            .header("content-type", "application/json")
            .header("authorization", "Bearer demo-alice")
            .body(axum::body::Body::from(body))
            .expect("request");
        let text = String::from_utf8(app.send(req).await.2).expect("utf8");
        let expected = r#"{"data":{"b":[],"a":{"user":{"email":"alice@example.com"}},"c":null}}"#;
        assert_eq!(text, expected);
    }
}

db_tests!(
    nodes_find_every_kind_again,
    every_demo_user_authenticates,
    each_project_says_which_lists_the_viewer_may_read,
    the_pages_viewer_costs_two_statements,
    bad_and_missing_tokens_are_refused,
    tokens_created_later_work_and_are_stored_hashed,
    node_lookup_reveals_only_what_is_visible,
);
