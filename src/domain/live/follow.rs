//! What a follower of one session's live feed (its logs, its use) shares: the stream its
//! producer fills, and the check, after credentials changed, that the follower may still
//! follow the session.

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use crate::domain::directory::credentials::Credentials;
use crate::domain::{DomainError, DomainResult};

/// After credentials changed somewhere (`changes` said so): may the viewer of `keypair`
/// still follow session `session_id` (see it and work on it: an owner removed from its
/// project may not, [`crate::domain::sessions::visibility::session_to_work_on`])? Asked a little later, spread among all who follow
/// something; the database failing to say is no refusal. The error to end a feed with if
/// not.
pub async fn still_follows(
    db: &DatabaseConnection,
    credentials: &Credentials,
    changes: &mut tokio::sync::watch::Receiver<i64>,
    keypair: Uuid,
    session_id: Uuid,
) -> DomainResult<()> {
    tokio::time::sleep(Credentials::spread()).await;
    changes.mark_unchanged();
    let still = match credentials.viewer_of_keypair(keypair).await {
        Ok(Some(v)) => crate::domain::sessions::visibility::session_to_work_on(db, &v, session_id).await.map(drop),
        Ok(None) => Err(DomainError::Unauthenticated),
        Err(e) => Err(e),
    };
    match still {
        Ok(()) | Err(DomainError::Unavailable(_) | DomainError::Internal(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A stream of what `produce` sends: it runs while the stream is polled, and stops when
/// the stream is dropped.
pub fn produced<T, F, Fut>(produce: F) -> BoxStream<'static, DomainResult<T>>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<DomainResult<T>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let task = tokio::spawn(produce(tx));
    let abort = task.abort_handle();
    struct Stop(tokio::task::AbortHandle);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let stop = Stop(abort);
    futures_util::stream::unfold((rx, stop), |(mut rx, stop)| async move {
        let item = rx.recv().await?;
        Some((item, (rx, stop)))
    })
    .boxed()
}
