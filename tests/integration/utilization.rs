//! What a session really uses: sampled by its engine's looks, shown per slot (latest,
//! average, maximum) in the detail and the export, and kept once it ends.

use serde_json::{Value, json};

use crate::db_tests;
use crate::export::{export, records};
use crate::local_runtime::{Machine, ended, input, launch};
use crate::support::{TestApp, launch_input, project};

const USE: &str = "query($id: ID!) { session(id: $id) { status utilizationSampledAt
  utilization { slot current average maximum } } }";

async fn detail(app: &TestApp, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    app.wait_for(token, USE, json!({"id": id}), |r| done(&r["data"]["session"])).await["data"]["session"].clone()
}

/// The use of `slot` in a detail: (current, average, maximum).
fn slot_use(s: &Value, slot: &str) -> Option<(f64, f64, f64)> {
    let u = s["utilization"].as_array()?.iter().find(|u| u["slot"] == slot)?;
    Some((u["current"].as_f64()?, u["average"].as_f64()?, u["maximum"].as_f64()?))
}

const MIB: f64 = (1 << 20) as f64;

/// One busy session at a time: the two databases' cases would share the cores.
static BUSY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A local batch keeping a core busy and holding 300 MB shows the CPU it got (never more
/// than its one core) and at least 300 MB; once it ends, what it used stays. How much of a
/// core it gets is the machine's load's to say, so nothing here asserts it.
async fn a_busy_local_session_shows_a_core_and_its_memory(mut app: TestApp) {
    let _alone = BUSY.lock().await;
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let command = "python3 -c 'import time; x = bytearray(300 << 20); time.sleep(9)' & timeout 9 yes > /dev/null; wait";
    let id = launch(&app, "demo-alice", input("busy", command, 1024, json!({}))).await;
    let busy = detail(&app, "demo-alice", &id, |s| {
        ended(s)
            || (slot_use(s, "cpu").is_some_and(|c| c.2 > 0.7) && slot_use(s, "mem").is_some_and(|m| m.2 >= 300.0 * MIB))
    })
    .await;
    let (cpu, mem) = (slot_use(&busy, "cpu"), slot_use(&busy, "mem"));
    let (cpu, mem) = (cpu.unwrap_or_else(|| panic!("{busy}")), mem.unwrap_or_else(|| panic!("{busy}")));
    // How much of a core it got depends on what else the machine runs (0.33 at a load of
    // 12); that it got some, and never more than its one core, does not.
    assert!(cpu.2 > 0.0 && cpu.2 < 1.3, "some, at most its one core: {busy}");
    assert!(mem.2 >= 300.0 * MIB && mem.2 < 1024.0 * MIB, "at least 300 MB, under its limit: {busy}");
    assert!(busy["utilizationSampledAt"].is_string(), "{busy}");
    let after = detail(&app, "demo-alice", &id, ended).await;
    let (cpu_after, mem_after) =
        (slot_use(&after, "cpu").expect("cpu kept"), slot_use(&after, "mem").expect("mem kept"));
    assert!(cpu_after.2 >= cpu.2 && mem_after.2 >= mem.2, "the maxima stay: {after}");
    assert!(cpu_after.1 > 0.0 && mem_after.1 > 0.0, "and the averages: {after}");
}

/// A simulated session shows a plausible use of its request, only to those who may see it,
/// and the export's columns say what the detail says.
async fn a_simulated_session_shows_its_use_to_its_owner_alone(mut app: TestApp) {
    app.start_workers();
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": launch_input("sampled", 2.0)}),
        )
        .await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let s = detail(&app, "demo-alice", &id, |s| slot_use(s, "cpu").is_some()).await;
    let (cpu, mem) = (slot_use(&s, "cpu").expect("cpu"), slot_use(&s, "mem").expect("mem"));
    assert!(cpu.0 >= 0.5 && cpu.0 <= 1.7, "between a quarter and 85 % of its 2 cores: {s}");
    assert!(mem.0 > 0.0 && mem.0 <= (1u64 << 30) as f64, "within its 1 GiB: {s}");
    assert_eq!(s["utilization"][0]["slot"], "cpu", "cpu first, then mem: {s}");
    let bob = app.gql(Some("demo-bob"), USE, json!({"id": id})).await;
    assert_eq!(bob["data"]["session"], Value::Null, "bob sees nothing of alice's session: {bob}");

    // The export's columns are the detail's latest sample (the session is left unsampled
    // between the two reads: the workers stop).
    app.crash_workers();
    let s = detail(&app, "demo-alice", &id, |_| true).await;
    let (cpu, mem) = (slot_use(&s, "cpu").expect("cpu"), slot_use(&s, "mem").expect("mem"));
    let (status, _, body) =
        export(&app, Some("demo-alice"), &format!("projectId={}&columns=NAME,UTILIZATION", project("default/default")))
            .await;
    assert_eq!(status, 200);
    let rows = records(&body);
    assert_eq!(rows[0], ["Name", "CPU used (cores)", "Memory used (GiB)"]);
    let row = rows.iter().find(|r| r[0] == "sampled").expect("its row");
    assert!((row[1].parse::<f64>().expect("cores") - cpu.0).abs() < 0.001, "{row:?} {s}");
    assert!((row[2].parse::<f64>().expect("GiB") - mem.0 / (1u64 << 30) as f64).abs() < 0.006, "{row:?} {s}");
}

/// `sessionUtilization` follows one session's samples live: the latest first, then each new
/// one, until the session ends. bob cannot follow alice's session: it does not exist for him.
async fn the_use_is_followed_live_by_its_owner_alone(mut app: TestApp) {
    app.start_workers();
    let addr = app.serve().await;
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": launch_input("followed", 2.0)}),
        )
        .await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    detail(&app, "demo-alice", &id, |s| slot_use(s, "cpu").is_some()).await;
    let follow = "subscription($id: ID!) { sessionUtilization(sessionId: $id) { sampledAt utilization { slot current average maximum } } }";

    let mut bob = crate::support::ws::Ws::open(addr, "demo-bob").await;
    bob.subscribe("b", follow, json!({"id": id})).await;
    let errors = bob.error_of("b").await;
    assert_eq!(crate::support::ws::codes(&errors), ["NOT_FOUND"], "{errors:?}");

    let mut ws = crate::support::ws::Ws::open(addr, "demo-alice").await;
    ws.subscribe("1", follow, json!({"id": id})).await;
    let mut times = Vec::new();
    while times.len() < 3 {
        let p = ws.next_payload("1").await;
        let sample = &p["data"]["sessionUtilization"];
        assert_eq!(sample["utilization"][0]["slot"], "cpu", "{p}");
        times.push(sample["sampledAt"].as_str().unwrap_or_else(|| panic!("{p}")).to_owned());
    }
    assert!(times.windows(2).all(|w| w[0] < w[1]), "each sample newer than the last: {times:?}");

    crate::support::force_terminate(&app, "demo-alice", &id).await;
    loop {
        let m = ws.recv().await;
        match m["type"].as_str() {
            Some("next") => continue,
            Some("complete") => break,
            _ => panic!("{m}"),
        }
    }
}

/// The history keeps a point a minute over the last hour, whatever the session's length:
/// two hours of samples every 30 s leave 61 points; `utilizationHistory(window)` serves the
/// last `window` seconds of them, to those who may see the session.
async fn the_history_is_an_hour_at_a_point_a_minute(app: TestApp) {
    use sea_orm::{ActiveModelTrait, EntityTrait, PaginatorTrait};
    use sessiond::domain::live::usage::{self, Sample};
    let row = crate::support::session_row(
        "alice@example.com",
        "default/default",
        "long-runner",
        "RUNNING",
        json!({"cpu": 1, "mem": 1_i64 << 30}),
    )
    .insert(&app.db)
    .await
    .expect("a running session");
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z").expect("a time").to_utc();
    for i in 0..240 {
        let s = entity::session::Entity::find_by_id(row.id).one(&app.db).await.expect("read").expect("the session");
        let sample = Sample::from([("cpu".to_owned(), f64::from(i % 4) / 4.0), ("mem".to_owned(), 1e8)]);
        usage::record(
            &app.db,
            &[usage::Sampled { session: &s, sample, active: false }],
            t0 + chrono::TimeDelta::seconds(30 * i64::from(i)),
        )
        .await
        .expect("record");
    }
    let kept = entity::utilization_point::Entity::find().count(&app.db).await.expect("count");
    assert_eq!(kept, 61, "an hour at a point a minute, both ends included");

    let id = sessiond::graphql::ids::encode(sessiond::graphql::ids::NodeKind::Session, row.id);
    let q = "query($id: ID!, $w: Int!) { session(id: $id) { utilizationHistory(window: $w) { at utilization { slot amount } } } }";
    let resp = app.gql(Some("demo-alice"), q, json!({"id": id, "w": 600})).await;
    let points = resp["data"]["session"]["utilizationHistory"].as_array().cloned().unwrap_or_else(|| panic!("{resp}"));
    assert_eq!(points.len(), 10, "ten minutes before the latest sample: {resp}");
    assert!(points.windows(2).all(|w| w[0]["at"].as_str() < w[1]["at"].as_str()), "oldest first: {resp}");
    assert_eq!(points[0]["utilization"][0]["slot"], "cpu");
    assert_eq!(points[0]["utilization"][1], json!({"slot": "mem", "amount": 1e8}));
    let bad = app.gql(Some("demo-alice"), q, json!({"id": id, "w": 30})).await;
    assert_eq!(crate::support::error_codes(&bad), ["BAD_USER_INPUT"], "{bad}");
    let bob = app.gql(Some("demo-bob"), q, json!({"id": id, "w": 600})).await;
    assert_eq!(bob["data"]["session"], Value::Null, "{bob}");
}

/// "My heaviest sessions first": ordering by CPU_USED follows the use the detail shows, and
/// the export in that order says the same.
async fn the_list_orders_by_what_sessions_use(mut app: TestApp) {
    app.start_workers();
    let mut ids = Vec::new();
    for (name, cpu) in [("light", 0.5), ("heavy", 4.0), ("middle", 2.0)] {
        let resp = app
            .gql(
                Some("demo-alice"),
                "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
                json!({"i": launch_input(name, cpu)}),
            )
            .await;
        ids.push(
            resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned(),
        );
    }
    for id in &ids {
        detail(&app, "demo-alice", id, |s| slot_use(s, "cpu").is_some()).await;
    }
    app.crash_workers(); // what they use stays put from here
    let q = "query($p: ID!, $o: [SessionOrder!]) { sessions(projectId: $p, orderBy: $o, first: 10) {
      nodes { name utilization { slot current average maximum } } } }";
    let order = json!([{"field": "CPU_USED", "direction": "DESC"}]);
    let resp = app.gql(Some("demo-alice"), q, json!({"p": project("default/default"), "o": order})).await;
    let nodes = resp["data"]["sessions"]["nodes"].as_array().cloned().unwrap_or_else(|| panic!("{resp}"));
    let used: Vec<(String, f64)> = nodes
        .iter()
        .filter_map(|n| Some((n["name"].as_str()?.to_owned(), slot_use(n, "cpu").map_or(0.0, |u| u.0))))
        .collect();
    assert_eq!(used.len(), 3, "{resp}");
    assert!(used.windows(2).all(|w| w[0].1 >= w[1].1), "heaviest first: {used:?}");
    assert!(used[0].1 > 0.0, "{used:?}");

    let (status, _, body) = export(
        &app,
        Some("demo-alice"),
        &format!("projectId={}&columns=NAME,UTILIZATION&orderBy=CPU_USED_DESC", project("default/default")),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let rows = records(&body);
    let exported: Vec<(String, f64)> =
        rows[1..].iter().map(|r| (r[0].clone(), r[1].parse::<f64>().unwrap_or(0.0))).collect();
    assert_eq!(exported.iter().map(|e| &e.0).collect::<Vec<_>>(), used.iter().map(|u| &u.0).collect::<Vec<_>>());
    for (e, u) in exported.iter().zip(&used) {
        assert!((e.1 - u.1).abs() < 0.001, "{exported:?} {used:?}");
    }
}

/// A look that samples running sessions writes what they used in one statement, however
/// many they are: a look at 40 costs what a look at 4 does.
async fn a_look_samples_every_session_in_a_fixed_number_of_statements(app: TestApp) {
    use sea_orm::EntityTrait;
    use sessiond::domain::runtime::{Runtime, SimulatedRuntime};
    let runtime = SimulatedRuntime {
        step: std::time::Duration::from_secs(3600),
        batch_run: std::time::Duration::from_secs(3600),
        except_agent: None,
    };
    let mut looks = Vec::new();
    for (round, n) in [4, 40].into_iter().enumerate() {
        let rows: Vec<_> = (0..n)
            .map(|i| {
                crate::support::session_row(
                    "alice@example.com",
                    "default/default",
                    &format!("look-{round}-{i}"),
                    "RUNNING",
                    json!({"cpu": 1, "mem": 1_i64 << 30}),
                )
            })
            .collect();
        entity::session::Entity::insert_many(rows).exec_without_returning(&app.db).await.expect("running sessions");
        let (statements, changed) = app.count_statements(runtime.drive(&app.db, &app.bus)).await;
        changed.expect("a look");
        looks.push(statements);
        let sampled = entity::session::Entity::find()
            .all(&app.db)
            .await
            .expect("sessions")
            .into_iter()
            .filter(|s| s.name.starts_with(&format!("look-{round}-")) && s.utilization_samples == 1)
            .count();
        assert_eq!(sampled, n, "every running session sampled once");
    }
    assert_eq!(looks[0], looks[1], "statements per look: {looks:?}");
}

db_tests!(
    a_busy_local_session_shows_a_core_and_its_memory,
    a_simulated_session_shows_its_use_to_its_owner_alone,
    the_use_is_followed_live_by_its_owner_alone,
    the_history_is_an_hour_at_a_point_a_minute,
    the_list_orders_by_what_sessions_use,
    a_look_samples_every_session_in_a_fixed_number_of_statements
);
