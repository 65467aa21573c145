//! Folders of data that outlive sessions, through the API on both databases: made on a
//! declared storage (a directory sessiond names), seen by whom they are for and by no one
//! else, renamed, shared with a project's members as its administrator grants, deleted
//! with their files.

use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, declare_storage, error_codes, project};

const CREATE: &str = "mutation($p: ID!, $n: String!, $s: FolderScope!, $q: BigInt) {
  createFolder(projectId: $p, name: $n, scope: $s, quotaBytes: $q) { folder { id name scope storage quotaBytes access manageable owner { email } } } }";
const LIST: &str = "query($p: ID!) { folders(projectId: $p) { name scope access manageable } }";
const RENAME: &str = "mutation($id: ID!, $n: String!) { renameFolder(id: $id, name: $n) { folder { name } } }";
const DELETE: &str = "mutation($id: ID!) { deleteFolder(id: $id) }";
const GRANT: &str = "mutation($id: ID!, $u: ID!, $a: FolderAccess!) { setFolderAccess(id: $id, userId: $u, access: $a) { folder { name } } }";

pub(crate) async fn create(app: &TestApp, who: &str, name: &str, scope: &str, quota: Option<i64>) -> Value {
    let vars = json!({"p": project("default/default"), "n": name, "s": scope, "q": quota});
    app.gql(Some(who), CREATE, vars).await
}

/// The codes of the input problems of a BAD_USER_INPUT answer.
pub(crate) fn problem_codes(r: &Value) -> Vec<String> {
    assert_eq!(error_codes(r), ["BAD_USER_INPUT"], "{r}");
    let problems = r["errors"][0]["extensions"]["problems"].as_array().cloned().unwrap_or_default();
    problems.iter().map(|p| p["code"].as_str().unwrap_or_default().to_owned()).collect()
}

pub(crate) fn user_id(email: &str) -> String {
    sessiond::graphql::ids::encode(
        sessiond::graphql::ids::NodeKind::User,
        sessiond::domain::directory::seed::demo_user_id(email),
    )
    .0
}

async fn folders_of(app: &TestApp, who: &str) -> Value {
    app.gql(Some(who), LIST, json!({"p": project("default/default")})).await["data"]["folders"].clone()
}

async fn folders_are_made_seen_shared_and_deleted_as_their_scope_says(app: TestApp) {
    let storage = crate::support::StorageDir::new();
    declare_storage(&app, storage.path()).await;

    // A USER folder: its owner's alone, the storage's quota unless asked for less.
    let made = create(&app, "demo-alice", "data", "USER", None).await;
    let folder = made["data"]["createFolder"]["folder"].clone();
    assert_eq!(
        (&folder["name"], &folder["scope"], &folder["storage"], &folder["quotaBytes"], &folder["access"]),
        (&json!("data"), &json!("USER"), &json!("shared"), &json!(1_i64 << 30), &json!("READ_WRITE")),
        "{made}"
    );
    assert_eq!(folder["owner"]["email"], "alice@example.com");
    let id = folder["id"].as_str().expect("an id").to_owned();
    let uuid = sessiond::graphql::ids::decode(&id).map(|(_, u)| u).expect("a folder id");
    assert!(storage.path().join(&uuid).is_dir(), "its directory, named by sessiond");
    assert_eq!(
        folders_of(&app, "demo-alice").await,
        json!([{"name": "data", "scope": "USER", "access": "READ_WRITE", "manageable": true}])
    );
    for other in ["demo-bob", "demo-admin"] {
        assert_eq!(folders_of(&app, other).await, json!([]), "{other} sees nothing of alice's");
        let r = app.gql(Some(other), RENAME, json!({"id": id, "n": "mine"})).await;
        assert_eq!(error_codes(&r), ["NOT_FOUND"], "{other}: {r}");
        let r = app.gql(Some(other), DELETE, json!({"id": id})).await;
        assert_eq!(error_codes(&r), ["NOT_FOUND"], "{other}: {r}");
    }

    // Bad inputs change nothing.
    for (name, quota, code) in [
        ("data", None, "FOLDER_EXISTS"),
        ("../etc", None, "INVALID_NAME"),
        (".hidden", None, "INVALID_NAME"),
        ("big", Some(2_i64 << 30), "INVALID_QUOTA"),
        ("none", Some(0), "INVALID_QUOTA"),
    ] {
        let r = create(&app, "demo-alice", name, "USER", quota).await;
        assert_eq!(problem_codes(&r), [code], "{name}: {r}");
    }
    let small = create(&app, "demo-alice", "small", "USER", Some(1 << 20)).await;
    assert_eq!(small["data"]["createFolder"]["folder"]["quotaBytes"], json!(1 << 20), "{small}");
    let r = app.gql(Some("demo-alice"), RENAME, json!({"id": id, "n": "small"})).await;
    assert_eq!(problem_codes(&r), ["FOLDER_EXISTS"], "{r}");
    let r = app.gql(Some("demo-alice"), RENAME, json!({"id": id, "n": "dataset"})).await;
    assert_eq!(r["data"]["renameFolder"]["folder"]["name"], "dataset", "{r}");

    // A PROJECT folder: made by an administrator; members read it, or write it as granted.
    let r = create(&app, "demo-alice", "team", "PROJECT", None).await;
    assert_eq!(error_codes(&r), ["FORBIDDEN"], "{r}");
    let team = create(&app, "demo-admin", "team", "PROJECT", None).await;
    let team_id = team["data"]["createFolder"]["folder"]["id"].as_str().unwrap_or_else(|| panic!("{team}")).to_owned();
    let seen = |list: Value| list.as_array().into_iter().flatten().find(|f| f["name"] == "team").cloned();
    assert_eq!(
        seen(folders_of(&app, "demo-bob").await),
        Some(json!({"name": "team", "scope": "PROJECT", "access": "READ_ONLY", "manageable": false}))
    );
    let r = app.gql(Some("demo-bob"), RENAME, json!({"id": team_id, "n": "bobs"})).await;
    assert_eq!(error_codes(&r), ["FORBIDDEN"], "{r}");
    let r = app
        .gql(Some("demo-bob"), GRANT, json!({"id": team_id, "u": user_id("bob@example.com"), "a": "READ_WRITE"}))
        .await;
    assert_eq!(error_codes(&r), ["FORBIDDEN"], "a member grants nothing: {r}");
    let r = app
        .gql(Some("demo-admin"), GRANT, json!({"id": team_id, "u": user_id("bob@example.com"), "a": "READ_WRITE"}))
        .await;
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(seen(folders_of(&app, "demo-bob").await).map(|f| f["access"].clone()), Some(json!("READ_WRITE")));
    assert_eq!(seen(folders_of(&app, "demo-alice").await).map(|f| f["access"].clone()), Some(json!("READ_ONLY")));
    let r = app
        .gql(Some("demo-admin"), GRANT, json!({"id": team_id, "u": user_id("carol@other.example"), "a": "READ_WRITE"}))
        .await;
    assert_eq!(error_codes(&r), ["NOT_FOUND"], "not a member: {r}");
    // Another domain's user sees neither the project nor its folders.
    let r = app.gql(Some("demo-carol"), LIST, json!({"p": project("default/default")})).await;
    assert_eq!(error_codes(&r), ["NOT_FOUND"], "{r}");

    // The storage cannot be pruned while folders are made on it.
    let slots = sessiond::domain::directory::apply::known_slots(&app.db).await.expect("slots");
    let demo = sessiond::domain::directory::apply::file::parse(
        &[sessiond::domain::directory::apply::Source {
            name: "demo.toml".into(),
            text: sessiond::domain::directory::apply::DEMO.into(),
        }],
        &slots,
    )
    .expect("the demo");
    match sessiond::domain::directory::apply::apply(
        &app.db,
        &demo,
        sessiond::domain::directory::apply::Options::new(true, false),
    )
    .await
    {
        Err(sessiond::domain::directory::apply::ApplyError::Refused(why)) => {
            assert_eq!(why, ["storage shared: 3 folder(s) are made on it; delete them first"]);
        }
        other => panic!("expected a refusal: {other:?}"),
    }

    // Nor moved: its folders are directories under its path.
    let moved = format!(
        "{}\n[storage.shared]\npath = \"{}/elsewhere\"\nquota = \"1 GiB\"\n",
        sessiond::domain::directory::apply::DEMO,
        storage.path().display()
    );
    let moved = sessiond::domain::directory::apply::file::parse(
        &[sessiond::domain::directory::apply::Source { name: "moved.toml".into(), text: moved }],
        &slots,
    )
    .expect("a declaration");
    match sessiond::domain::directory::apply::apply(
        &app.db,
        &moved,
        sessiond::domain::directory::apply::Options::default(),
    )
    .await
    {
        Err(sessiond::domain::directory::apply::ApplyError::Refused(why)) => {
            assert_eq!(why, ["storage shared: its path cannot change while 3 folder(s) are made on it"]);
        }
        other => panic!("expected a refusal: {other:?}"),
    }

    // Deleted, with its files.
    std::fs::write(storage.path().join(&uuid).join("kept.txt"), "x").expect("a file in it");
    let r = app.gql(Some("demo-alice"), DELETE, json!({"id": id})).await;
    assert_eq!(r["data"]["deleteFolder"], json!(id), "{r}");
    assert!(!storage.path().join(&uuid).exists(), "its directory goes with it");
    let names: Vec<Value> =
        folders_of(&app, "demo-alice").await.as_array().into_iter().flatten().map(|f| f["name"].clone()).collect();
    assert_eq!(names, [json!("small"), json!("team")]);
}

db_tests!(folders_are_made_seen_shared_and_deleted_as_their_scope_says);
