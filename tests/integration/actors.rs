//! Who did it: every status change and history line names its actor, a user (with e-mail
//! and role, shown to whoever sees the session) or the system with the rule that fired.

use serde_json::{Value, json};

use crate::db_tests;
use crate::export::{export, records};
use crate::support::{TestApp, launch_input, project};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const ACTOR: &str = "actor { kind rule user { email role } }";

fn detail() -> String {
    format!(
        "query($id: ID!) {{ session(id: $id) {{ status statusInfo
          statusTransitions {{ toStatus {ACTOR} }}
          schedulingHistory {{ edges {{ node {{ phase {ACTOR} }} }} }} }} }}"
    )
}

/// (to status, actor) of each status change, oldest first.
fn transitions(s: &Value) -> Vec<(String, Value)> {
    s["statusTransitions"]
        .as_array()
        .unwrap_or_else(|| panic!("transitions: {s}"))
        .iter()
        .map(|t| (t["toStatus"].as_str().unwrap_or_default().to_owned(), t["actor"].clone()))
        .collect()
}

/// (phase, actor) of each history line, newest first.
fn lines(s: &Value) -> Vec<(String, Value)> {
    s["schedulingHistory"]["edges"]
        .as_array()
        .unwrap_or_else(|| panic!("history: {s}"))
        .iter()
        .map(|e| (e["node"]["phase"].as_str().unwrap_or_default().to_owned(), e["node"]["actor"].clone()))
        .collect()
}

fn user(email: &str, role: &str) -> Value {
    json!({"kind": "USER", "rule": null, "user": {"email": email, "role": role}})
}

fn system(rule: &str) -> Value {
    json!({"kind": "SYSTEM", "rule": rule, "user": null})
}

async fn every_change_names_who_made_it(mut app: TestApp) {
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": launch_input("whose", 1.0)})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let s = app.gql(Some("demo-alice"), &detail(), json!({"id": id})).await["data"]["session"].clone();
    assert_eq!(transitions(&s), [("PENDING".to_owned(), user("alice@example.com", "USER"))]);
    assert_eq!(lines(&s), [("enqueue".to_owned(), user("alice@example.com", "USER"))]);

    app.start_workers();
    let s = app
        .wait_for("demo-alice", &detail(), json!({"id": id}), |r| r["data"]["session"]["status"] == "RUNNING")
        .await["data"]["session"]
        .clone();
    let seen = transitions(&s);
    assert_eq!(seen[1], ("SCHEDULED".to_owned(), system("scheduler")), "{s}");
    for (to, actor) in &seen[2..] {
        assert_eq!(actor, &system("simulated runtime"), "{to} was the engine's");
    }
    assert!(lines(&s).contains(&("schedule".to_owned(), system("scheduler"))), "{s}");

    // An administrator ends it: its owner sees who, with e-mail and role.
    assert_eq!(crate::support::force_terminate(&app, "demo-admin", &id).await, "TERMINATED");
    let s = app.gql(Some("demo-alice"), &detail(), json!({"id": id})).await["data"]["session"].clone();
    assert_eq!(s["statusInfo"], "force-terminated");
    assert_eq!(transitions(&s).last(), Some(&("TERMINATED".to_owned(), user("admin@example.com", "ADMIN"))));
    let latest = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { statusChangedBy { kind rule user { email role } } } }",
            json!({"id": id}),
        )
        .await;
    assert_eq!(latest["data"]["session"]["statusChangedBy"], user("admin@example.com", "ADMIN"), "{latest}");

    // The export says it too: who, and their role; the system by its rule.
    let other = app.gql(Some("demo-alice"), LAUNCH, json!({"i": launch_input("whose-too", 1.0)})).await;
    assert!(other.get("errors").is_none(), "{other}");
    let p = project("default/default");
    let (status, _, body) =
        export(&app, Some("demo-alice"), &format!("projectId={p}&orderBy=NAME_ASC&columns=NAME,STATUS_CHANGED_BY"))
            .await;
    assert_eq!(status, axum::http::StatusCode::OK);
    let rows = records(&body);
    assert_eq!(rows[0], ["Name", "Status changed by", "Status changed by (role)"]);
    let row = |name: &str| rows.iter().find(|r| r[0] == name).cloned().unwrap_or_else(|| panic!("{name}: {rows:?}"));
    assert_eq!(row("whose"), ["whose", "admin@example.com", "ADMIN"]);
    assert!(
        ["system: scheduler", "system: simulated runtime"].contains(&row("whose-too")[1].as_str())
            || row("whose-too")[1] == "alice@example.com",
        "{:?}",
        row("whose-too")
    );
}

/// A declaration that changes a policy's lifetime moves the expiry of its live sessions, and
/// each says so in its history, naming who applied it: the user of `--as`, else the system.
async fn apply_names_who_changed_a_policy(app: TestApp) {
    use sessiond::domain::directory::apply::{self, Options};
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": launch_input("policed", 1.0)})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let with_lifetime = |seconds: u32| {
        apply::DEMO.replace(
            "[keypair_policies.default]\n",
            &format!("[keypair_policies.default]\nmax_session_lifetime_seconds = {seconds}\n"),
        )
    };
    let run = |text: String, options: Options| {
        let db = app.db.clone();
        async move {
            let slots = apply::known_slots(&db).await.expect("slots");
            let sources = [apply::Source { name: "test.toml".to_owned(), text }];
            let declared = apply::file::parse(&sources, &slots).unwrap_or_else(|p| panic!("{p:#?}"));
            apply::apply(&db, &declared, options).await.expect("apply")
        }
    };
    let mut by_root = Options::new(false, false);
    by_root.actor = apply::actor_of(&app.db, "root@example.com").await.expect("a superadmin");
    run(with_lifetime(7200), by_root).await;
    run(with_lifetime(3600), Options::new(false, false)).await;
    // Applying the same again changes nothing, and says nothing.
    run(with_lifetime(3600), Options::new(false, false)).await;
    let s = app.gql(Some("demo-alice"), &detail(), json!({"id": id})).await["data"]["session"].clone();
    assert_eq!(
        lines(&s),
        [
            ("policy".to_owned(), system("apply")),
            ("policy".to_owned(), user("root@example.com", "SUPERADMIN")),
            ("enqueue".to_owned(), user("alice@example.com", "USER")),
        ],
        "{s}"
    );
    assert_eq!(
        apply::actor_of(&app.db, "alice@example.com").await,
        Err("--as alice@example.com: only a SUPERADMIN applies declarations".to_owned())
    );
    assert!(apply::actor_of(&app.db, "nobody@example.com").await.is_err());
}

db_tests!(every_change_names_who_made_it, apply_names_who_changed_a_policy);
