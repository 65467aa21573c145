//! Launching one or many sessions, validation, idempotency, races, the dry run, and
//! termination: through GraphQL, on both databases.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, sea_query::Expr};
use serde_json::{Value, json};

use entity::{launch_group, scheduling_history, session, session_status_transition};
use sessiond::domain::model::status::SessionStatus;
use sessiond::graphql::ids::{NodeKind, decode_uuid, encode};

use crate::db_tests;
use crate::support::{Backend, TestApp, error_codes, events_until_quiet, next_event, project};

/// Statements of one `launchSessions` (any count) with its payload, on SQLite: auth
/// (the keypair joined with its user), the project, its membership (checked once), image, slot types, the
/// project's groups (one join), the group's agents; in the transaction the
/// admission checks (policy, pending count, live names) and one insert per table (launch
/// group, sessions, transitions, history); then the payload's launch-group page.
/// `SESSIOND_TEST_SQL=1` prints them.
const LAUNCH_STATEMENTS_SQLITE: usize = 15;
/// The same on PostgreSQL, which also takes the keypair's advisory lock in the transaction,
/// and before the transitions the sequence lock, and after them a `NOTIFY`.
const LAUNCH_STATEMENTS_POSTGRES: usize = 18;

const GIB: i64 = 1 << 30;

fn input(name: &str) -> Value {
    json!({
        "projectId": project("default/default"),
        "name": name,
        "image": "python:3.12",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": GIB}],
    })
}

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id name status type requestedSlots { cpu memory } } } }";
const LAUNCH_MANY: &str = "mutation($i: LaunchSessionInput!, $n: Int!) {
  launchSessions(input: $i, count: $n) { launchGroup { id name count sessions { edges { node { name } } } } sessions { id name status } } }";
const TERMINATE: &str = "mutation($ids: [ID!]!, $force: Boolean) {
  terminateSessions(ids: $ids, force: $force) { results { sessionId outcome session { status } } } }";

async fn session_count(app: &TestApp) -> u64 {
    session::Entity::find().count(&app.db).await.expect("count")
}

async fn launch_one_and_many(app: TestApp) {
    let mut events = app.bus.subscribe();
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("notebook")})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let s = &resp["data"]["launchSession"]["session"];
    assert_eq!(
        (s["name"].as_str(), s["status"].as_str(), s["type"].as_str()),
        (Some("notebook"), Some("PENDING"), Some("INTERACTIVE"))
    );
    assert_eq!(s["requestedSlots"], json!({"cpu": 1.0, "memory": GIB}));
    let id = decode_uuid(s["id"].as_str().expect("id"), NodeKind::Session).expect("session id");
    let event = next_event(&mut events).await;
    assert_eq!((event.session.id, event.from, event.to), (id, None, SessionStatus::Pending));

    let transitions = session_status_transition::Entity::find()
        .filter(session_status_transition::Column::SessionId.eq(id))
        .order_by_asc(session_status_transition::Column::Id)
        .all(&app.db)
        .await
        .expect("rows");
    assert_eq!(transitions.len(), 1);
    assert_eq!((transitions[0].from_status.as_deref(), transitions[0].to_status.as_str()), (None, "PENDING"));
    let history = scheduling_history::Entity::find()
        .filter(scheduling_history::Column::SessionId.eq(id))
        .all(&app.db)
        .await
        .expect("rows");
    assert_eq!((history.len(), history[0].phase.as_str(), history[0].result.as_str()), (1, "enqueue", "SUCCESS"));

    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("train"), "n": 3})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let payload = &resp["data"]["launchSessions"];
    let names: Vec<&str> =
        payload["sessions"].as_array().expect("sessions").iter().map(|s| s["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["train-1", "train-2", "train-3"]);
    assert_eq!(payload["launchGroup"]["count"], 3);
    assert_eq!(payload["launchGroup"]["sessions"]["edges"].as_array().map(Vec::len), Some(3));
    let mut batch_events = Vec::new();
    for _ in 0..3 {
        batch_events.push(next_event(&mut events).await);
    }
    let more = events_until_quiet(&mut events, std::time::Duration::from_millis(300)).await;
    assert!(more.is_empty(), "one event per session: {more:?}");
    assert!(batch_events.windows(2).all(|w| w[0].seq < w[1].seq), "published in sequence order");

    // The list shows them, filtered by the launch group.
    let group = payload["launchGroup"]["id"].as_str().expect("group id");
    let list = app
        .gql(
            Some("demo-alice"),
            "query($p: ID!, $g: ID!) { sessions(projectId: $p, filter: {launchGroupId: $g}) { totalCount } }",
            json!({"p": project("default/default"), "g": group}),
        )
        .await;
    assert_eq!(list["data"]["sessions"]["totalCount"], 3, "{list}");

    // Batch sessions take a startup command and a timeout; the image lists its apps.
    let mut batch = input("etl-job");
    batch["type"] = json!("BATCH");
    batch["startupCommand"] = json!("python etl.py");
    batch["batchTimeoutSeconds"] = json!(600);
    batch["environment"] = json!([{"name": "STAGE", "value": "prod"}]);
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { type startupCommand batchTimeoutSeconds environment { name value } image { name apps } } } }",
            json!({"i": batch}),
        )
        .await;
    assert_eq!(
        resp["data"]["launchSession"]["session"],
        json!({"type": "BATCH", "startupCommand": "python etl.py", "batchTimeoutSeconds": 600,
               "environment": [{"name": "STAGE", "value": "prod"}], "image": {"name": "python:3.12", "apps": ["jupyter", "terminal"]}}),
        "{resp}"
    );
    let images =
        app.gql(Some("demo-carol"), "{ images { name supportedTypes minimumSlots { slot amount } } }", json!({})).await;
    assert_eq!(images["data"]["images"].as_array().map(Vec::len), Some(3), "{images}");
}

/// (changes to the valid input, expected problem code, field)
async fn every_validation_rule_reports_its_field(app: TestApp) {
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"name": "ab"}), "INVALID_NAME", "input.name"),
        (json!({"name": "-bad-"}), "INVALID_NAME", "input.name"),
        (json!({"image": "nope:1"}), "UNKNOWN_IMAGE", "input.image"),
        (json!({"type": "UPLOAD"}), "UNSUPPORTED_TYPE", "input.type"),
        (
            json!({"resources": [{"slot": "gpu", "amount": 1}, {"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": GIB}]}),
            "UNKNOWN_SLOT",
            "input.resources[0]",
        ),
        (
            json!({"resources": [{"slot": "cpu", "amount": -1}, {"slot": "mem", "amount": GIB}]}),
            "INVALID_AMOUNT",
            "input.resources[0]",
        ),
        (
            json!({"resources": [{"slot": "cpu", "amount": 1}, {"slot": "cpu", "amount": 2}, {"slot": "mem", "amount": GIB}]}),
            "DUPLICATE_SLOT",
            "input.resources[1]",
        ),
        (
            json!({"resources": [{"slot": "cpu", "amount": 0.1}, {"slot": "mem", "amount": GIB}]}),
            "BELOW_IMAGE_MINIMUM",
            "input.resources[0]",
        ),
        (json!({"resources": [{"slot": "cpu", "amount": 1}]}), "BELOW_IMAGE_MINIMUM", "input.resources"),
        (json!({"resourceGroup": "other"}), "UNKNOWN_RESOURCE_GROUP", "input.resourceGroup"),
        (json!({"resourceGroup": "nowhere"}), "UNKNOWN_RESOURCE_GROUP", "input.resourceGroup"),
        (json!({"type": "BATCH"}), "MISSING_STARTUP_COMMAND", "input.startupCommand"),
        (json!({"batchTimeoutSeconds": 60}), "BATCH_TIMEOUT_NOT_BATCH", "input.batchTimeoutSeconds"),
        (
            json!({"type": "BATCH", "startupCommand": "run", "batchTimeoutSeconds": 0}),
            "OUT_OF_RANGE",
            "input.batchTimeoutSeconds",
        ),
        (json!({"environment": [{"name": "9X", "value": "1"}]}), "INVALID_ENV_NAME", "input.environment[0]"),
        (
            json!({"environment": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}),
            "DUPLICATE_ENV_NAME",
            "input.environment[1]",
        ),
        (
            json!({"environment": [{"name": "A", "value": "x".repeat(5000)}]}),
            "INVALID_ENV_VALUE",
            "input.environment[0]",
        ),
        (json!({"startupCommand": "x".repeat(8193)}), "TOO_LONG", "input.startupCommand"),
        (
            json!({"environment": (0..101).map(|i| json!({"name": format!("V{i}"), "value": "1"})).collect::<Vec<_>>()}),
            "TOO_MANY",
            "input.environment",
        ),
        (json!({"clusterSize": 0}), "OUT_OF_RANGE", "input.clusterSize"),
        (json!({"priority": 101}), "OUT_OF_RANGE", "input.priority"),
        (json!({"idempotencyKey": ""}), "OUT_OF_RANGE", "input.idempotencyKey"),
        // NUL: refused alike on both databases, before any of the text reaches them.
        (json!({"image": "python:3.12\u{0000}"}), "NUL_CHARACTER", "input.image"),
        (json!({"name": "a\u{0000}"}), "NUL_CHARACTER", "input.name"),
        (json!({"resourceGroup": "default\u{0000}"}), "NUL_CHARACTER", "input.resourceGroup"),
        (json!({"type": "BATCH", "startupCommand": "echo \u{0000}"}), "NUL_CHARACTER", "input.startupCommand"),
        (json!({"idempotencyKey": "k\u{0000}"}), "NUL_CHARACTER", "input.idempotencyKey"),
        // Other control characters: none in one-line text, only tabs and line breaks in a
        // command or a value.
        (json!({"name": "abc\u{001b}[2J"}), "CONTROL_CHARACTER", "input.name"),
        (json!({"image": "python:3.12\t"}), "CONTROL_CHARACTER", "input.image"),
        (json!({"type": "BATCH", "startupCommand": "echo \u{0007}"}), "CONTROL_CHARACTER", "input.startupCommand"),
        (json!({"environment": [{"name": "A", "value": "x\u{0085}"}]}), "CONTROL_CHARACTER", "input.environment[0]"),
        (
            json!({"resources": (0..65).map(|i| json!({"slot": format!("s{i}"), "amount": 1})).collect::<Vec<_>>()}),
            "TOO_MANY",
            "input.resources",
        ),
        (
            json!({"resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": GIB}, {"slot": "cuda.device", "amount": 0.5}]}),
            "INVALID_AMOUNT",
            "input.resources[2]",
        ),
    ];
    for (change, code, field) in cases {
        let mut i = input("valid-name");
        for (k, v) in change.as_object().expect("object") {
            i[k] = v.clone();
        }
        for query in
            [LAUNCH, "query($i: LaunchSessionInput!) { checkLaunch(input: $i) { valid problems { code field } } }"]
        {
            let resp = app.gql(Some("demo-alice"), query, json!({"i": i})).await;
            if query == LAUNCH {
                assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{change}: {resp}");
                let problems = resp["errors"][0]["extensions"]["problems"].as_array().expect("problems");
                assert!(problems.iter().any(|p| p["code"] == code && p["field"] == field), "{change}: {resp}");
            } else {
                let check = &resp["data"]["checkLaunch"];
                assert_eq!(check["valid"], false, "{change}: {resp}");
                assert!(
                    check["problems"]
                        .as_array()
                        .expect("problems")
                        .iter()
                        .any(|p| p["code"] == code && p["field"] == field)
                );
            }
        }
    }
    // Every problem at once.
    let mut i = input("x");
    i["image"] = json!("nope");
    i["priority"] = json!(-500);
    i["environment"] = json!([{"name": "a-b", "value": ""}]);
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    let codes: Vec<&str> = resp["errors"][0]["extensions"]["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p["code"].as_str().expect("code"))
        .collect();
    assert_eq!(codes, ["INVALID_NAME", "UNKNOWN_IMAGE", "OUT_OF_RANGE", "INVALID_ENV_NAME"]);
    assert_eq!(session_count(&app).await, 0, "bad input changes nothing");

    // Not the project's member or not visible.
    let resp = app.gql(Some("demo-carol"), LAUNCH, json!({"i": input("valid-name")})).await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"]);
    let resp = app.gql(Some("demo-root"), LAUNCH, json!({"i": input("valid-name")})).await;
    assert_eq!(error_codes(&resp), ["FORBIDDEN"]);

    // A request no agent could ever hold.
    let mut i = input("too-big");
    i["resources"] = json!([{"slot": "cpu", "amount": 32}, {"slot": "mem", "amount": GIB}]);
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    assert_eq!(error_codes(&resp), ["NEVER_FITS"], "{resp}");
    assert!(resp["errors"][0]["message"].as_str().expect("message").contains("largest agent has 16"), "{resp}");
    let mut i = input("gpu-box");
    i["image"] = json!("pytorch:2.5-cuda12");
    i["resources"] = json!([{"slot": "cpu", "amount": 12}, {"slot": "mem", "amount": 4 * GIB}, {"slot": "cuda.device", "amount": 1}]);
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    assert_eq!(error_codes(&resp), ["NEVER_FITS"], "cpu 12 fits a3 and a GPU fits a1, but no agent has both: {resp}");
}

async fn count_bounds_and_the_pending_limit(app: TestApp) {
    for n in [0, -1, 101] {
        let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("many"), "n": n})).await;
        assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{n}");
        assert_eq!(resp["errors"][0]["extensions"]["problems"][0]["field"], "count");
    }
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("many"), "n": 21})).await;
    assert_eq!(error_codes(&resp), ["QUOTA_EXCEEDED"], "20 pending sessions at most: {resp}");
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("many"), "n": 20})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("one-more")})).await;
    assert_eq!(error_codes(&resp), ["QUOTA_EXCEEDED"]);
    let check = app
        .gql(
            Some("demo-alice"),
            "query($i: LaunchSessionInput!) { checkLaunch(input: $i) { valid problems { code } } }",
            json!({"i": input("one-more")}),
        )
        .await;
    assert_eq!(check["data"]["checkLaunch"], json!({"valid": false, "problems": [{"code": "QUOTA_EXCEEDED"}]}));
    // Another user's limit is their own.
    let resp = app.gql(Some("demo-bob"), LAUNCH, json!({"i": input("one-more")})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
}

async fn a_batch_is_all_or_nothing(app: TestApp) {
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("jobs-4")})).await;
    let jobs4 = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let before = session_count(&app).await;
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("jobs"), "n": 6})).await;
    assert_eq!(error_codes(&resp), ["NAME_TAKEN"], "{resp}");
    assert_eq!(session_count(&app).await, before, "none of the batch was created");
    assert_eq!(launch_group::Entity::find().count(&app.db).await.expect("count"), 0);
    // Another owner may use the names.
    let resp = app.gql(Some("demo-bob"), LAUNCH_MANY, json!({"i": input("jobs"), "n": 6})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    // A finished session frees its name: `jobs-4` is scheduled, runs, and is ended.
    let report = sessiond::domain::scheduling::pass(&app.db, &app.bus).await.expect("pass");
    assert_eq!(report.scheduled, 7, "jobs-4 and bob's six");
    set_status(&app, &jobs4, "RUNNING").await;
    let resp = app.gql(Some("demo-alice"), TERMINATE, json!({"ids": [jobs4], "force": true})).await;
    assert_eq!(resp["data"]["terminateSessions"]["results"][0]["outcome"], "TERMINATED", "{resp}");
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("jobs"), "n": 6})).await;
    assert!(resp.get("errors").is_none(), "the name of a finished session is free again: {resp}");
    let names: Vec<&str> = resp["data"]["launchSessions"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["jobs-1", "jobs-2", "jobs-3", "jobs-4", "jobs-5", "jobs-6"]);
    let live_jobs4 = session::Entity::find()
        .filter(session::Column::Name.eq("jobs-4"))
        .filter(session::Column::OwnerId.eq(sessiond::domain::directory::seed::demo_user_id("alice@example.com")))
        .all(&app.db)
        .await
        .expect("rows");
    let mut statuses: Vec<&str> = live_jobs4.iter().map(|s| s.status.as_str()).collect();
    statuses.sort();
    assert_eq!(statuses, ["PENDING", "TERMINATED"], "the finished one and the new one");
}

async fn concurrent_launches_of_one_name_have_one_winner(app: TestApp) {
    let app = std::sync::Arc::new(app);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("race")})).await })
        })
        .collect();
    let mut wins = 0;
    let mut taken = 0;
    for t in tasks {
        let resp = t.await.expect("task");
        match error_codes(&resp).as_slice() {
            [] => wins += 1,
            [code] if code == "NAME_TAKEN" => taken += 1,
            other => panic!("unexpected {other:?}: {resp}"),
        }
        assert!(!resp.to_string().contains("constraint"), "{resp}");
    }
    assert_eq!((wins, taken), (1, 7));
    assert_eq!(session_count(&app).await, 1);
}

async fn an_idempotent_retry_creates_nothing(app: TestApp) {
    let mut i = input("double-click");
    i["idempotencyKey"] = json!("launch-7f3a");
    let first = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    let again = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    assert!(first.get("errors").is_none(), "{first}");
    assert_eq!(first["data"]["launchSession"]["session"]["id"], again["data"]["launchSession"]["session"]["id"]);
    assert_eq!(session_count(&app).await, 1);
    // Concurrent retries too.
    let mut j = input("batch-click");
    j["idempotencyKey"] = json!("launch-8b1c");
    let app = std::sync::Arc::new(app);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (app, j) = (app.clone(), j.clone());
            tokio::spawn(async move { app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": j, "n": 3})).await })
        })
        .collect();
    let mut groups = std::collections::HashSet::new();
    for t in tasks {
        let resp = t.await.expect("task");
        assert!(resp.get("errors").is_none(), "concurrent retry: {resp}");
        groups.insert(resp["data"]["launchSessions"]["launchGroup"]["id"].to_string());
    }
    assert_eq!(groups.len(), 1, "every retry answers with the first launch");
    assert_eq!(session_count(&app).await, 4);
    // A key used for a single launch does not replay a batch, nor another launch.
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": i, "n": 2})).await;
    assert_eq!(error_codes(&resp), ["IDEMPOTENCY_KEY_REUSED"], "{resp}");
    let mut changed = i.clone();
    changed["resources"][0]["amount"] = json!(2);
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": changed})).await;
    assert_eq!(error_codes(&resp), ["IDEMPOTENCY_KEY_REUSED"], "{resp}");
    // Authorized and validated before any replay: the key opens nothing the caller may
    // not do, and a bad input is reported, not answered with the first launch.
    let mut elsewhere = i.clone();
    elsewhere["projectId"] = json!(project("other/other"));
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": elsewhere})).await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"], "{resp}");
    let mut invalid = i.clone();
    invalid["image"] = json!("no-such-image:1");
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": invalid})).await;
    assert_eq!(resp["errors"][0]["extensions"]["problems"][0]["field"], "input.image", "{resp}");
    assert_eq!(session_count(&app).await, 4);
    // The key is the user's: another user with the same key launches their own.
    let resp = app.gql(Some("demo-bob"), LAUNCH, json!({"i": i})).await;
    assert_ne!(resp["data"]["launchSession"]["session"]["id"], first["data"]["launchSession"]["session"]["id"]);
    assert_eq!(session_count(&app).await, 5);
}

async fn set_status(app: &TestApp, id: &str, status: &str) {
    let uuid = decode_uuid(id, NodeKind::Session).expect("id");
    session::Entity::update_many()
        .col_expr(session::Column::Status, Expr::value(status))
        .filter(session::Column::Id.eq(uuid))
        .exec(&app.db)
        .await
        .expect("set status");
}

async fn terminate_outcomes_for_every_status(app: TestApp) {
    let mut ids = Vec::new();
    for (i, status) in SessionStatus::ALL.iter().enumerate() {
        let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input(&format!("end-{i}"))})).await;
        let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
        set_status(&app, &id, status.as_str()).await;
        ids.push((id, *status));
    }
    // Others see nothing of alice's sessions.
    for token in ["demo-bob", "demo-carol"] {
        let resp = app.gql(Some(token), TERMINATE, json!({"ids": ids.iter().map(|i| &i.0).collect::<Vec<_>>()})).await;
        let outcomes: Vec<&str> = resp["data"]["terminateSessions"]["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{resp}"))
            .iter()
            .map(|r| r["outcome"].as_str().expect("o"))
            .collect();
        assert_eq!(outcomes, vec!["NOT_FOUND"; ids.len()], "{token}: {resp}");
    }
    app.settled().await;
    let mut events = app.bus.subscribe();
    let mut request: Vec<String> = ids.iter().map(|i| i.0.clone()).collect();
    request.push(encode(NodeKind::Session, uuid::Uuid::new_v4()).0);
    request.push("junk".to_owned());
    let resp = app.gql(Some("demo-alice"), TERMINATE, json!({"ids": request})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let results = resp["data"]["terminateSessions"]["results"].as_array().expect("results");
    assert_eq!(results.len(), request.len(), "one outcome per id, in order");
    let mut changed = 0;
    for (r, (id, status)) in results.iter().zip(&ids) {
        use SessionStatus::*;
        let (outcome, after) = match status {
            Pending => ("CANCELLED", "CANCELLED"),
            Scheduled | Preparing | Pulling | Prepared | Creating | Running => ("TERMINATING", "TERMINATING"),
            other => ("SKIPPED", other.as_str()),
        };
        changed += usize::from(outcome != "SKIPPED");
        assert_eq!(r["sessionId"], json!(id));
        assert_eq!((r["outcome"].as_str(), r["session"]["status"].as_str()), (Some(outcome), Some(after)), "{status}");
    }
    assert_eq!(results[ids.len()]["outcome"], "NOT_FOUND");
    assert_eq!(results[ids.len() + 1]["outcome"], "NOT_FOUND");
    let mut published = Vec::new();
    for _ in 0..changed {
        published.push(next_event(&mut events).await);
    }
    let more = events_until_quiet(&mut events, std::time::Duration::from_millis(300)).await;
    assert!(more.is_empty(), "one event per change: {more:?}");
    assert_eq!(changed, 7, "PENDING and the six started statuses change; the four others are skipped");

    // Force ends a TERMINATING session at once; admins may end users' sessions. (Force on
    // the other statuses: `launch_rules::force_ends_sessions_at_once_and_frees_capacity`.)
    let running = &ids.iter().find(|i| i.1 == SessionStatus::Running).expect("running").0;
    let resp = app.gql(Some("demo-admin"), TERMINATE, json!({"ids": [running], "force": true})).await;
    assert_eq!(resp["data"]["terminateSessions"]["results"][0]["outcome"], "TERMINATED", "{resp}");
    let detail = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { status terminatedAt statusTransitions { fromStatus toStatus } } }",
            json!({"id": running}),
        )
        .await;
    let s = &detail["data"]["session"];
    assert_eq!(s["status"], "TERMINATED");
    assert!(s["terminatedAt"].is_string());
    let last = s["statusTransitions"].as_array().expect("transitions").last().cloned();
    assert_eq!(last, Some(json!({"fromStatus": "TERMINATING", "toStatus": "TERMINATED"})));
    // A cancelled name is free again.
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("end-0")})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
}

async fn a_failed_launch_leaves_no_rows_and_no_events(app: TestApp) {
    let mut events = app.bus.subscribe();
    app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("before")})).await;
    // The feed is asynchronous: take this launch's event before looking for more.
    assert_eq!(next_event(&mut events).await.to, SessionStatus::Pending);
    let before = session_count(&app).await;
    let transitions = session_status_transition::Entity::find().count(&app.db).await.expect("count");
    // Break the last table the launch writes: the transaction fails after the sessions,
    // group and transitions are written.
    app.db.execute_unprepared("DROP TABLE scheduling_history").await.expect("drop");
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("doomed"), "n": 5})).await;
    assert_eq!(error_codes(&resp), ["INTERNAL"], "{resp}");
    assert!(!resp.to_string().contains("scheduling_history"), "{resp}");
    assert_eq!(session_count(&app).await, before);
    assert_eq!(session_status_transition::Entity::find().count(&app.db).await.expect("count"), transitions);
    assert_eq!(launch_group::Entity::find().count(&app.db).await.expect("count"), 0);
    let published = events_until_quiet(&mut events, std::time::Duration::from_millis(500)).await;
    assert!(published.is_empty(), "nothing published for a rolled-back launch: {published:?}");
}

async fn a_batch_costs_the_same_statements_whatever_its_count(app: TestApp) {
    let mut counts = Vec::new();
    let mut writes = Vec::new();
    for (i, n) in [1, 5, 14].into_iter().enumerate() {
        let (texts, resp) = app
            .statement_texts(app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input(&format!("bulk{i}")), "n": n})))
            .await;
        assert!(resp.get("errors").is_none(), "{resp}");
        counts.push(texts.len());
        // Every row it writes, each table in one statement whose text is the same whatever
        // the count (one statement to prepare, one parameter).
        writes.push(texts.into_iter().filter(|t| t.starts_with("INSERT")).collect::<Vec<_>>());
    }
    let expected = match app.backend {
        Backend::Sqlite => LAUNCH_STATEMENTS_SQLITE,
        Backend::Postgres => LAUNCH_STATEMENTS_POSTGRES,
    };
    assert_eq!(counts, [expected; 3], "{:?}", app.backend);
    let tables =
        |w: &[String]| w.iter().map(|t| t.split_whitespace().nth(2).unwrap_or_default().to_owned()).collect::<Vec<_>>();
    assert_eq!(
        tables(&writes[0]),
        ["\"launch_groups\"", "\"sessions\"", "\"scheduling_history\"", "\"session_status_transitions\""],
        "{:?}",
        writes[0]
    );
    assert_eq!(writes[0], writes[1], "{:?}", app.backend);
    assert_eq!(writes[0], writes[2], "{:?}", app.backend);
}

db_tests!(
    launch_one_and_many,
    every_validation_rule_reports_its_field,
    count_bounds_and_the_pending_limit,
    a_batch_is_all_or_nothing,
    concurrent_launches_of_one_name_have_one_winner,
    an_idempotent_retry_creates_nothing,
    terminate_outcomes_for_every_status,
    a_failed_launch_leaves_no_rows_and_no_events,
    a_batch_costs_the_same_statements_whatever_its_count,
);
