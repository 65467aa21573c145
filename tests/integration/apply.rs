//! `sessiond apply` through the domain, on both databases: the demo is `demo.toml` applied;
//! a changed limit is what the panel and the scheduler use next; pruning refuses what live
//! sessions use and writes nothing then; a bad declaration reports every problem with its
//! line and writes nothing; `Query.configuration` shows it all to a superadministrator only.
//! (An empty database applied to, then launched in, is `cli::deploy_as_the_readme_says`.)

use sea_orm::{ActiveModelTrait, EntityTrait, PaginatorTrait};
use serde_json::{Value, json};

use sessiond::domain::directory::apply::{self, Action, ApplyError, ApplyInputError, Declared, Options, Source};
use sessiond::domain::model::status::SessionStatus;

use crate::db_tests;
use crate::support::{TestApp, error_codes, launch_input, project, session_row};

/// `demo.toml` with each `(from, to)` replaced once (each must be there).
fn demo_with(edits: &[(&str, &str)]) -> String {
    let mut text = apply::DEMO.to_owned();
    for (from, to) in edits {
        assert!(text.contains(from), "demo.toml has {from:?}");
        text = text.replacen(from, to, 1);
    }
    text
}

async fn declared(app: &TestApp, text: &str) -> Declared {
    let slots = apply::known_slots(&app.db).await.expect("slots");
    apply::file::parse(&[Source { name: "test.toml".to_owned(), text: text.to_owned() }], &slots)
        .unwrap_or_else(|p| panic!("{p:#?}"))
}

async fn apply_text(app: &TestApp, text: &str, options: Options) -> Result<apply::Plan, ApplyError> {
    apply::apply(&app.db, &declared(app, text).await, options).await
}

async fn the_demo_is_demo_toml_applied(app: TestApp) {
    assert!(app.seeded);
    let plan = apply_text(&app, apply::DEMO, Options::new(true, false)).await.expect("apply");
    assert_eq!(plan, apply::Plan::default(), "`--demo` left exactly what demo.toml declares, nothing else");

    // The images' local environments are stored with them.
    let local = sessiond::domain::directory::catalog::local_environments(&app.db).await.expect("environments");
    assert_eq!(local["python:3.12"].prepare.as_deref(), Some("python3 --version"));
    assert!(local["filebrowser:latest"].interactive_command().contains("http.server"));

    // The demo's public tokens authenticate as its users (their roles and
    // projects: `auth::every_demo_user_authenticates`).
    for u in sessiond::domain::directory::seed::DEMO_USERS {
        let resp = app.gql(Some(u.token), "{ viewer { user { email } } }", json!({})).await;
        assert_eq!(resp["data"]["viewer"]["user"]["email"], u.email, "{resp}");
    }
}

const SESSION: &str = "query($id: ID!) { session(id: $id) { status pendingReasons { code layer slot } } }";
const PANEL: &str = "query($p: ID!) { resourcePanel(projectId: $p, view: MY_TOTAL) {
  slots { slot used limit remaining bindingLayer } } }";

fn cpu_of(panel: &Value) -> Value {
    panel["data"]["resourcePanel"]["slots"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["slot"] == "cpu"))
        .cloned()
        .unwrap_or_else(|| panic!("no cpu in {panel}"))
}

async fn launch(app: &TestApp, name: &str, cpu: f64) -> String {
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": launch_input(name, cpu)}),
        )
        .await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn a_changed_limit_is_what_the_panel_and_the_scheduler_use_next(mut app: TestApp) {
    app.start_workers();
    let running = launch(&app, "big-one", 4.0).await;
    let is = |status: &'static str| move |r: &Value| r["data"]["session"]["status"] == status;
    app.wait_for("demo-alice", SESSION, json!({"id": running}), is("RUNNING")).await;

    // The keypair policy's cpu drops below what alice uses: nothing running stops.
    let lowered = demo_with(&[("limits = { cpu = 16, mem", "limits = { cpu = 2, mem")]);
    let plan = apply_text(&app, &lowered, Options::default()).await.expect("apply");
    let shown: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["~ keypair policy default: limits: cpu 16 → 2"]);
    let cpu = cpu_of(&app.gql(Some("demo-alice"), PANEL, json!({"p": project("default/default")})).await);
    assert_eq!((cpu["used"].as_f64(), cpu["limit"].as_f64()), (Some(4.0), Some(2.0)), "{cpu}");
    assert_eq!((cpu["bindingLayer"].as_str(), cpu["remaining"].as_f64()), (Some("KEYPAIR"), Some(0.0)), "{cpu}");

    // A new session waits on the keypair's quota; the first still runs.
    let waiting = launch(&app, "small-one", 1.0).await;
    let quota = |r: &Value| {
        r["data"]["session"]["pendingReasons"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|p| p["code"] == "QUOTA_EXCEEDED" && p["layer"] == "KEYPAIR"))
    };
    app.wait_for("demo-alice", SESSION, json!({"id": waiting}), quota).await;
    let first = app.gql(Some("demo-alice"), SESSION, json!({"id": running})).await;
    assert_eq!(first["data"]["session"]["status"], "RUNNING", "lowering a limit kills nothing: {first}");

    // Raised again, the scheduler places the waiting one at its next pass.
    let plan = apply_text(&app, apply::DEMO, Options::default()).await.expect("apply");
    assert_eq!(plan.changes.len(), 1);
    app.wait_for("demo-alice", SESSION, json!({"id": waiting}), is("RUNNING")).await;
}

async fn prune_refuses_what_live_sessions_use_and_then_writes_nothing(app: TestApp) {
    let live = session_row("alice@example.com", "default/research", "live", "RUNNING", json!({"cpu": 1}))
        .insert(&app.db)
        .await
        .expect("insert");
    // research gone (and from its members' lists), plus a change that must not land alone.
    let without_research = demo_with(&[
        ("[projects.\"default/research\"]\nlimits = { \"cuda.device\" = 2 }\nresource_groups = [\"default\"]\n", ""),
        ("projects = [\"default\", \"research\"]", "projects = [\"default\"]"),
        ("projects = [\"default\", \"research\"]", "projects = [\"default\"]"),
        ("projects = [\"default\", \"research\"]", "projects = [\"default\"]"),
        ("limits = { cpu = 48 }", "limits = { cpu = 50 }"),
    ]);
    let plan = apply_text(&app, &without_research, Options::new(false, true)).await.expect("without prune");
    assert_eq!(plan.undeclared, ["project default/research"], "kept without --prune, and said so");

    let refused = apply_text(&app, &without_research, Options::new(true, false)).await;
    match refused {
        Err(ApplyError::Refused(why)) => {
            assert_eq!(why, ["project default/research: 1 live session(s) use it"]);
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let d = entity::domain::Entity::find_by_id(sessiond::domain::model::ids::stable_id("domain", "default"))
        .one(&app.db)
        .await
        .expect("domain")
        .expect("default");
    assert_eq!(d.total_resource_slots["cpu"], 48, "a refused apply writes nothing, not even the rest");

    // Once it has ended, the project goes, and its finished session with it, as planned.
    let mut ended: entity::session::ActiveModel = live.into();
    ended.status = sea_orm::Set(SessionStatus::Terminated.as_str().to_owned());
    ended.update(&app.db).await.expect("end it");
    let dry = apply_text(&app, &without_research, Options::new(true, true)).await.expect("dry");
    let plan = apply_text(&app, &without_research, Options::new(true, false)).await.expect("prune");
    assert_eq!(dry, plan, "a dry run plans exactly what the apply does");
    let deleted: Vec<String> =
        plan.changes.iter().filter(|c| c.action == Action::Delete).map(ToString::to_string).collect();
    assert_eq!(deleted, ["- project default/research: with the records of 1 finished session(s)"]);
    assert_eq!(entity::session::Entity::find().count(&app.db).await.expect("count"), 0);
    let resp = app.gql(Some("demo-alice"), "{ viewer { projects { name } } }", json!({})).await;
    assert_eq!(resp["data"]["viewer"]["projects"], json!([{"name": "default"}]), "{resp}");
    let again = apply_text(&app, &without_research, Options::new(true, false)).await.expect("again");
    assert!(again.changes.is_empty(), "{again:?}");
}

async fn a_bad_declaration_reports_every_problem_and_writes_nothing(app: TestApp) {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("a.toml"), "[domains.acme]\nlimits = { cpu = -2 }\n").expect("write");
    std::fs::write(
        dir.path().join("b.toml"),
        "[projects.\"nowhere/ml\"]\n\n[users.\"ann@acme.io\"]\ndomain = \"acme\"\nteam = \"ml\"\n\n\
         [users.\"Ann@ACME.io\"]\ndomain = \"acme\"\n",
    )
    .expect("write");
    let problems = match apply::read(&app.db, dir.path()).await {
        Err(ApplyInputError::Invalid(problems)) => problems,
        other => panic!("expected problems: {other:?}"),
    };
    let a = dir.path().join("a.toml").display().to_string();
    let b = dir.path().join("b.toml").display().to_string();
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            format!("{a}:2: domains.acme.limits.cpu: must not be negative, not -2"),
            format!("{b}:1: projects.\"nowhere/ml\": domain nowhere is not declared (in [domains])"),
            format!(
                "{b}:5: users.\"ann@acme.io\".team: unknown key; the keys here are domain, role, name, projects, keypairs"
            ),
            format!("{b}:7: users.\"Ann@ACME.io\": declared again (first at {b}:3)"),
        ]
    );
    assert_eq!(entity::domain::Entity::find().count(&app.db).await.expect("count"), 2, "only the demo's");
}

/// Findings: apply read `/dev/zero` until memory ran out and hung on a FIFO. It reads
/// regular files only, at most its cap and a byte.
async fn only_regular_files_within_the_cap_are_read(app: TestApp) {
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("pipe.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let big = dir.path().join("big.toml");
    std::fs::write(&big, "# ".repeat(5 << 20)).expect("a file over 8 MiB");
    for (path, why) in [
        (fifo.clone(), "is not a regular file"),
        (std::path::PathBuf::from("/dev/zero"), "is not a regular file"),
        (big.clone(), "larger than"),
    ] {
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), apply::read(&app.db, &path))
            .await
            .unwrap_or_else(|_| panic!("{} was read for ever", path.display()));
        match read {
            Err(ApplyInputError::Unreadable(e)) => assert!(e.contains(why), "{}: {e}", path.display()),
            other => panic!("{}: {other:?}", path.display()),
        }
    }
    // A directory: the FIFO among its files is refused the same way.
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), apply::read(&app.db, dir.path()))
        .await
        .expect("not for ever");
    assert!(
        matches!(read, Err(ApplyInputError::Unreadable(ref e)) if e.contains("not a regular file") || e.contains("larger than")),
        "{read:?}"
    );
}

async fn the_configuration_is_for_superadministrators(app: TestApp) {
    session_row("alice@example.com", "default/default", "held", "RUNNING", json!({"cpu": 3}))
        .insert(&app.db)
        .await
        .map(|_| ())
        .expect("insert");
    let mut row = session_row("bob@example.com", "default/default", "placed", "RUNNING", json!({"cpu": 2}));
    row.agent_id = sea_orm::Set(Some("a2".to_owned()));
    row.insert(&app.db).await.expect("insert");
    let query = "{ configuration {
      domains { name limits { slot amount } userCount projects { name limits { slot amount } resourceGroups memberCount } }
      keypairPolicies { name limits { slot amount } maxConcurrentSessions maxPendingSessions maxSessionLifetimeSeconds }
      resourceGroups { group { name strategy } agents { name capacity { slot amount } occupied { slot amount } alive schedulable } }
      images { name supportedTypes }
    } }";
    let (n, resp) = app.count_statements(app.gql(Some("demo-root"), query, json!({}))).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let c = &resp["data"]["configuration"];
    assert_eq!(c["domains"][0]["name"], "default");
    assert_eq!(c["domains"][0]["limits"], json!([{"slot": "cpu", "amount": 48.0}]));
    assert_eq!(c["domains"][0]["userCount"], 4);
    assert_eq!(
        c["domains"][0]["projects"][1],
        json!({"name": "research", "limits": [{"slot": "cuda.device", "amount": 2.0}], "resourceGroups": ["default"], "memberCount": 3})
    );
    assert_eq!(c["keypairPolicies"][0]["maxConcurrentSessions"], 10);
    let a2 = &c["resourceGroups"][0]["agents"][1];
    assert_eq!(a2["name"], "a2");
    assert_eq!(a2["occupied"], json!([{"slot": "cpu", "amount": 2.0}]), "what its sessions hold: {a2}");
    assert_eq!((a2["alive"].as_bool(), a2["schedulable"].as_bool()), (Some(true), Some(true)));
    assert_eq!(c["images"].as_array().map(Vec::len), Some(3));
    // Authentication, then eleven statements whatever the configuration's size.
    assert_eq!(n, 12, "statements");

    for token in ["demo-admin", "demo-alice"] {
        let resp = app.gql(Some(token), "{ configuration { images { name } } }", json!({})).await;
        assert_eq!(error_codes(&resp), ["FORBIDDEN"], "{resp}");
    }
}

/// Users changed every way a file changes them apply once: the second apply is a no-op.
async fn changes_apply_once_and_prune_takes_a_user_with_its_policy(app: TestApp) {
    let sha = sessiond::domain::directory::auth::hash_token("svc-secret");
    let extra = format!(
        "\n[keypair_policies.legacy]\nlimits = {{ cpu = 1 }}\n\
         [users.\"Svc@Example.com\"]\ndomain = \"default\"\nprojects = [\"research\"]\n\
         keypairs = [{{ access_key = \"AKSVC\", policy = \"legacy\", secret_sha256 = \"{}\" }}]\n",
        sha.to_uppercase()
    );
    let changed = demo_with(&[
        ("[users.\"carol@other.example\"]", "[users.\"Carol@Other.Example\"]"),
        (
            "projects = [\"default\", \"research\"]\nkeypairs = [{ access_key = \"AKDEMOBOB\"",
            "projects = [\"default\"]\nkeypairs = [{ access_key = \"AKDEMOBOB\"",
        ),
        ("resource_groups = [\"other\"]", "resource_groups = [\"other\", \"default\"]"),
    ]) + &extra;
    let plan = apply_text(&app, &changed, Options::default()).await.expect("apply");
    let shown: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "+ keypair policy legacy: limits: cpu 1",
            "~ project other/other: resource_groups: [other] → [other, default]",
            "~ user bob@example.com: projects: [default/default, default/research] → [default/default]",
            "+ user svc@example.com: USER in default; projects: default/research",
            "+ keypair AKSVC: of svc@example.com, policy legacy",
        ],
        "carol's email in another case is carol"
    );
    let again = apply_text(&app, &changed, Options::default()).await.expect("again");
    assert_eq!(again, apply::Plan::default());
    let bob = app.gql(Some("demo-bob"), "{ viewer { projects { name } } }", json!({})).await;
    assert_eq!(bob["data"]["viewer"]["projects"], json!([{"name": "default"}]), "{bob}");
    let svc = app.gql(Some("svc-secret"), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(svc["data"]["viewer"]["user"]["email"], "svc@example.com", "{svc}");

    // The user and its keypair's policy both undeclared: pruned together, the user first.
    let plan = apply_text(&app, apply::DEMO, Options::new(true, false)).await.expect("prune");
    let deleted: Vec<String> =
        plan.changes.iter().filter(|c| c.action == Action::Delete).map(ToString::to_string).collect();
    assert_eq!(deleted, ["- user svc@example.com", "- keypair policy legacy"]);

    // Another keypair's secret is refused by name, and nothing is written.
    let twin = demo_with(&[("secret = \"demo-bob\"", "secret = \"demo-alice\"")]);
    let problems = apply::file::parse(
        &[Source { name: "twin.toml".to_owned(), text: twin }],
        &apply::known_slots(&app.db).await.expect("slots"),
    )
    .expect_err("two keypairs, one secret");
    assert!(problems[0].message.contains("has the secret of keypair"), "{problems:?}");
    // A keypair the files do not declare (made by `token create`) keeps its secret to itself.
    entity::keypair::ActiveModel {
        id: sea_orm::Set(uuid::Uuid::new_v4()),
        user_id: sea_orm::Set(sessiond::domain::directory::seed::demo_user_id("alice@example.com")),
        access_key: sea_orm::Set("AKEXTRA".to_owned()),
        secret_hash: sea_orm::Set(sessiond::domain::directory::auth::hash_token("extra-secret")),
        resource_policy: sea_orm::Set("default".to_owned()),
        is_active: sea_orm::Set(true),
        created_at: sea_orm::Set(chrono::Utc::now()),
    }
    .insert(&app.db)
    .await
    .expect("insert");
    let stolen = demo_with(&[("secret = \"demo-bob\"", "secret = \"extra-secret\"")]);
    match apply_text(&app, &stolen, Options::default()).await {
        Err(ApplyError::Refused(why)) => {
            assert_eq!(
                why,
                ["keypair AKDEMOBOB: its secret is the secret of keypair AKEXTRA already; every keypair needs its own"]
            );
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let bob = app.gql(Some("demo-bob"), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(bob["data"]["viewer"]["user"]["email"], "bob@example.com", "nothing written: {bob}");
}

/// Agents drained through `apply`: a request only drained agents could hold waits with the
/// reason, without holding up the requests behind it, instead of being refused; with every
/// agent drained a launch waits too; all run once the agents are back. What no agent could
/// ever hold is still refused.
async fn a_drained_group_queues_launches_until_its_agents_return(mut app: TestApp) {
    app.start_workers();
    let drained = demo_with(&[
        (
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\n",
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\nschedulable = false\n",
        ),
        (
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\n\n[agents.a3]",
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\nschedulable = false\n\n[agents.a3]",
        ),
        ("slots = { cpu = 16, mem = \"64 GiB\" }\n", "slots = { cpu = 16, mem = \"64 GiB\" }\nschedulable = false\n"),
    ]);
    // The GPU agents drained: a GPU request waits for them without holding up the rest.
    let gpus_drained = demo_with(&[
        (
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\n",
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\nschedulable = false\n",
        ),
        (
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\n\n[agents.a3]",
            "slots = { cpu = 8, mem = \"32 GiB\", \"cuda.device\" = 2 }\nschedulable = false\n\n[agents.a3]",
        ),
    ]);
    apply_text(&app, &gpus_drained, Options::default()).await.expect("drain the GPU agents");
    let mut gpu = launch_input("gpu-one", 1.0);
    gpu["resources"].as_array_mut().expect("resources").push(json!({"slot": "cuda.device", "amount": 1}));
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": gpu}),
        )
        .await;
    let gpu_id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    app.wait_for("demo-alice", SESSION, json!({"id": gpu_id}), |r: &Value| {
        r["data"]["session"]["pendingReasons"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|p| p["code"] == "NO_CAPACITY"))
    })
    .await;
    let cpu_only = launch(&app, "cpu-one", 1.0).await;
    app.wait_for("demo-alice", SESSION, json!({"id": cpu_only}), |r: &Value| {
        r["data"]["session"]["status"] == "RUNNING"
    })
    .await;
    let message = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { status pendingReasons { message } } }",
            json!({"id": gpu_id}),
        )
        .await;
    assert_eq!(message["data"]["session"]["status"], "PENDING", "{message}");
    assert!(message.to_string().contains("others are drained or not answering"), "{message}");

    // Every agent drained.
    let plan = apply_text(&app, &drained, Options::default()).await.expect("drain");
    let shown: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["~ agent a3: schedulable: true → false"]);
    let waiting = launch(&app, "patient", 1.0).await;
    let reason = |r: &Value| {
        r["data"]["session"]["pendingReasons"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|p| p["code"] == "NO_CAPACITY"))
    };
    let seen = app.wait_for("demo-alice", SESSION, json!({"id": waiting}), reason).await;
    assert_eq!(seen["data"]["session"]["status"], "PENDING", "{seen}");
    let message = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { pendingReasons { message } } }",
            json!({"id": waiting}),
        )
        .await;
    assert!(message.to_string().contains("others are drained or not answering"), "{message}");
    let huge = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": launch_input("huge-one", 17.0)}),
        )
        .await;
    assert_eq!(error_codes(&huge), ["NEVER_FITS"], "more than any agent, drained or not, could hold: {huge}");

    apply_text(&app, apply::DEMO, Options::default()).await.expect("undrain");
    for id in [&waiting, &gpu_id] {
        app.wait_for("demo-alice", SESSION, json!({"id": id}), |r| r["data"]["session"]["status"] == "RUNNING").await;
    }
}

const GROUPS_PAGE: &str = "query($p: ID!) { sessions(projectId: $p, first: 10) {
  nodes { name resourceGroup { name description } image { name } } } }";

/// A page shows its sessions' groups and images from the catalog each server keeps: what
/// `apply` changes is shown within a poll of the revision, by the executor and the compiled
/// list alike, and a group the catalog does not hold yet is read with the page.
async fn a_page_shows_the_catalog_as_applied(app: TestApp) {
    use sea_orm::Set;
    let p = project("default/default");
    session_row("alice@example.com", "default/default", "held", "RUNNING", json!({"cpu": 1}))
        .insert(&app.db)
        .await
        .expect("insert a session");
    let node = |resp: &Value, name: &str| -> Value {
        let nodes = resp["data"]["sessions"]["nodes"].as_array().cloned().unwrap_or_default();
        nodes.into_iter().find(|n| n["name"] == name).unwrap_or_else(|| panic!("{name} in {resp}"))
    };
    let description = |resp: &Value| node(resp, "held")["resourceGroup"]["description"].clone();
    // Asked twice: the executor answers first, the compiled list next.
    for _ in 0..2 {
        let resp = app.gql(Some("demo-alice"), GROUPS_PAGE, json!({"p": p})).await;
        assert_eq!(description(&resp), "Shared pool of the default domain", "{resp}");
        assert_eq!(node(&resp, "held")["image"]["name"], "python:3.12", "{resp}");
    }
    let renamed = demo_with(&[("Shared pool of the default domain", "Shared pool, renamed")]);
    apply_text(&app, &renamed, Options::default()).await.expect("apply");
    app.wait_for("demo-alice", GROUPS_PAGE, json!({"p": p}), |r| description(r) == "Shared pool, renamed").await;
    let resp = app.gql(Some("demo-alice"), GROUPS_PAGE, json!({"p": p})).await;
    assert_eq!(description(&resp), "Shared pool, renamed", "{resp}");

    // Written behind the server's back (the revision unmoved): not in the catalog, so read.
    crate::support::add_resource_group(&app, "extra", &["INTERACTIVE"], &[], &[]).await;
    let mut row = session_row("alice@example.com", "default/default", "elsewhere", "RUNNING", json!({"cpu": 1}));
    row.resource_group = Set("extra".to_owned());
    row.insert(&app.db).await.expect("insert a session");
    for _ in 0..2 {
        let resp = app.gql(Some("demo-alice"), GROUPS_PAGE, json!({"p": p})).await;
        assert_eq!(node(&resp, "elsewhere")["resourceGroup"]["description"], "test group extra", "{resp}");
    }
}

/// Storage is declared, stored, changed and pruned like the rest; a project it names must
/// be declared, its path is absolute and its quota a size.
async fn storage_is_declared_changed_and_pruned(app: TestApp) {
    let with = |quota: &str| {
        format!(
            "{}\n[storage.shared]\npath = \"/data/shared\"\nquota = \"{quota}\"\nprojects = [\"default/default\"]\n",
            apply::DEMO
        )
    };
    let plan = apply_text(&app, &with("1 GiB"), Options::default()).await.expect("apply");
    let shown: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("+ storage shared: ") && shown[0].contains("1073741824"), "{shown:?}");
    assert_eq!(apply_text(&app, &with("1 GiB"), Options::default()).await.expect("again"), apply::Plan::default());
    let stored = entity::storage::Entity::find_by_id("shared").one(&app.db).await.expect("read").expect("stored");
    let storage: sessiond::domain::storage::Storage = serde_json::from_value(stored.settings).expect("a storage");
    assert_eq!((storage.path.as_str(), storage.quota_bytes), ("/data/shared", 1 << 30));
    assert!(storage.open_to("default/default") && !storage.open_to("default/research"));
    let plan = apply_text(&app, &with("2 GiB"), Options::default()).await.expect("changed");
    assert!(plan.changes[0].to_string().starts_with("~ storage shared: "), "{plan:?}");
    let plan = apply_text(&app, apply::DEMO, Options::new(true, false)).await.expect("prune");
    let deleted: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
    assert_eq!(deleted, ["- storage shared"]);
    assert_eq!(entity::storage::Entity::find().count(&app.db).await.expect("count"), 0);

    let bad = format!(
        "{}\n[storage.Bad]\npath = \"data\"\n[storage.s2]\npath = \"/d/../etc\"\nquota = \"lots\"\nprojects = [\"nope/nope\"]\n",
        apply::DEMO
    );
    let slots = apply::known_slots(&app.db).await.expect("slots");
    let problems =
        apply::file::parse(&[Source { name: "bad.toml".to_owned(), text: bad }], &slots).expect_err("invalid");
    let shown: Vec<String> = problems.iter().map(|p| format!("{} {}", p.key, p.message)).collect();
    for expected in [
        "storage.Bad.path an absolute directory",
        "storage.Bad a storage's name has lower-case letters",
        "storage.s2.path a directory without `..`",
        "storage.s2.quota a size of at least one byte",
        "storage.s2.projects project \"nope/nope\" is not declared",
    ] {
        assert!(shown.iter().any(|s| s.starts_with(expected)), "{expected:?} not in {shown:#?}");
    }
}

db_tests!(
    storage_is_declared_changed_and_pruned,
    a_page_shows_the_catalog_as_applied,
    a_drained_group_queues_launches_until_its_agents_return,
    changes_apply_once_and_prune_takes_a_user_with_its_policy,
    the_demo_is_demo_toml_applied,
    a_changed_limit_is_what_the_panel_and_the_scheduler_use_next,
    prune_refuses_what_live_sessions_use_and_then_writes_nothing,
    a_bad_declaration_reports_every_problem_and_writes_nothing,
    only_regular_files_within_the_cap_are_read,
    the_configuration_is_for_superadministrators
);
