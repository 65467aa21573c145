//! Accepting connections: HTTP/1.1 with upgrades (the WebSocket) on hyper, a header-read
//! timeout that also ends idle keep-alive connections, a cap on open connections, no Nagle,
//! and a graceful stop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// How long a stop waits for open requests to finish before it drops them.
pub const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(10);

/// Fewer descriptors than the process may open are left for the database, the log and the
/// listener itself.
const RESERVED_FILES: usize = 64;

/// How a listener treats its connections.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
}

impl ConnectionLimits {
    pub fn of(limits: &crate::config::HttpLimits) -> Self {
        Self {
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            max_connections: limits.max_connections,
        }
    }
}

/// The connection cap, kept under the process's soft limit of open files (read from
/// `/proc/self/limits`) so that a flood of connections never leaves the server unable to
/// open a file or accept again.
pub fn effective_max_connections(wanted: usize) -> usize {
    let Some(files) = open_file_limit() else { return wanted.max(1) };
    let room = files.saturating_sub(RESERVED_FILES).max(1);
    if wanted > room {
        tracing::warn!(wanted, room, "the connection cap is above the open-file limit: using {room}");
    }
    wanted.min(room).max(1)
}

fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open requests finish
/// (at most [`SHUTDOWN_PATIENCE`]). `active` follows the number of open connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    active: Gauge,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(effective_max_connections(limits.max_connections)));
    // Each connection holds a receiver: the stop is announced through it.
    let (stop_tx, stop_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        // At the cap, nothing is accepted: new connections wait in the listen queue.
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (tcp, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or a connection reset before it was accepted: wait
                    // a moment rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = tcp.set_nodelay(true) {
            // No Nagle: a live event is a small message that must not wait for the previous
            // one's acknowledgement (up to the peer's delayed-ACK timeout, 40 ms on Linux).
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(
            router
                .clone()
                .map_request(|req: axum::http::Request<hyper::body::Incoming>| req.map(axum::body::Body::new)),
        );
        let mut stop = stop_rx.clone();
        let active = active.clone();
        let header_read_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            active.inc();
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    _ = stop.changed() => conn.as_mut().graceful_shutdown(),
                }
            }
            active.dec();
            drop(permit);
            drop(stop);
        });
    }
    drop(stop_rx);
    drop(listener);
    // Every connection finishes the request it is answering and closes; the stop is
    // complete when the last one has dropped its receiver.
    let _ = stop_tx.send(());
    if tokio::time::timeout(SHUTDOWN_PATIENCE, stop_tx.closed()).await.is_err() {
        tracing::warn!("connections still open after {SHUTDOWN_PATIENCE:?}: dropping them");
    }
}
