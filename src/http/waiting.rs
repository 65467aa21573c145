//! The WebSocket connections (GraphQL and terminals) that have not authenticated yet: a
//! bounded room where the one that waited longest makes way for a newcomer, and the close
//! codes both endpoints share.

use std::sync::Arc;

/// The WebSocket connections that have not authenticated yet: at most `max`. One more
/// makes room by closing the one that has waited longest, so that connections which never
/// authenticate cannot keep anyone else out.
#[derive(Debug)]
pub struct Waiting {
    max: usize,
    queue: std::sync::Mutex<std::collections::VecDeque<(u64, tokio::sync::oneshot::Sender<()>)>>,
    next: std::sync::atomic::AtomicU64,
}

impl Waiting {
    pub fn new(max: usize) -> Self {
        Self { max: max.max(1), queue: Default::default(), next: Default::default() }
    }

    /// A new connection waiting to authenticate; the longest waiting one is told to leave
    /// when there are `max` already.
    pub fn arrive(self: &Arc<Self>) -> Arrival {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut queue = self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while queue.len() >= self.max {
            if let Some((_, oldest)) = queue.pop_front() {
                let _ = oldest.send(());
            }
        }
        queue.push_back((id, tx));
        Arrival { waiting: self.clone(), id, evicted: Some(rx) }
    }

    /// How many wait now.
    pub fn len(&self) -> usize {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connection's place among the waiting ones; it leaves when dropped (authenticated or
/// gone).
#[derive(Debug)]
pub struct Arrival {
    waiting: Arc<Waiting>,
    id: u64,
    /// Fires when the connection must leave to make room.
    pub evicted: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let mut queue = self.waiting.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        queue.retain(|(id, _)| *id != self.id);
    }
}

/// The close that makes room for a newer unauthenticated connection.
pub const EVICTED: (u16, &str) = (1013, "Too many connections waiting to authenticate; this one waited longest");

/// Whether a WebSocket error is a message over the size limit (then closed with 1009).
pub fn too_big(e: &axum::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|inner| inner.downcast_ref::<tungstenite::Error>())
        .is_some_and(|e| matches!(e, tungstenite::Error::Capacity(_)))
}
