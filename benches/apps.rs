//! A session's web app through sessiond's proxy, beside nginx (Debian) proxying the same
//! app, in one run.
//!
//! The app is nginx serving static files (1 GiB and 100 bytes), fast enough that the proxy
//! in front is what shows. sessiond reaches its instance inside a running session (the
//! local runtime's sandbox, no network: through its dialer), admitting each request by its
//! app cookie; nginx cannot reach into a session, so it proxies an identical instance on
//! the host's loopback, configured as a reverse proxy for Jupyter is (HTTP/1.1, upstream
//! keep-alive, no buffering), and once more with its default buffering. The same client
//! asks each in turn:
//!
//! - **A 1 GiB download**: MB/s, each path in turn, every run;
//! - **Small requests**: one at a time on one keep-alive connection, latency p50 and p99;
//!   added = through the proxy minus straight to the app.
//!
//! `cargo bench --bench apps [-- --runs N]` (default 3; needs nginx and bubblewrap;
//! `SESSIOND_BENCH_REQUESTS` sets the small requests per path, for a profile).

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::nginx::{NGINX, free_port, nginx};
use support::{Server, over_runs, percentile, runs, stamp};

const BIG: u64 = 1 << 30;
const SMALL: &[u8] = &[b'x'; 100];
const REQUESTS: usize = 2_000;
const WARM_UP: usize = 200;
/// Where the session's work directory is inside its sandbox.
const HOME: &str = "/home/work";

/// nginx serving `root`'s files on `127.0.0.1:port`, its own files under `prefix`.
fn app_conf(prefix: &str, root: &str, port: u16) -> String {
    format!(
        "worker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 100000;\n\
         client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n\
         uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n\
         server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n"
    )
}

/// nginx as a reverse proxy to `127.0.0.1:upstream` on `127.0.0.1:port`, as its examples
/// for Jupyter configure one (`buffering` off), or buffering answers (its default), its own
/// files under `prefix`.
fn proxy_conf(prefix: &str, port: u16, upstream: u16, buffering: bool) -> String {
    let buffering = if buffering { "on" } else { "off" };
    format!(
        "worker_processes auto;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 100000;\n\
         client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n\
         uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n\
         upstream app {{ server 127.0.0.1:{upstream}; keepalive 32; }}\n\
         server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://app;\n\
         proxy_http_version 1.1;\n      proxy_set_header Host $host;\n      proxy_set_header Upgrade $http_upgrade;\n\
         proxy_set_header Connection $connection_upgrade;\n      proxy_buffering {buffering};\n    }}\n  }}\n\
         map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}\n}}\n"
    )
}

/// The files the app serves, in `dir`: `big` (1 GiB) and `small` (100 bytes).
fn files(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("a directory");
    let big = std::fs::File::create(dir.join("big")).expect("big");
    big.set_len(BIG).expect("1 GiB");
    std::fs::write(dir.join("small"), SMALL).expect("small");
    for f in ["big", "small"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
}

/// Waits until `url` answers 200 (with `cookie`).
async fn until_ok(http: &reqwest::Client, url: &str, cookie: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = http.get(url).header("cookie", cookie).send().await;
        if r.is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(Instant::now() < deadline, "{url} never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// MB/s of one download of `url`, its body read and dropped.
async fn download(http: &reqwest::Client, url: &str, cookie: &str) -> f64 {
    let begun = Instant::now();
    let mut r = http.get(url).header("cookie", cookie).send().await.expect("a download");
    assert_eq!(r.status(), 200, "{url}");
    let mut got = 0_u64;
    while let Some(chunk) = r.chunk().await.expect("a chunk") {
        got += chunk.len() as u64;
    }
    assert_eq!(got, BIG, "{url}: the whole file");
    got as f64 / 1e6 / begun.elapsed().as_secs_f64()
}

/// Milliseconds of each of `n` requests of `url`, one at a time on one connection.
async fn latencies(url: &str, cookie: &str, n: usize) -> Vec<f64> {
    let http = reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("a client");
    let mut out = Vec::with_capacity(n);
    for i in 0..WARM_UP + n {
        let begun = Instant::now();
        let r = http.get(url).header("cookie", cookie).send().await.expect("a request");
        assert_eq!(r.status(), 200, "{url}");
        assert_eq!(r.bytes().await.expect("a body").len(), SMALL.len());
        if i >= WARM_UP {
            out.push(begun.elapsed().as_secs_f64() * 1000.0);
        }
    }
    out
}

/// Launches an interactive session of `web:1` for alice and waits for it to run: its id
/// and uuid.
async fn session(server: &Server) -> (String, String) {
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let input = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0,
        "name": "bench-app", "image": "web:1", "resourceGroup": "local", "type": "INTERACTIVE",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 512_i64 << 20}],
    });
    let r = server.gql(launch, json!({"i": input})).await;
    let id = r["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
    let query = "query($id: ID!) { session(id: $id) { status statusInfo } }";
    loop {
        let r = server.gql(query, json!({"id": id})).await;
        match r["data"]["session"]["status"].as_str().unwrap_or("") {
            "RUNNING" => break,
            "ERROR" | "CANCELLED" | "TERMINATED" => panic!("{r}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let uuid = sessiond::graphql::ids::decode(&id).map(|(_, u)| u).expect("a session id");
    (id, uuid.to_string())
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench apps");
    assert!(Path::new(NGINX).exists(), "{NGINX} (Debian: nginx)");
    let work = tempfile::tempdir().expect("a work directory");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }

    // The app on the host's loopback, and nginx before it.
    let host_app = work.path().join("host-app");
    files(&host_app.join("files"));
    let (app_port, proxy_port, buffering_port) = (free_port(), free_port(), free_port());
    let root = host_app.display().to_string();
    let _app = nginx(&host_app, &app_conf(&root, &format!("{root}/files"), app_port));
    let front = work.path().join("front");
    let _front = nginx(&front, &proxy_conf(&front.display().to_string(), proxy_port, app_port, false));
    let buffered = work.path().join("buffered");
    let _buffered = nginx(&buffered, &proxy_conf(&buffered.display().to_string(), buffering_port, app_port, true));

    // The same app in a session, and sessiond before it.
    let runtime: PathBuf = work.path().join("runtime");
    let apps_port = free_port();
    let server = Server::start_with(
        "sqlite",
        &[],
        &[
            "--runtime",
            "local",
            "--runtime-dir",
            runtime.to_str().expect("utf8"),
            "--apps-bind",
            &format!("127.0.0.1:{apps_port}"),
        ],
    )
    .await;
    let declaration = work.path().join("images.toml");
    std::fs::write(
        &declaration,
        format!(
            "[images.\"web:1\"]\ntypes = [\"INTERACTIVE\"]\napps = [{{ name = \"web\", port = 8000, command = \
             \"while [ ! -f $HOME/nginx.conf ]; do sleep 0.1; done; exec {NGINX} -p $HOME -c $HOME/nginx.conf \
             -e $HOME/error.log -g 'daemon off;'\" }}]\n"
        ),
    )
    .expect("a declaration");
    server.apply(&declaration);
    let (id, uuid) = session(&server).await;
    let session_work =
        sessiond::domain::runtime::local::files::SessionDir::of(&runtime, uuid.parse().expect("a uuid")).work();
    files(&session_work.join("files"));
    let conf = session_work.join("nginx.conf.part");
    std::fs::write(&conf, app_conf(HOME, &format!("{HOME}/files"), 8000)).expect("the app's configuration");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    std::fs::rename(&conf, session_work.join("nginx.conf")).expect("the app's configuration, whole");
    let r = server
        .gql("mutation($id: ID!) { openSessionApp(sessionId: $id, name: \"web\") { url } }", json!({"id": id}))
        .await;
    let link = r["data"]["openSessionApp"]["url"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client");
    let opened = http.get(&link).send().await.expect("the link");
    let cookie =
        opened.headers()["set-cookie"].to_str().expect("a cookie").split(';').next().expect("a pair").to_owned();

    let paths = [
        ("straight to the app", format!("http://127.0.0.1:{app_port}/")),
        ("nginx, as for Jupyter (no buffering)", format!("http://127.0.0.1:{proxy_port}/")),
        ("nginx, buffering (its default)", format!("http://127.0.0.1:{buffering_port}/")),
        ("sessiond", format!("http://127.0.0.1:{apps_port}/s/{uuid}/web/")),
    ];
    for (_, base) in &paths {
        until_ok(&http, &format!("{base}small"), &cookie).await;
    }

    // More requests for a profile (`SESSIOND_BENCH_REQUESTS`).
    let requests = std::env::var("SESSIOND_BENCH_REQUESTS").ok().and_then(|n| n.parse().ok()).unwrap_or(REQUESTS);
    // Each file read once first: every path then serves from the page cache.
    for (_, base) in &paths {
        download(&http, &format!("{base}big"), &cookie).await;
    }
    let mut throughput = vec![Vec::new(); paths.len()];
    let mut p50 = vec![Vec::new(); paths.len()];
    let mut p99 = vec![Vec::new(); paths.len()];
    let mut rss = Vec::new();
    for round in 0..runs() {
        for (n, (who, base)) in paths.iter().enumerate() {
            let before = server.rss_kib();
            let mbs = download(&http, &format!("{base}big"), &cookie).await;
            if *who == "sessiond" {
                rss.push((server.rss_kib().saturating_sub(before)) as f64 / 1024.0);
            }
            throughput[n].push(mbs);
            let each = latencies(&format!("{base}small"), &cookie, requests).await;
            p50[n].push(percentile(each.clone(), 0.5));
            p99[n].push(percentile(each, 0.99));
            eprintln!(
                "round {round}: {who}: {mbs:.0} MB/s, p50 {:.3} ms, p99 {:.3} ms",
                p50[n].last().copied().unwrap_or_default(),
                p99[n].last().copied().unwrap_or_default()
            );
        }
    }
    println!(
        "The app: nginx serving static files (1 GiB, 100 bytes); sessiond's instance in a session \
         (local runtime, through its dialer), nginx's on the host's loopback\n"
    );
    println!(
        "| path | 1 GiB download MB/s | small p50 ms | small p99 ms | added p50 ms | added p99 ms | runs (MB/s) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let (direct50, direct99) = (over_runs(&p50[0], 3).0, over_runs(&p99[0], 3).0);
    for (n, (who, _)) in paths.iter().enumerate() {
        let (mbs, each) = over_runs(&throughput[n], 0);
        let (a50, a99) = (over_runs(&p50[n], 3).0, over_runs(&p99[n], 3).0);
        let added = |x: f64, base: f64| if n == 0 { String::new() } else { format!("{:.3}", x - base) };
        println!(
            "| {who} | {mbs:.0} | {a50:.3} | {a99:.3} | {} | {} | {each} |",
            added(a50, direct50),
            added(a99, direct99)
        );
    }
    println!();
    let ours = paths.len() - 1;
    let best_nginx = over_runs(&throughput[1], 0).0.max(over_runs(&throughput[2], 0).0);
    println!(
        "- sessiond's throughput ÷ nginx's best: **{:.2}** (goal ≥ 0.80); sessiond's added p50: **{:.3} ms** \
         (goal < 1 ms), p99 **{:.3} ms**; the server's memory grew {:.1} MiB over a download (median)",
        over_runs(&throughput[ours], 0).0 / best_nginx,
        over_runs(&p50[ours], 3).0 - direct50,
        over_runs(&p99[ours], 3).0 - direct99,
        over_runs(&rss, 1).0
    );
}
