//! A session's apps, reached from outside its sandbox: the dialer makes sockets in the
//! session's network namespace; they reach the session's own loopback and nothing of the
//! host's.

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use sessiond::domain::runtime::local::dial::Dialer;
use sessiond::domain::runtime::local::files::SessionDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::db_tests;
use crate::local_runtime::{Machine, input, launch, until};
use crate::support::TestApp;

/// The dialer of a running session of `machine` (its sandbox as its state file says).
fn dialer(machine: &Machine, id: &str) -> std::sync::Arc<Dialer> {
    let uuid: uuid::Uuid = crate::local_runtime::session_uuid(id).parse().expect("a uuid");
    let state = SessionDir::of(&machine.path(), uuid).read_state().expect("a state");
    let sandbox = state.child.expect("a sandbox");
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_sessiond"));
    std::sync::Arc::new(Dialer::start(exe, sandbox.pid, sandbox.started).expect("a dialer"))
}

/// `GET path` over `stream`, HTTP/1.0: the whole answer.
async fn get(mut stream: tokio::net::TcpStream, path: &str) -> String {
    stream.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).await.expect("asked");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("answered");
    answer
}

/// A web server in a session, on its own loopback: the server reaches it through the
/// dialer; a port nothing listens on there is refused, though the host listens on it; the
/// session's end ends the dialer.
async fn the_server_reaches_a_sessions_own_loopback(mut app: TestApp) {
    let machine = Machine::new();
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a host port");
    let host_port = host.local_addr().expect("its address").port();
    let script = "echo from-the-session > \"$HOME/hello.txt\"; \
                  exec python3 -m http.server 8000 --bind 127.0.0.1 --directory \"$HOME\"";
    let id = launch(&app, "demo-alice", input("web-app", script, 512, json!({}))).await;
    until(&app, &id, |s| s["status"] == "RUNNING").await;
    let dialer = dialer(&machine, &id);
    let deadline = Instant::now() + Duration::from_secs(30);
    let stream = loop {
        match dialer.connect(8000).await {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline && e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the app's port: {e}"),
        }
    };
    let answer = get(stream, "/hello.txt").await;
    assert!(answer.starts_with("HTTP/1.0 200") && answer.contains("from-the-session"), "{answer}");
    let refused = dialer.connect(host_port).await.expect_err("the host's port is not the session's");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");

    crate::local_runtime::terminate(&app, &id).await;
    until(&app, &id, crate::local_runtime::ended).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while dialer.connect(8000).await.is_ok() {
        assert!(Instant::now() < deadline, "the app is gone with its session");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(host);
}

/// The session's web app: Python's file server with `Range` (3.11's has none) and `PUT`
/// uploads, streamed.
const WEB_APP: &str = r#"
import http.server, os, re
class Handler(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        asked, path = self.headers.get("Range"), self.translate_path(self.path)
        m = asked and re.match(r"bytes=(\d+)-(\d*)$", asked)
        if not m or not os.path.isfile(path):
            self.left = None
            return super().send_head()
        size = os.path.getsize(path)
        start, end = int(m.group(1)), int(m.group(2) or size - 1)
        f = open(path, "rb")
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self.left = end - start + 1
        return f
    def copyfile(self, source, out):
        if self.left is None:
            return super().copyfile(source, out)
        while self.left > 0:
            chunk = source.read(min(self.left, 65536))
            if not chunk:
                break
            out.write(chunk)
            self.left -= len(chunk)
    def do_PUT(self):
        left = int(self.headers["Content-Length"])
        with open(self.translate_path(self.path), "wb") as f:
            while left > 0:
                chunk = self.rfile.read(min(left, 65536))
                if not chunk:
                    break
                f.write(chunk)
                left -= len(chunk)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()
"#;

/// The last line of the web app: it serves.
const SERVE: &str = r#"
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), lambda *a: Handler(*a, directory=os.environ["HOME"])).serve_forever()
"#;

/// A WebSocket echo server (`/echo`), of Python's standard library alone, added to the
/// web app's handler.
const ECHO: &str = r#"
import base64, hashlib, struct
def echo(handler):
    key = handler.headers["Sec-WebSocket-Key"]
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    handler.send_response(101)
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.end_headers()
    rfile, wfile = handler.rfile, handler.wfile
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return
        opcode, n = head[0] & 15, head[1] & 127
        if n == 126:
            n = struct.unpack(">H", rfile.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", rfile.read(8))[0]
        mask = rfile.read(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(rfile.read(n)))
        if opcode == 8:
            wfile.write(bytes([0x88, 0]))
            return
        size = bytes([n]) if n < 126 else bytes([126]) + struct.pack(">H", n)
        wfile.write(bytes([0x80 | opcode]) + size + data)
        wfile.flush()
_get = Handler.do_GET
def do_GET(self):
    if self.path == "/echo" and self.headers.get("Upgrade", "").lower() == "websocket":
        return echo(self)
    if self.path == "/stall":
        import time
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"x" * 10)
        self.wfile.flush()
        time.sleep(3600)
        return
    return _get(self)
Handler.do_GET = do_GET
"#;

/// Puts the web app of [`WEB_APP`] in work directory `work` (whose session starts it),
/// with a small file and a 200 MB one to serve.
fn serve_web_app(work: &std::path::Path) {
    std::fs::write(work.join("hello.txt"), "from-the-session").expect("a file in the session");
    let big = std::fs::File::create(work.join("big")).expect("a big file");
    big.set_len(200 << 20).expect("200 MB");
    std::fs::write(work.join("app.py.part"), [WEB_APP, ECHO, SERVE].concat()).expect("the app");
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["hello.txt", "big", "app.py.part"] {
            std::fs::set_permissions(work.join(f), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
    }
    std::fs::rename(work.join("app.py.part"), work.join("app.py")).expect("the app, whole");
}

/// This process's resident memory (the server's, and the test's), in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("its status");
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).expect("VmRSS");
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().expect("a number") << 10
}

/// Declares image `web:1`: interactive, its app `web` the web server of [`WEB_APP`] on port
/// 8000, started with the session once the test has put the script in its work directory.
async fn declare_web_image(app: &TestApp) {
    let text = "[images.\"web:1\"]\ntypes = [\"INTERACTIVE\"]\napps = [\"terminal\", { name = \"web\", port = 8000, \
                command = \"while [ ! -f $HOME/app.py ]; do sleep 0.1; done; exec python3 $HOME/app.py\" }, \
                { name = \"ghost\", port = 9999 }]\n";
    declare(app, text).await;
}

/// Applies declaration `text` with `sessiond apply`'s code.
async fn declare(app: &TestApp, text: &str) {
    let slots = sessiond::domain::directory::apply::known_slots(&app.db).await.expect("slots");
    let declared = sessiond::domain::directory::apply::file::parse(
        &[sessiond::domain::directory::apply::Source { name: "apps.toml".into(), text: text.to_owned() }],
        &slots,
    )
    .unwrap_or_else(|p| panic!("{p:#?}"));
    sessiond::domain::directory::apply::apply(
        &app.db,
        &declared,
        sessiond::domain::directory::apply::Options::new(false, false),
    )
    .await
    .expect("applied");
}

pub(crate) const OPEN: &str =
    "mutation($id: ID!, $name: String!) { openSessionApp(sessionId: $id, name: $name) { url expiresAt } }";

/// Launches interactive session `name` of `image` with `mem_mib` MiB for alice on
/// `machine`, and waits for it to run: its id, uuid and work directory.
async fn running(
    app: &TestApp,
    machine: &Machine,
    (name, image): (&str, &str),
    mem_mib: i64,
) -> (String, uuid::Uuid, std::path::PathBuf) {
    let mut launched = input(name, "", mem_mib, json!({"image": image, "type": "INTERACTIVE"}));
    launched.as_object_mut().expect("an input").remove("startupCommand");
    let id = launch(app, "demo-alice", launched).await;
    until(app, &id, |s| s["status"] == "RUNNING").await;
    let uuid: uuid::Uuid = crate::local_runtime::session_uuid(&id).parse().expect("a uuid");
    let work = SessionDir::of(&machine.path(), uuid).work();
    (id, uuid, work)
}

/// The apps of session `id` as its owner sees them: name, whether they open, status.
pub(crate) async fn statuses(app: &TestApp, id: &str) -> Value {
    let query = "query($id: ID!) { session(id: $id) { apps { name opens status statusInfo } } }";
    app.gql(Some("demo-alice"), query, json!({"id": id})).await["data"]["session"]["apps"].clone()
}

/// The link `openSessionApp` gives the demo user alice for app `web` of session `id`.
pub(crate) async fn open(app: &TestApp, id: &str) -> String {
    let r = app.gql(Some("demo-alice"), OPEN, json!({"id": id, "name": "web"})).await;
    r["data"]["openSessionApp"]["url"].as_str().unwrap_or_else(|| panic!("opened: {r}")).to_owned()
}

/// An HTTP client that follows no redirect (the test reads each step).
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client")
}

/// An app through the proxy, end to end: `openSessionApp` gives the owner a link; the
/// link sets the app's cookie once (used again, or expired, it is 401); with the cookie
/// the app answers, `Range` included, under its base path; without it, or for another
/// app, nothing is found. Another user and an administrator are told the session does not
/// exist. Terminating the session cuts a download midway.
async fn an_app_opens_through_the_proxy_for_its_owner_only(mut app: TestApp) {
    let machine = Machine::new();
    declare_web_image(&app).await;
    app.limits.max_app_body_bytes = 16 << 20;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let apps = app.apps.expect("the apps' listener");
    let (id, uuid, work) = running(&app, &machine, ("web-app", "web:1"), 256).await;
    // Its app waits for its script: starting; the terminal is no web app.
    let apps_now = statuses(&app, &id).await;
    assert_eq!(apps_now[0], json!({"name": "terminal", "opens": false, "status": null, "statusInfo": null}));
    assert_eq!((&apps_now[1]["name"], &apps_now[1]["status"]), (&json!("web"), &json!("STARTING")), "{apps_now}");
    serve_web_app(&work);

    // Only the owner opens it; an app the image does not declare is not found.
    for (token, name) in
        [("demo-bob", "web"), ("demo-admin", "web"), ("demo-alice", "nope"), ("demo-alice", "terminal")]
    {
        let r = app.gql(Some(token), OPEN, json!({"id": id, "name": name})).await;
        assert_eq!(crate::support::error_codes(&r), ["NOT_FOUND"], "{token} {name}: {r}");
    }
    let url = open(&app, &id).await;
    assert!(url.starts_with(&format!("http://{apps}/open?ticket=")), "{url}");
    let http = client();
    let first = http.get(&url).send().await.expect("the link");
    assert_eq!(first.status(), 303);
    let base = format!("/s/{uuid}/web/");
    assert_eq!(first.headers()["location"], base.as_str());
    let set = first.headers()["set-cookie"].to_str().expect("a cookie").to_owned();
    assert!(set.contains(&format!("Path={base}")) && set.contains("HttpOnly") && set.contains("SameSite=Lax"), "{set}");
    let cookie = set.split(';').next().expect("name=value").to_owned();
    assert_eq!(http.get(&url).send().await.expect("again").status(), 401, "a ticket opens once");
    let stale = open(&app, &id).await;
    app.db
        .execute_unprepared("UPDATE app_grants SET expires_at = created_at WHERE kind = 'ticket' AND used_at IS NULL")
        .await
        .expect("expired");
    assert_eq!(http.get(&stale).send().await.expect("stale").status(), 401, "an expired ticket opens nothing");

    let at = |path: &str| format!("http://{apps}{base}{path}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let hello = loop {
        let r = http.get(at("hello.txt")).header("cookie", &cookie).send().await.expect("through the proxy");
        if r.status() == 502 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        break r;
    };
    assert_eq!(hello.status(), 200);
    assert_eq!(statuses(&app, &id).await[1]["status"], "READY");
    // Long after its session started, an app whose port does not answer has failed.
    let past = chrono::Utc::now() - chrono::Duration::minutes(10);
    entity::session::Entity::update_many()
        .col_expr(entity::session::Column::StartedAt, sea_orm::sea_query::Expr::value(past))
        .filter(sea_orm::ColumnTrait::eq(&entity::session::Column::Id, uuid))
        .exec(&app.db)
        .await
        .expect("started long ago");
    let ghost = statuses(&app, &id).await[2].clone();
    assert_eq!(ghost["status"], "FAILED", "{ghost}");
    assert!(ghost["statusInfo"].as_str().is_some_and(|i| i.contains("9999")), "{ghost}");
    assert_eq!(hello.text().await.expect("a body"), "from-the-session");
    let range = http.get(at("hello.txt")).header("cookie", &cookie).header("range", "bytes=5-7").send().await;
    let range = range.expect("a range");
    assert_eq!(range.status(), 206);
    assert_eq!(range.text().await.expect("a body"), "the");
    // An upload streams to the app.
    let upload: Vec<u8> = (0..8_000_000_u32).map(|n| (n % 251) as u8).collect();
    let put = http.put(at("uploaded")).header("cookie", &cookie).body(upload.clone()).send().await.expect("a put");
    assert_eq!(put.status(), 201);
    assert_eq!(std::fs::read(work.join("uploaded")).expect("the upload"), upload);
    let too_big = http.put(at("too-big")).header("cookie", &cookie).body(vec![0_u8; 17 << 20]).send().await;
    // Refused at once: 413, or the connection closed while the client was still sending.
    match too_big {
        Ok(r) => assert_eq!(r.status(), 413, "past --max-app-body-bytes"),
        Err(e) => assert!(e.is_request(), "{e}"),
    }
    assert!(!work.join("too-big").exists(), "nothing of it reached the app");
    // The traffic was the session's activity, as terminal input is.
    let s = entity::session::Entity::find_by_id(uuid).one(&app.db).await.expect("read").expect("the session");
    assert!(s.typed_at.is_some(), "traffic through the proxy is activity");
    assert_eq!(http.get(at("hello.txt")).send().await.expect("no cookie").status(), 404);
    let other = format!("http://{apps}/s/{uuid}/terminal/hello.txt");
    assert_eq!(http.get(other).header("cookie", &cookie).send().await.expect("another app").status(), 404);
    let forged = http.get(at("hello.txt")).header("cookie", "sessiond-app=0123").send().await.expect("forged");
    assert_eq!(forged.status(), 404);
    // Many forged grants before the real one: a few are looked up, then nothing is found.
    let many = format!("{}; {cookie}", vec!["sessiond-app=0123"; 50].join("; "));
    let (statements, answer) = app.count_statements(http.get(at("hello.txt")).header("cookie", many).send()).await;
    assert_eq!(answer.expect("many").status(), 404);
    // (The count holds the runtime's own statements meanwhile too: a few.)
    assert!(statements < 15, "{statements} statements for 50 grants");

    // A WebSocket through the proxy keeps every message, in order.
    let mut ws_request = tungstenite::client::IntoClientRequest::into_client_request(format!("ws://{apps}{base}echo"))
        .expect("a request");
    ws_request.headers_mut().insert("cookie", cookie.parse().expect("a header"));
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_request).await.expect("a WebSocket to the app");
    {
        use futures_util::{SinkExt, StreamExt};
        for n in 0..1000 {
            ws.send(tungstenite::Message::text(format!("message {n}"))).await.expect("sent");
        }
        for n in 0..1000 {
            let got = ws.next().await.expect("an answer").expect("a message");
            assert_eq!(got.into_text().expect("text").as_str(), format!("message {n}"));
        }
        ws.close(None).await.ok();
    }

    // A token revoked closes the connections it opened, and its grant opens nothing more.
    let (token, access_key) = sessiond::domain::directory::auth::create_token(&app.db, "alice@example.com", None)
        .await
        .expect("a second token");
    let r = app.gql(Some(&token), OPEN, json!({"id": id, "name": "web"})).await;
    let link = r["data"]["openSessionApp"]["url"].as_str().unwrap_or_else(|| panic!("opened: {r}")).to_owned();
    let second = http.get(&link).send().await.expect("the link");
    let second =
        second.headers()["set-cookie"].to_str().expect("a cookie").split(';').next().expect("a pair").to_owned();
    let mut ws_request = tungstenite::client::IntoClientRequest::into_client_request(format!("ws://{apps}{base}echo"))
        .expect("a request");
    ws_request.headers_mut().insert("cookie", second.parse().expect("a header"));
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_request).await.expect("a WebSocket to the app");
    {
        use futures_util::{SinkExt, StreamExt};
        ws.send(tungstenite::Message::text("before")).await.expect("sent");
        assert_eq!(
            ws.next().await.expect("an answer").expect("a message").into_text().expect("text").as_str(),
            "before"
        );
        assert!(sessiond::domain::directory::auth::revoke_token(&app.db, &access_key).await.expect("revoked"));
        let closed = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(Ok(m)) = ws.next().await {
                if m.is_close() {
                    break;
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "a revoked token's WebSocket to the app is closed");
    }
    assert_eq!(http.get(at("hello.txt")).header("cookie", &second).send().await.expect("after").status(), 404);

    // A 200 MB download streams through: the server holds none of it.
    let before = resident();
    let mut download = http.get(at("big")).header("cookie", &cookie).send().await.expect("a download");
    assert_eq!(download.status(), 200);
    let (mut got, mut most) = (0_usize, before);
    while let Some(chunk) = download.chunk().await.expect("a chunk") {
        got += chunk.len();
        if got % (4 << 20) < chunk.len() {
            most = most.max(resident());
        }
    }
    assert_eq!(got, 200 << 20, "the whole file");
    let grew = most.saturating_sub(before);
    assert!(grew < 48 << 20, "a 200 MB download kept {} MB", grew >> 20);

    // A download cut by the session's end.
    let mut download = http.get(at("big")).header("cookie", &cookie).send().await.expect("a download");
    assert_eq!(download.status(), 200);
    let mut got = download.chunk().await.expect("a first chunk").map_or(0, |c| c.len());
    crate::local_runtime::terminate(&app, &id).await;
    until(&app, &id, crate::local_runtime::ended).await;
    while let Ok(Some(chunk)) = download.chunk().await {
        got += chunk.len();
    }
    assert!(got < 200 << 20, "the download stopped with its session ({got} bytes)");
    let after = http.get(at("hello.txt")).header("cookie", &cookie).send().await.expect("after");
    assert_eq!(after.status(), 404, "an ended session's app is gone");
}

/// A connection to an app through which nothing passes for `--app-idle-timeout-secs` is
/// closed: a silent WebSocket, and an answer whose body stalls midway (cut: never taken
/// for a whole one).
async fn an_idle_app_connection_is_closed(mut app: TestApp) {
    let machine = Machine::new();
    declare_web_image(&app).await;
    app.limits.app_idle_timeout_secs = 1;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let apps = app.apps.expect("the apps' listener");
    let (id, uuid, work) = running(&app, &machine, ("idle-app", "web:1"), 256).await;
    serve_web_app(&work);
    let http = client();
    let opened = http.get(open(&app, &id).await).send().await.expect("the link");
    let cookie =
        opened.headers()["set-cookie"].to_str().expect("a cookie").split(';').next().expect("a pair").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while statuses(&app, &id).await[1]["status"] != "READY" {
        assert!(Instant::now() < deadline, "the app never answered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let base = format!("/s/{uuid}/web/");
    let mut ws_request = tungstenite::client::IntoClientRequest::into_client_request(format!("ws://{apps}{base}echo"))
        .expect("a request");
    ws_request.headers_mut().insert("cookie", cookie.parse().expect("a header"));
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_request).await.expect("a WebSocket to the app");
    {
        use futures_util::{SinkExt, StreamExt};
        ws.send(tungstenite::Message::text("once")).await.expect("sent");
        let echoed = ws.next().await.expect("an answer").expect("a message");
        assert_eq!(echoed.into_text().expect("text").as_str(), "once");
        // Then silence both ways: closed (an end, a close frame or an error, not a message).
        let closed = tokio::time::timeout(Duration::from_secs(30), ws.next()).await.expect("closed in time");
        assert!(!matches!(&closed, Some(Ok(m)) if !m.is_close()), "{closed:?}");
    }
    let stalled = http.get(format!("http://{apps}{base}stall")).header("cookie", &cookie).send().await;
    let stalled = stalled.expect("an answer's head");
    assert_eq!(stalled.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(30), stalled.bytes()).await.expect("cut in time");
    assert!(body.is_err(), "a stalled answer is cut, never whole: {body:?}");
    crate::local_runtime::terminate(&app, &id).await;
    until(&app, &id, crate::local_runtime::ended).await;
}

/// What a page of the app tries of its user's: the page that opened it, the Sessions
/// page's token, the API (on the page's origin, then its own).
const PROBE: &str = r#"<!doctype html><title>probe</title><script>
(async () => {
  const seen = { opener: window.opener !== null, origin: location.origin };
  seen.token = sessionStorage.getItem('sessiond.page.token') ?? localStorage.getItem('sessiond.page.token');
  seen.cookies = document.cookie;
  const ask = async (url) => {
    try {
      const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' },
        credentials: 'include', body: JSON.stringify({ query: '{ viewer { user { email } } }' }) });
      return `${r.status} ${(await r.text()).slice(0, 200)}`;
    } catch (e) { return `refused: ${e}`; }
  };
  seen.api = await ask('API/graphql');
  seen.ownOrigin = await ask('/graphql');
  const done = document.createElement('pre');
  done.id = 'done';
  done.textContent = JSON.stringify(seen);
  document.body.append(done);
})();
</script>"#;

/// The app in chromium: the page's detail panel opens it in a tab of its own, on the apps'
/// origin, with no opener; the app's own page finds nothing of its user's: no token, no
/// grant cookie (HttpOnly), no answer from the API as the user.
async fn an_apps_page_gets_nothing_of_its_users(mut app: TestApp) {
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "playwright-core", "an app in the browser") {
        return;
    }
    let machine = Machine::new();
    declare_web_image(&app).await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let (_, uuid, work) = running(&app, &machine, ("page-web", "web:1"), 256).await;
    std::fs::write(work.join("probe.html"), PROBE.replace("API", &format!("http://{addr}"))).expect("the probe");
    std::fs::write(work.join("app.py.part"), [WEB_APP, ECHO, SERVE].concat()).expect("the app");
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["probe.html", "app.py.part"] {
            std::fs::set_permissions(work.join(f), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
    }
    std::fs::rename(work.join("app.py.part"), work.join("app.py")).expect("the app, whole");
    let args = [format!("http://{addr}"), "page-web".to_owned()];
    let r = crate::support::browser_script("apps_page.mjs", &args, &chromium).await;
    assert!(r.get("failure").is_none(), "{r:#}");
    assert_eq!(r["errors"], json!([]), "{r}");
    let apps = app.apps.expect("the apps' listener");
    assert!(r["appUrl"].as_str().is_some_and(|u| u.starts_with(&format!("http://{apps}/s/{uuid}/web/"))), "{r}");
    assert_eq!(r["rowApps"], json!(["web", "ghost"]), "the row's buttons: {r}");
    let probe = &r["probe"];
    assert_eq!(probe["origin"], format!("http://{apps}"), "an origin of its own: {r}");
    assert_eq!(probe["opener"], false, "no way back to the page: {r}");
    assert_eq!(probe["token"], Value::Null, "{r}");
    assert_eq!(probe["cookies"], "", "the grant is HttpOnly: {r}");
    let api = probe["api"].as_str().unwrap_or_default();
    assert!(api.starts_with("refused") || !api.contains("alice@example.com"), "the API as its user: {r}");
    assert!(probe["ownOrigin"].as_str().is_some_and(|a| a.starts_with("404")), "{r}");
}

/// A real Jupyter server (jupyter-server and ipykernel from PyPI) in a session, opened from
/// the page in chromium: served under its base path through the proxy, a notebook created,
/// its kernel started, and `1+1` run over the kernel's WebSocket gives `2`.
async fn jupyter_runs_a_notebook_through_the_proxy(mut app: TestApp) {
    let Some(chromium) = crate::support::chromium() else { return };
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !crate::support::node_package(&dir, "playwright-core", "Jupyter in the browser") {
        return;
    }
    let Some(lib) = crate::support::jupyter::lib() else { return };
    let machine = Machine::new();
    let text = "[images.\"jupyter:1\"]\ntypes = [\"INTERACTIVE\"]\napps = [{ name = \"jupyter\", port = 8888, \
                base_path = true, command = \"while [ ! -d $HOME/pylib ]; do sleep 0.2; done; \
                PYTHONPATH=$HOME/pylib exec python3 -m jupyter_server --no-browser --ip 127.0.0.1 \
                --port 8888 --ServerApp.base_url={base} --IdentityProvider.token='' \
                --ServerApp.disable_check_xsrf=True --ServerApp.root_dir=$HOME\" }]\n";
    declare(&app, text).await;
    if !app.start_local_runtime(&machine.path(), 500, None).await {
        return;
    }
    let addr = app.serve().await;
    let (_, uuid, work) = running(&app, &machine, ("page-jupyter", "jupyter:1"), 1024).await;
    let copied = std::process::Command::new("cp").arg("-a").arg(lib).arg(work.join("pylib.part")).status().expect("cp");
    assert!(copied.success());
    std::fs::rename(work.join("pylib.part"), work.join("pylib")).expect("the library, whole");
    let base = sessiond::domain::apps::base(uuid, "jupyter");
    let args = [format!("http://{addr}"), "page-jupyter".to_owned(), base.clone()];
    let r = crate::support::browser_script("jupyter_page.mjs", &args, &chromium).await;
    assert!(r.get("failure").is_none(), "{r:#}");
    assert_eq!(r["run"]["result"], "2", "{r}");
    assert_eq!(r["run"]["kernel"], "python3", "{r}");
    assert!(r["tabUrl"].as_str().is_some_and(|u| u.contains(&base)), "{r}");
}

db_tests!(
    jupyter_runs_a_notebook_through_the_proxy,
    the_server_reaches_a_sessions_own_loopback,
    an_app_opens_through_the_proxy_for_its_owner_only,
    an_idle_app_connection_is_closed,
    an_apps_page_gets_nothing_of_its_users
);
