//! The apps' listener (`--apps-bind`): every session's app, served by sessiond on an origin
//! of its own, never the page's or the API's (an app runs its user's code).
//!
//! - `GET /open?ticket=T`: trades a ticket of `openSessionApp` for a cookie grant scoped to
//!   the app's path (HttpOnly, SameSite=Lax, Secure under TLS), then sends the browser to
//!   the app. An unknown, expired or used ticket gets 401.
//! - `/s/<session>/<app>/…`: the app, for a request whose cookie the grant admits
//!   ([`grants::Admissions`]): HTTP/1.1 with bodies streamed both ways, and WebSocket upgrades.
//!   The connection to the app is made in the session's own network namespace, by its
//!   dialer here or its Slurm job's relay ([`crate::domain::runtime::apps`]): the sandbox
//!   keeps no network. An app
//!   that does not need its base path gets its requests without it. Anything not admitted
//!   gets 404, as a session that does not exist.

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use hyper_util::rt::TokioIo;
use serde::Deserialize;

use super::AppState;
use crate::domain::apps::grants;
use crate::domain::runtime::apps::Reach;
use crate::domain::{DomainError, model::clock};

/// The cookie that carries an app's grant.
pub const COOKIE: &str = "sessiond-app";

/// The most grant cookies of one request that are looked up.
const MOST_GRANTS: usize = 4;

/// The apps' listener's routes.
pub fn router(state: AppState) -> Router {
    let cap = state.limits.max_app_body_bytes;
    Router::new()
        .route("/open", get(open))
        .route("/s/{*rest}", any(proxy))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(cap))
        .with_state(state)
}

/// An answer's body through the proxy: it holds its user's share of app connections until
/// it is done, and is cut (an error: the browser sees a broken download, never a whole one)
/// once `void` resolves (the token that opened the app revoked) or nothing came for `idle`.
struct Holding<B> {
    body: std::pin::Pin<Box<B>>,
    void: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    idle: std::time::Duration,
    /// When waiting on the app counts as idle from (set as the listener asks for more: a
    /// browser slow to read is not an idle app).
    quiet: std::pin::Pin<Box<tokio::time::Sleep>>,
    waiting: bool,
    _held: crate::domain::live::shares::Held,
}

impl<B> hyper::body::Body for Holding<B>
where
    B: hyper::body::Body,
    B::Error: Into<axum::BoxError>,
{
    type Data = B::Data;
    type Error = axum::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let me = self.get_mut();
        if me.void.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err("the grant that opened the app is revoked".into())));
        }
        if !me.waiting {
            me.quiet.as_mut().reset(tokio::time::Instant::now() + me.idle);
            me.waiting = true;
        }
        match me.body.as_mut().poll_frame(cx) {
            Poll::Ready(Some(frame)) => {
                me.waiting = false;
                Poll::Ready(Some(frame.map_err(Into::into)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending if me.quiet.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Some(Err("the app sent nothing for too long".into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// One side of an upgraded connection, noting when it last read anything (`at`, in
/// milliseconds since `epoch`).
struct Watched<T> {
    io: T,
    at: std::sync::Arc<std::sync::atomic::AtomicU64>,
    epoch: std::time::Instant,
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<T> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut me.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            let now = u64::try_from(me.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            me.at.store(now, std::sync::atomic::Ordering::Relaxed);
        }
        polled
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<T> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Bytes both ways between the browser's and the app's upgraded connections, until either
/// side closes, `void` resolves, or nothing passes either way for `idle`.
async fn bridge(
    ours: hyper::upgrade::Upgraded,
    theirs: hyper::upgrade::Upgraded,
    idle: std::time::Duration,
    void: impl Future<Output = ()>,
) {
    use std::sync::atomic::Ordering;
    let (at, epoch) = (std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)), std::time::Instant::now());
    let mut ours = Watched { io: TokioIo::new(ours), at: at.clone(), epoch };
    let mut theirs = Watched { io: TokioIo::new(theirs), at: at.clone(), epoch };
    let silent = async {
        loop {
            let last = epoch + std::time::Duration::from_millis(at.load(Ordering::Relaxed));
            if last.elapsed() >= idle {
                return;
            }
            tokio::time::sleep(idle - last.elapsed()).await;
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut ours, &mut theirs) => {}
        () = void => {}
        () = silent => {}
    }
}

/// How long a kept-alive connection to an app stays idle before it is closed.
const POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(30);
/// Idle connections kept per app.
const POOL_PER_APP: usize = 16;
/// Sessions whose reach is remembered at most; past it the memory starts afresh.
const MOST_REACHES: usize = 4_096;

/// Makes connections to sessions' apps for the pool: a URI's host is the session, its port
/// the app's; how the session is reached is what the proxy last found for it.
#[derive(Clone, Debug, Default)]
struct Connector {
    reaches: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<uuid::Uuid, Reach>>>,
}

impl tower::Service<axum::http::Uri> for Connector {
    type Response = TokioIo<tokio::net::TcpStream>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: axum::http::Uri) -> Self::Future {
        let session = uri.host().and_then(|h| h.parse::<uuid::Uuid>().ok());
        let reach = session
            .and_then(|id| self.reaches.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&id).cloned());
        let port = uri.port_u16();
        Box::pin(async move {
            match (session, reach, port) {
                (Some(id), Some(reach), Some(port)) => reach.connect(id, port).await.map(TokioIo::new),
                _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "not a session's app")),
            }
        })
    }
}

/// The connections to sessions' apps, kept alive between requests (one made through a
/// dialer or a relay costs more than the request on it), each used by one request at a
/// time; an upgraded one is the WebSocket's alone.
pub struct Upstreams {
    client: hyper_util::client::legacy::Client<Connector, Body>,
    connector: Connector,
}

impl Default for Upstreams {
    fn default() -> Self {
        let connector = Connector::default();
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_PER_APP)
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(connector.clone());
        Self { client, connector }
    }
}

impl Upstreams {
    /// Sends `request` (its URI `http://<session>:<port>/…`) to the app of session
    /// `session`, reached by `reach`.
    async fn send(
        &self,
        reach: Reach,
        session: uuid::Uuid,
        request: axum::http::Request<Body>,
    ) -> Result<axum::http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        {
            let mut reaches = self.connector.reaches.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if reaches.len() >= MOST_REACHES {
                reaches.clear();
            }
            reaches.insert(session, reach);
        }
        self.client.request(request).await
    }
}

#[derive(Deserialize)]
pub struct OpenQuery {
    ticket: String,
}

fn status(code: StatusCode, text: &'static str) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// Whether the apps are served under TLS (their cookies are then `Secure`).
fn secure(state: &AppState) -> bool {
    state.runtime.apps_url.as_deref().is_some_and(|u| u.starts_with("https://"))
}

async fn open(State(state): State<AppState>, Query(q): Query<OpenQuery>) -> Response {
    match grants::redeem(&state.db, &q.ticket, clock::now()).await {
        Ok(grant) => {
            let base = crate::domain::apps::base(grant.session_id, &grant.app);
            let mut cookie = format!("{COOKIE}={}; Path={base}; HttpOnly; SameSite=Lax", grant.secret);
            if secure(&state) {
                cookie.push_str("; Secure");
            }
            let mut headers = HeaderMap::new();
            headers.insert(header::LOCATION, HeaderValue::from_str(&base).unwrap_or(HeaderValue::from_static("/")));
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                headers.insert(header::SET_COOKIE, v);
            }
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            (StatusCode::SEE_OTHER, headers).into_response()
        }
        Err(DomainError::Unauthenticated) => status(StatusCode::UNAUTHORIZED, "This link has expired or was used."),
        Err(e) => {
            tracing::warn!("opening an app failed: {e}");
            status(StatusCode::SERVICE_UNAVAILABLE, "The app cannot be opened now.")
        }
    }
}

/// The request's cookies: the values of its grant cookies (the most specific path first),
/// and the others as a `Cookie` header's value (what the app is sent: never the grant).
fn split_cookies(headers: &HeaderMap) -> (Vec<String>, Option<HeaderValue>) {
    let (mut grants, mut others) = (Vec::new(), Vec::new());
    let pairs = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';'));
    for pair in pairs.map(str::trim).filter(|p| !p.is_empty()) {
        match pair.strip_prefix(COOKIE).and_then(|rest| rest.strip_prefix('=')) {
            Some(grant) => grants.push(grant.to_owned()),
            None => others.push(pair),
        }
    }
    let kept = (!others.is_empty()).then(|| HeaderValue::from_str(&others.join("; ")).ok()).flatten();
    (grants, kept)
}

fn not_found() -> Response {
    status(StatusCode::NOT_FOUND, "Not found.")
}

async fn proxy(State(state): State<AppState>, mut req: Request) -> Response {
    // `/s/<session>/<app>/<rest>`
    let path = req.uri().path().to_owned();
    let mut parts = path.trim_start_matches("/s/").splitn(3, '/');
    let (Some(session), Some(app)) = (parts.next(), parts.next()) else { return not_found() };
    let rest = parts.next();
    let Ok(session_id) = session.parse::<uuid::Uuid>() else { return not_found() };
    let now = clock::now();
    let mut admitted = None;
    let (grants, kept) = split_cookies(req.headers());
    // A browser sends the one grant of the app's path; a request crafted with many costs
    // no more than a few lookups.
    for secret in grants.into_iter().take(MOST_GRANTS) {
        match state.admissions.admit(&state.db, &state.live.credentials, &secret, session_id, app, now).await {
            Ok((a, cached)) => {
                admitted = Some((a, cached.then_some(secret)));
                break;
            }
            Err(DomainError::Unauthenticated) => {}
            Err(e) => {
                tracing::warn!("admitting a request to an app failed: {e}");
                return status(StatusCode::SERVICE_UNAVAILABLE, "The app cannot be reached now.");
            }
        }
    }
    let Some((admitted, cached)) = admitted else { return not_found() };
    let base = crate::domain::apps::base(session_id, app);
    let Some(rest) = rest else {
        // `/s/<session>/<app>`: the app's root is its base path, with its slash.
        return (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, base)]).into_response();
    };
    let Some(port) = admitted.app.port else { return not_found() };
    // Each request held against its user's share until its answer has streamed (or its
    // WebSocket closed).
    let held = match state.live.shares.take(admitted.user_id, crate::domain::live::shares::Share::App) {
        Ok(h) => h,
        Err(e) => return (StatusCode::TOO_MANY_REQUESTS, e.to_string()).into_response(),
    };
    // Traffic through the proxy is activity, as terminal input is (written at most once
    // in a while per session).
    if admitted.session.typed_at.is_none_or(|t| now - t >= crate::domain::reclaim::idle::TYPED_EVERY)
        && let Err(e) = crate::domain::reclaim::idle::typed(&state.db, session_id, now).await
    {
        tracing::warn!("noting an app's traffic as activity failed: {e}");
    }
    let Some(reach) = Reach::of(state.runtime.local.as_ref(), &admitted.session) else { return not_found() };
    // What the app is asked: its path with or without its base, the rest as sent.
    let query = req.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
    let target = if admitted.app.base_path { format!("{base}{rest}{query}") } else { format!("/{rest}{query}") };
    let Ok(uri) = format!("http://{session_id}:{port}{target}").parse::<axum::http::Uri>() else { return not_found() };
    let upgrade = hyper::upgrade::on(&mut req);
    let (mut head, body) = req.into_parts();
    head.uri = uri;
    head.headers.remove(header::COOKIE);
    if let Some(kept) = kept {
        head.headers.insert(header::COOKIE, kept);
    }
    head.headers.insert("x-forwarded-prefix", HeaderValue::from_str(&base).unwrap_or(HeaderValue::from_static("/")));
    let asked = axum::http::Request::from_parts(head, body);
    let idle = std::time::Duration::from_secs(state.limits.app_idle_timeout_secs.max(1));
    let answer = match tokio::time::timeout(idle, state.upstreams.send(reach, session_id, asked)).await {
        Ok(Ok(a)) => a,
        Ok(Err(e)) if e.is_connect() => {
            tracing::debug!("app {app} of session {session_id}: {e}");
            // Admitted moments ago: the session may have ended since. Asked anew, it is
            // what a session that does not exist is, or an app not answering yet.
            if let Some(secret) = cached {
                state.admissions.forget(&secret, session_id, app);
                let again =
                    state.admissions.admit(&state.db, &state.live.credentials, &secret, session_id, app, now).await;
                if matches!(again, Err(DomainError::Unauthenticated)) {
                    return not_found();
                }
            }
            return status(StatusCode::BAD_GATEWAY, "The app does not answer yet.");
        }
        Ok(Err(_)) => return status(StatusCode::BAD_GATEWAY, "The app closed the connection."),
        Err(_) => return status(StatusCode::GATEWAY_TIMEOUT, "The app did not answer."),
    };
    let void = grants::revoked(state.live.credentials.clone(), admitted.keypair_id, admitted.revision);
    let (mut head, body) = answer.into_parts();
    // The browser's connection is the listener's own, HTTP/1.1, whatever the app speaks.
    head.version = axum::http::Version::HTTP_11;
    if head.status == StatusCode::SWITCHING_PROTOCOLS {
        let mut switched = axum::http::Response::from_parts(head, body);
        let theirs = hyper::upgrade::on(&mut switched);
        let (head, _) = switched.into_parts();
        tokio::spawn(async move {
            let _held = held;
            if let (Ok(ours), Ok(theirs)) = (upgrade.await, theirs.await) {
                bridge(ours, theirs, idle, void).await;
            }
        });
        return Response::from_parts(head, Body::empty());
    }
    let quiet = Box::pin(tokio::time::sleep(idle));
    Response::from_parts(
        head,
        Body::new(Holding { body: Box::pin(body), void: Box::pin(void), idle, quiet, waiting: false, _held: held }),
    )
}
