//! The Sessions page served by sessiond (`web/`, built into `src/http/web/`): its addresses,
//! offline; its files what its sources build; and the page at work in a real browser.

use axum::http::{StatusCode, header};
use serde_json::{Value, json};
use sessiond::domain::runtime::local::sandbox::HOME;

use crate::db_tests;
use crate::support::{TestApp, project};

const PAGES: [&str; 3] = ["/", "/project/default/session", "/admin/project/default/session"];

/// Every address of the page answers the same document under a strict policy; every file
/// it loads is ours, served, and names nothing beyond the server; the whole first load is
/// small.
async fn the_page_is_served_whole_and_offline(app: TestApp) {
    let mut document = None;
    for path in PAGES {
        let (status, headers, body) = app.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(headers[header::CONTENT_TYPE].to_str().expect("ct").starts_with("text/html"), "{path}");
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().expect("csp");
        assert!(csp.contains("default-src 'self'") && csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "no inline script or style: {csp}");
        // Its address names the project: no link followed from it tells another site.
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer", "{path}");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        assert!(document.as_ref().is_none_or(|d| *d == body), "{path}: the same page");
        document = Some(body);
    }
    let page = String::from_utf8(document.expect("a page")).expect("utf8");
    let mut total = page.len();
    let mut files = vec![];
    let mut todo: Vec<String> = ["src=\"", "href=\""]
        .iter()
        .flat_map(|attr| page.split(attr).skip(1).map(|p| p.split('"').next().expect("quoted").to_owned()))
        .filter(|url| url != "data:,")
        .collect();
    // The modules the scripts import, too.
    while let Some(url) = todo.pop() {
        if files.contains(&url) {
            continue;
        }
        assert!(url.starts_with("/web/"), "only our own files: {url}");
        let (status, headers, body) = app.get(&url).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        let ct = headers[header::CONTENT_TYPE].to_str().expect("ct");
        assert!(ct.starts_with("text/javascript") || ct.starts_with("text/css"), "{url}: {ct}");
        let text = String::from_utf8(body).expect("utf8");
        assert!(!text.contains("http://") && !text.contains("https://"), "{url} names another host");
        total += text.len();
        for piece in text.split("from './").skip(1) {
            todo.push(format!("/web/{}", piece.split('\'').next().expect("quoted")));
        }
        files.push(url);
    }
    assert!(files.len() >= 8, "the page's modules and style: {files:?}");
    assert!(total < 150 * 1024, "the first load is {total} bytes before compression");
    for missing in ["/web/index.html", "/web/nothing.js", "/web/..%2fmod.rs", "/project/default/session/x"] {
        assert_eq!(app.get(missing).await.0, StatusCode::NOT_FOUND, "{missing}");
    }
}

/// `node web/build.mjs` gives exactly the files checked in under `src/http/web/`.
#[test]
fn the_checked_in_page_is_what_its_sources_build() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let web = root.join("web");
    if !crate::support::node_package(&web, "typescript", "the page's build") {
        return;
    }
    let out = tempfile::tempdir().expect("temp dir");
    let status =
        std::process::Command::new("node").arg(web.join("build.mjs")).arg(out.path()).status().expect("run node");
    assert!(status.success(), "the page builds");
    let list = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let checked_in = root.join("src/http/web");
    assert_eq!(list(out.path()), list(&checked_in), "the same files");
    for name in list(&checked_in) {
        let built = std::fs::read(out.path().join(&name)).expect("built");
        let kept = std::fs::read(checked_in.join(&name)).expect("kept");
        assert!(built == kept, "src/http/web/{name} differs from its build: run `npm run build` in web/");
    }
}

/// A number as the page writes it (`16`, `0.5`).
fn shown(n: f64) -> String {
    if n.fract() == 0.0 { format!("{n:.0}") } else { format!("{n}") }
}

/// The page at work: see `tests/browser/sessions_page.mjs` for what the browser does.
async fn the_sessions_page_works_in_a_real_browser(mut app: TestApp) {
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "axe-core", "the Sessions page in a browser") {
        return;
    }
    let artifacts = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("target/test-artifacts/sessions-page-{:?}", app.backend).to_lowercase());
    let _ = std::fs::remove_dir_all(&artifacts);
    std::fs::create_dir_all(&artifacts).expect("artifact directory");
    let p = project("default/default");
    let panel = app.gql(Some("demo-alice"), "{ viewer { settings { resourcePanelView } } }", json!({})).await;
    let view = panel["data"]["viewer"]["settings"]["resourcePanelView"].as_str().expect("a view").to_owned();
    let panel = app
        .gql(
            Some("demo-alice"),
            "query($p: ID!, $v: ResourcePanelView!) { resourcePanel(projectId: $p, view: $v) {
               slots { slot bindingLayer layers { layer limit } } } }",
            json!({"p": p, "v": view}),
        )
        .await;
    let cpu = panel["data"]["resourcePanel"]["slots"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["slot"] == "cpu"))
        .cloned()
        .expect("a cpu bar");
    let counts = app
        .gql(
            Some("demo-alice"),
            "query($p: ID!) { sessionCounts(projectId: $p) { running finished } }",
            json!({"p": p}),
        )
        .await;
    let running = counts["data"]["sessionCounts"]["running"].as_i64().expect("running");
    let finished = counts["data"]["sessionCounts"]["finished"].as_i64().expect("finished");
    app.start_workers();
    let addr = app.serve().await;
    let args = [format!("http://{addr}"), artifacts.display().to_string()];
    let r = crate::support::browser_script("sessions_page.mjs", &args, &chromium).await;
    assert!(r.get("failure").is_none(), "the walk through the page failed: {r:#}");
    assert_eq!(r["blocked"], json!([]), "the page reached beyond the server");
    assert_eq!(r["errors"], json!([]), "errors in the page's scripts");

    // A refused token is said so; signed in at `/`, sent on to the default project; who is shown.
    assert_eq!(r["badToken"], json!({"error": "That token is not valid.", "appShown": false}), "{r}");
    assert!(r["aliceUrl"].as_str().expect("url").ends_with("/project/default/session"), "{r}");
    assert!(r["who"].as_str().expect("who").contains("alice@example.com"), "{r}");
    // A user on the admin page is refused as the API refuses it, and shown nothing of a
    // list he cannot read, only the way to his own.
    assert!(r["bobOnAdminPage"].as_str().expect("notice").starts_with("Refused"), "{r}");
    assert_eq!(
        r["refusedShows"],
        json!({"workspace": false, "csv": false, "launch": false, "link": "/project/default/session"}),
        "{r}"
    );
    // A superadmin, a member of nothing, lands on everyone's sessions, with no Launch.
    assert!(r["rootUrl"].as_str().expect("url").ends_with("/admin/project/default/session"), "{r}");
    assert_eq!((&r["rootNotice"], &r["rootLaunch"]), (&json!(false), &json!(false)), "{r}");
    assert_eq!(r["rootProjects"], json!(["default", "other", "research"]), "{r}");
    // Launch clicked in an outage says so, and opens once the server answers.
    assert!(r["outageLine"].as_str().expect("line").contains("could not open"), "{r}");
    assert_eq!(r["launcherAfterOutage"], true);
    // Sorting by keyboard keeps the focus on the heading; live updates keep it on a row.
    assert_eq!(r["sortFocus"], "NAME", "{r}");
    assert_eq!(r["focusAfterLive"]["tag"], "BUTTON", "{r}");
    assert_eq!(r["focusAfterLive"]["text"], "page-multi-1", "{r}");

    // The cpu bar's tooltip names the binding layer and shows each layer's limit, in words.
    let tip = r["cpuTooltip"].as_str().expect("tooltip");
    let label = |layer: &str| match layer {
        "KEYPAIR" => "Keypair",
        "PROJECT" => "Project",
        "DOMAIN" => "Domain",
        "RESOURCE_GROUP" => "Resource group",
        other => panic!("a layer {other}"),
    };
    let binding = label(cpu["bindingLayer"].as_str().expect("a binding layer in the demo"));
    assert!(tip.contains(&format!("Binding: {binding}")), "{tip}");
    for layer in cpu["layers"].as_array().expect("layers") {
        let name = label(layer["layer"].as_str().expect("layer"));
        let limit = layer["limit"].as_f64().map_or("unlimited".to_owned(), shown);
        let mark = if name == binding { " (binding)" } else { "" };
        assert!(tip.contains(&format!("{name}{mark}\t{limit}\t")), "{name} {limit} in {tip}");
    }

    // Opened empty, nothing is marked wrong, and Launch waits for a name; then errors at
    // their fields: a bad name at the name, too little memory at the memory (in binary
    // units), too many CPUs at the CPUs, and Launch not offered meanwhile.
    assert_eq!(r["openedClean"], json!({"errors": 0, "launchDisabled": true}), "{r}");
    assert!(r["nameError"].as_str().expect("name error").contains("name"), "{r}");
    assert_eq!(r["nameInvalid"], "true");
    let mem = r["memError"].as_str().expect("a memory error");
    assert!(mem.contains("512 MiB") && mem.contains("`mem`"), "{mem}");
    assert_eq!(r["cpuErrorWithMem"], 0, "{r}");
    assert_eq!(r["cpuError"], 1, "{r}");
    assert_eq!(r["launchDisabledWhenBad"], true, "{r}");
    // The dry run's verdict before Launch: too big says why; the three fit.
    assert!(r["verdictTooBig"].as_str().expect("verdict").contains("`cpu`"), "{r}");
    assert!(r["verdictFits"].as_str().expect("verdict").starts_with("Fits now"), "{r}");

    // A dropped connection subscribed again from the last cursor the page was sent.
    assert!(r["lastCursorBeforeDrop"].is_string(), "events reached alice's page: {r}");
    assert_eq!(r["resumedFrom"], json!([r["lastCursorBeforeDrop"]]), "{r}");

    // Keyset pages of 20 (Bob's 25), forward and back; sorting by name as the API sorts.
    let page1 = r["bobPage1"].as_array().expect("page 1");
    let page2 = r["bobPage2"].as_array().expect("page 2");
    assert_eq!((page1.len(), page2.len()), (20, 5), "{r}");
    assert!(page2.iter().all(|n| !page1.contains(n)), "{r}");
    assert_eq!(r["bobPageBack"], r["bobPage1"]);
    assert_eq!(r["bobByName"], r["apiByName"], "{r}");
    assert_ne!(r["bobByName"], r["bobPage1"], "sorting changed the order");

    // They ran, Alice saw it live; the admin saw them with their owner; Bob never did.
    assert_eq!(r["aliceSawRunning"], true);
    assert_eq!(r["adminOwners"], json!(["alice@example.com", "alice@example.com", "alice@example.com"]));
    assert!(!r["bobNames"].to_string().contains("page-multi"), "{r}");
    // The admin's CSV has the owner, as the admin's list has.
    assert!(r["adminCsvHeader"].as_str().expect("header").starts_with("Name,Owner,"), "{r}");
    assert_eq!((&r["adminHeaders"][1], &r["adminHeaders"][2]), (&json!("Name"), &json!("Owner")), "{r}");
    // A waiting session: its status, its place in the resource group's queue, and why.
    let waiting = &r["waiting"];
    assert_eq!(waiting["status"], "PENDING", "{r}");
    let queue = waiting["queue"].as_str().expect("queue");
    assert!(queue.trim().starts_with('#') && queue.ends_with("in queue"), "{queue}");
    assert!(!waiting["reasons"].as_str().expect("reasons").trim().is_empty(), "{r}");
    let ticks = r["elapsedTicks"].as_array().expect("ticks");
    assert_ne!(ticks[0], ticks[1], "the elapsed time ticks");

    // One terminated: it left the Running tab for Finished.
    let running_after = r["runningAfter"].to_string();
    assert!(running_after.contains("page-multi-1") && running_after.contains("page-multi-3"), "{r}");
    assert!(!running_after.contains("page-multi-2"), "{r}");
    assert!(r["finishedAfter"].to_string().contains("page-multi-2"), "{r}");
    // Terminate asks first; Cancel leaves the session; the outcome is said as it was.
    assert_eq!(r["confirmTitle"], "Terminate page-multi-2?", "{r}");
    assert_eq!(r["cancelledKeepsIt"], true, "{r}");
    assert_eq!(r["terminateLine"], "1 session asked to terminate.", "{r}");
    assert_eq!(r["finishedTerminateLine"], "Nothing to terminate. 1 had already ended or is ending.", "{r}");
    assert_eq!(r["confirmFocus"], "confirm-cancel", "{r}");
    // The tabs' counts, before (as the API gave them) and after: three launched and one of
    // them ended, and the one that waited cancelled.
    let tabs = |r: i64, f: i64| json!({"running": format!("Running ({r})"), "finished": format!("Finished ({f})")});
    assert_eq!(r["countsBefore"], tabs(running, finished));
    // (And page-moves, launched to move the list, ended.)
    assert_eq!(r["countsAfter"], tabs(running + 2, finished + 3));

    // The CSV holds the rows of the view it was asked from.
    let csv = r["csv"].as_str().expect("csv");
    let mut in_csv: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').next().expect("name")).collect();
    let mut in_view: Vec<&str> =
        r["csvViewNames"].as_array().expect("names").iter().filter_map(Value::as_str).collect();
    in_csv.sort_unstable();
    in_view.sort_unstable();
    assert!(!in_view.is_empty());
    assert_eq!(in_csv, in_view, "{csv}");

    // The detail panel: transitions, history, logs.
    let detail = r["detail"].as_str().expect("detail");
    for part in ["Status transitions", "CREATING → RUNNING", "Scheduling history", "Logs"] {
        assert!(detail.contains(part), "{part} in {detail}");
    }

    // Left open, the detail panel followed its session from PENDING to TERMINATED, each
    // log line on a line of its own, as the API has them.
    let followed: Vec<&str> = r["followed"].as_array().expect("statuses").iter().filter_map(Value::as_str).collect();
    assert_eq!(followed.first(), Some(&"PENDING"), "{r}");
    assert_eq!(followed.last(), Some(&"TERMINATED"), "{r}");
    assert!(followed.contains(&"RUNNING"), "{r}");
    let transitions = r["followedTransitions"].as_array().expect("transitions");
    assert!(transitions.last().and_then(Value::as_str).is_some_and(|t| t.contains("→ TERMINATED")), "{r}");
    assert!(!r["apiLogs"].as_array().expect("logs").is_empty(), "{r}");
    assert_eq!(r["followedLogs"], r["apiLogs"], "{r}");
    // A 390 px phone: every field of the launcher within the screen.
    let fields = r["phoneFields"].as_array().expect("fields");
    assert!(fields.len() >= 10, "{r}");
    for f in fields {
        assert!(f["left"].as_i64() >= Some(0) && f["right"].as_i64() <= Some(390), "off the screen: {f}");
    }

    // Column settings by keyboard, kept over a reload; NAME cannot be hidden.
    let headers: Vec<&str> =
        r["headersAfterReload"].as_array().expect("headers").iter().filter_map(Value::as_str).collect();
    assert_eq!(headers.get(1), Some(&"Type"), "{headers:?}");
    assert!(headers.contains(&"Name"));
    assert_eq!(r["nameAlwaysShown"], true);
    let settings = app
        .gql(
            Some("demo-alice"),
            "{ viewer { settings { resourcePanelView sessionListColumns { column visible } } } }",
            json!({}),
        )
        .await;
    let s = &settings["data"]["viewer"]["settings"];
    assert_eq!(s["sessionListColumns"][0], json!({"column": "TYPE", "visible": true}));
    assert_eq!(s["resourcePanelView"], "TOTAL_IN_RESOURCE_GROUP");
    assert_eq!(r["panelViewAfterReload"], "TOTAL_IN_RESOURCE_GROUP");

    // The keyboard reaches the tabs and the launcher.
    assert_eq!(r["keyboardTab"], "tab-finished");
    assert_eq!(r["launcherFocus"], "launch-name");
    assert_eq!(r["keyboardLaunchedAndTerminated"], true);

    // axe-core: nothing serious or critical on the list, the launcher and the detail.
    for view in ["list", "launcher", "detail"] {
        let violations = r["axe"][view].as_array().unwrap_or_else(|| panic!("axe ran on {view}: {r}"));
        let serious: Vec<&Value> =
            violations.iter().filter(|v| v["impact"] == "serious" || v["impact"] == "critical").collect();
        assert!(serious.is_empty(), "{view}: {serious:#?}");
    }
    for shot in ["list", "launcher", "detail", "phone"] {
        let path = artifacts.join(format!("sessions-page-{shot}.png"));
        assert!(std::fs::metadata(&path).is_ok_and(|m| m.len() > 1000), "a screenshot: {}", path.display());
    }
}

/// The detail panel's terminal, for an interactive session that really runs (the local
/// runtime's sandbox): a command typed in the page is answered by the session's shell.
async fn the_detail_panel_opens_a_terminal_in_the_session(mut app: TestApp) {
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "playwright-core", "the Sessions page's terminal") {
        return;
    }
    let machine = crate::local_runtime::Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let input = json!({
        "projectId": project("default/default"), "name": "page-terminal", "image": "python:3.12",
        "type": "INTERACTIVE", "resourceGroup": "local",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
    });
    crate::local_runtime::launch(&app, "demo-alice", input).await;
    let args = [format!("http://{addr}"), "page-terminal".to_owned()];
    let r = crate::support::browser_script("terminal_page.mjs", &args, &chromium).await;
    assert!(r.get("failure").is_none(), "{r:#}");
    assert_eq!(r["blocked"], json!([]));
    assert_eq!(r["errors"], json!([]));
    let terminal = r["terminal"].as_str().expect("the terminal's text");
    // The shell's answer (the command's text holds `$((6*7))`, not its value).
    assert!(terminal.contains("answer-42"), "{terminal}");
}

/// Folders on the page: their use against their quotas, a file downloaded and one uploaded
/// from the folders dialog, and a session launched with a folder from the launcher's picker,
/// whose detail panel lists the mount.
async fn the_page_shows_folders_and_mounts_them(mut app: TestApp) {
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "playwright-core", "folders on the Sessions page") {
        return;
    }
    let storage = crate::support::StorageDir::new();
    crate::support::declare_storage(&app, storage.path()).await;
    app.start_workers();
    let addr = app.serve().await;
    let made = crate::folders::create(&app, "demo-alice", "data", "USER", Some(8 << 20)).await;
    let folder = made["data"]["createFolder"]["folder"]["id"].as_str().unwrap_or_else(|| panic!("{made}")).to_owned();
    let put = axum::http::Request::put(format!("/folders/{folder}/files/seed.txt"))
        .header(header::AUTHORIZATION, "Bearer demo-alice")
        .body(axum::body::Body::from("seed"))
        .expect("a request");
    assert_eq!(app.send(put).await.0, StatusCode::CREATED);
    let r = crate::support::browser_script("folders_page.mjs", &[format!("http://{addr}")], &chromium).await;
    assert!(r.get("failure").is_none(), "{r:#}");
    assert_eq!((&r["blocked"], &r["errors"]), (&json!([]), &json!([])), "{r}");
    assert_eq!(r["downloaded"], "seed", "{r}");
    let usage = r["use"].as_str().unwrap_or_default();
    assert!(usage.contains("of 8 MiB") || usage.contains("quota 8 MiB"), "{r}");
    assert!(r["picker"].as_str().is_some_and(|p| p.contains("data")), "{r}");
    assert_eq!(r["mounts"], format!("Folders: {HOME}/data (read-only)"), "{r}");
    let get = axum::http::Request::get(format!("/folders/{folder}/files/up.txt"))
        .header(header::AUTHORIZATION, "Bearer demo-alice")
        .body(axum::body::Body::empty())
        .expect("a request");
    let (status, _, body) = app.send(get).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, b"from the page".as_slice()));
}

/// A pull as the page shows it: the status cell says `PULLING n %` and follows each
/// PULL_PROGRESS event in place (the list is not read again for it), and the detail panel
/// has a progress bar. The supervisor's reports come as the runtime passes them on, through
/// the one writer (`reconcile::pulls`), a little further every second.
async fn the_status_cell_follows_a_pull(mut app: TestApp) {
    use sea_orm::{ActiveModelTrait, EntityTrait};
    use sessiond::domain::runtime::image::Progress;
    use sessiond::domain::runtime::local::files::PullState;
    use sessiond::domain::runtime::reconcile::{PullSeen, pulls};
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "playwright-core", "a pull on the Sessions page") {
        return;
    }
    let slots = json!({"cpu": 1, "mem": 1_i64 << 30});
    let row = crate::support::session_row("alice@example.com", "default/default", "page-pulling", "PULLING", slots);
    let id = row.insert(&app.db).await.expect("a session").id;
    let addr = app.serve().await;
    let (db, bus) = (app.db.clone(), app.bus.clone());
    let reports = tokio::spawn(async move {
        for done in 1..100_u64 {
            let session = entity::session::Entity::find_by_id(id).one(&db).await.expect("read").expect("the session");
            let progress = Progress { bytes_done: done * 10, bytes_total: 1000, layers_done: 0, layers_total: 3 };
            let seen = PullSeen { session, state: PullState { progress, digest: None } };
            pulls(&db, &bus, "test", vec![seen]).await.expect("recorded");
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        }
    });
    let args = [format!("http://{addr}"), "page-pulling".to_owned()];
    let r = crate::support::browser_script("pull_page.mjs", &args, &chromium).await;
    reports.abort();
    assert!(r.get("failure").is_none(), "{r:#}");
    assert_eq!((&r["blocked"], &r["errors"]), (&json!([]), &json!([])), "{r}");
    let percent = |key: &str| -> u64 {
        let text = r[key].as_str().unwrap_or_default();
        let n = text.strip_prefix("PULLING ").and_then(|t| t.strip_suffix(" %"));
        n.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{key}: {text:?} is PULLING n %"))
    };
    let steps = ["first", "second", "third", "fourth"].map(percent);
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{r}");
    assert_eq!(r["listReadsBetween"], 0, "the cell followed the event in place: {r}");
    assert_eq!(r["detailBar"]["max"], 100, "{r}");
    assert!(r["detailBar"]["value"].as_u64().is_some_and(|v| (1..100).contains(&v)), "{r}");
    assert!(r["detailText"].as_str().is_some_and(|t| t.contains("of 3 layers")), "{r}");
}

db_tests!(
    the_page_shows_folders_and_mounts_them,
    the_status_cell_follows_a_pull,
    the_page_is_served_whole_and_offline,
    the_sessions_page_works_in_a_real_browser,
    the_detail_panel_opens_a_terminal_in_the_session
);
