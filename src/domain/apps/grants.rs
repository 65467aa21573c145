//! Who may open a session's app, and how a browser proves it. A browser cannot send the
//! API's bearer token on a navigation, so opening goes in two steps:
//!
//! 1. `openSessionApp` ([`open`]), with the token: the session's owner (no one else, not an
//!    administrator: theirs looks like a session that does not exist) gets a ticket, good
//!    for [`TICKET_LIFE`] and once.
//! 2. The apps' listener trades the ticket ([`redeem`]) for a cookie grant scoped to that
//!    app, good while the session runs, the token that asked is not revoked, and at most
//!    [`COOKIE_LIFE`]. Each request through the proxy is admitted by it ([`Admissions::admit`]).
//!
//! Only a hash of each secret is stored; a ticket is used by the update that marks it
//! used, so two uses of one ticket cannot both succeed.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use entity::{app_grant, session};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use super::AppSpec;
use crate::domain::directory::auth::{Viewer, hash_token};
use crate::domain::directory::credentials::Credentials;
use crate::domain::model::SessionType;
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, sessions::visibility};

/// How long a ticket may wait to be used.
pub const TICKET_LIFE: Duration = Duration::seconds(60);
/// The longest a cookie grant lasts (the session's end, or its token's, come first).
pub const COOKIE_LIFE: Duration = Duration::hours(12);

const TICKET: &str = "ticket";
const COOKIE: &str = "cookie";

/// A ticket that opens an app: where to send the browser, and until when it may.
#[derive(Clone, Debug)]
pub struct Ticket {
    pub secret: String,
    pub session_id: Uuid,
    pub app: String,
    pub expires_at: DateTime<Utc>,
}

/// A cookie grant: its secret, and what it opens.
#[derive(Clone, Debug)]
pub struct Grant {
    pub secret: String,
    pub session_id: Uuid,
    pub app: String,
    pub expires_at: DateTime<Utc>,
}

/// A request admitted to an app: the session and the app as declared.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub session: session::Model,
    pub app: AppSpec,
    pub user_id: Uuid,
    /// The keypair whose token opened the app: revoked, its connections close.
    pub keypair_id: Uuid,
    /// When the grant expires.
    pub expires_at: DateTime<Utc>,
    /// The credentials' revision it was admitted at ([`revoked`] checks what changed since).
    pub revision: i64,
}

fn new_secret() -> String {
    crate::domain::directory::secrets::hex(&rand::random::<[u8; 32]>())
}

/// The app `name` of session `session_id`, if `viewer` may open it: their own session,
/// interactive, RUNNING, whose image declares the app with a port. Anything else is not
/// found, or not running.
async fn openable(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    session_id: Uuid,
    name: &str,
) -> DomainResult<(session::Model, AppSpec)> {
    let s = visibility::session_to_work_on(db, viewer, session_id).await?;
    if s.owner_id != viewer.user_id {
        return Err(DomainError::NotFound("session")); // an administrator sees it, but it is not theirs
    }
    let image = entity::image::Entity::find_by_id(s.image.clone()).one(db).await?;
    let app = image
        .as_ref()
        .map(super::of_image)
        .unwrap_or_default()
        .into_iter()
        .find(|a| a.name == name && a.port.is_some())
        .ok_or(DomainError::NotFound("app"))?;
    if s.session_type != SessionType::Interactive.as_str() || s.status != SessionStatus::Running.as_str() {
        return Err(DomainError::bad_input("NOT_RUNNING", None, "an app opens while its interactive session runs"));
    }
    Ok((s, app))
}

/// A ticket for `viewer` to open app `name` of session `session_id` ([`openable`]).
pub async fn open(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    session_id: Uuid,
    name: &str,
    now: DateTime<Utc>,
) -> DomainResult<Ticket> {
    let (s, app) = openable(db, viewer, session_id, name).await?;
    let secret = new_secret();
    let expires_at = now + TICKET_LIFE;
    app_grant::ActiveModel {
        secret_hash: Set(hash_token(&secret)),
        kind: Set(TICKET.to_owned()),
        session_id: Set(s.id),
        app: Set(app.name.clone()),
        user_id: Set(viewer.user_id),
        keypair_id: Set(viewer.keypair_id),
        expires_at: Set(expires_at),
        used_at: Set(None),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    // Old grants go as new ones come: what expired long ago is no one's.
    app_grant::Entity::delete_many().filter(app_grant::Column::ExpiresAt.lt(now - Duration::hours(1))).exec(db).await?;
    Ok(Ticket { secret, session_id: s.id, app: app.name, expires_at })
}

/// Trades a ticket for a cookie grant, once: an unknown, expired or used ticket is
/// `Unauthenticated`.
pub async fn redeem(db: &impl ConnectionTrait, ticket: &str, now: DateTime<Utc>) -> DomainResult<Grant> {
    let hash = hash_token(ticket);
    let used = app_grant::Entity::update_many()
        .col_expr(app_grant::Column::UsedAt, Expr::value(now))
        .filter(app_grant::Column::SecretHash.eq(hash.clone()))
        .filter(app_grant::Column::Kind.eq(TICKET))
        .filter(app_grant::Column::UsedAt.is_null())
        .filter(app_grant::Column::ExpiresAt.gt(now))
        .exec(db)
        .await?;
    if used.rows_affected != 1 {
        return Err(DomainError::Unauthenticated);
    }
    let t = app_grant::Entity::find_by_id(hash).one(db).await?.ok_or(DomainError::Unauthenticated)?;
    let secret = new_secret();
    let expires_at = now + COOKIE_LIFE;
    app_grant::ActiveModel {
        secret_hash: Set(hash_token(&secret)),
        kind: Set(COOKIE.to_owned()),
        expires_at: Set(expires_at),
        used_at: Set(None),
        created_at: Set(now),
        ..app_grant::ActiveModel::from(t.clone())
    }
    .insert(db)
    .await?;
    Ok(Grant { secret, session_id: t.session_id, app: t.app, expires_at })
}

/// Resolves once the token that opened an app (keypair `keypair_id`, admitted at the
/// credentials' revision `since`) no longer stands for anyone (revoked, or its user gone):
/// checked at once if they changed since, then at every change.
pub async fn revoked(credentials: Credentials, keypair_id: Uuid, since: i64) {
    let mut changes = credentials.changes();
    changes.mark_unchanged();
    let mut check = credentials.revision() != since;
    loop {
        if check && let Ok(None) = credentials.viewer_of_keypair(keypair_id).await {
            return;
        }
        if changes.changed().await.is_err() {
            return std::future::pending().await;
        }
        changes.mark_unchanged();
        check = true;
    }
}

/// Admits a request to app `name` of session `session_id` with the cookie whose secret's
/// hash is `hash`: the grant is for that app, not expired; its token is not revoked; the
/// session is still its owner's, RUNNING. Anything else is `Unauthenticated` (a grant that
/// opens nothing).
async fn admit(
    db: &impl ConnectionTrait,
    credentials: &Credentials,
    hash: String,
    session_id: Uuid,
    name: &str,
    now: DateTime<Utc>,
) -> DomainResult<Admitted> {
    let revision = credentials.revision();
    let grant = app_grant::Entity::find_by_id(hash)
        .filter(app_grant::Column::Kind.eq(COOKIE))
        .one(db)
        .await?
        .filter(|g| g.session_id == session_id && g.app == name && g.expires_at > now)
        .ok_or(DomainError::Unauthenticated)?;
    let viewer = credentials.viewer_of_keypair(grant.keypair_id).await?.ok_or(DomainError::Unauthenticated)?;
    let (session, app) = openable(db, &viewer, session_id, name).await.map_err(|e| match e {
        DomainError::Unavailable(_) | DomainError::Internal(_) => e,
        _ => DomainError::Unauthenticated,
    })?;
    Ok(Admitted {
        session,
        app,
        user_id: viewer.user_id,
        keypair_id: grant.keypair_id,
        expires_at: grant.expires_at,
        revision,
    })
}

/// How long an admission is used again for the same grant, session and app without
/// reading it anew, while the credentials do not change ([`Credentials::revision`]): an
/// app's page asks for many files at once.
pub const ADMISSION_TTL: std::time::Duration = std::time::Duration::from_secs(2);
/// Admissions held at most; past it they start afresh.
const MOST_ADMISSIONS: usize = 10_000;

/// A grant's admissions, by its secret's hash, the session and the app.
type Held = HashMap<(String, Uuid, String), (Admitted, std::time::Instant, i64)>;

/// The admissions made recently, used again for [`ADMISSION_TTL`] while the
/// credentials keep their revision (a token revoked, a user removed: read anew at once). A
/// refusal is never kept.
#[derive(Debug, Default)]
pub struct Admissions(std::sync::Mutex<Held>);

impl Admissions {
    /// Admits a request to app `name` of session `session_id` with cookie `secret` (the
    /// grant for that app and unexpired, its token not revoked, the session still its
    /// owner's and RUNNING; else `Unauthenticated`), or takes what it found for the same
    /// grant, session and app moments ago; and whether it was that.
    pub async fn admit(
        &self,
        db: &impl ConnectionTrait,
        credentials: &Credentials,
        secret: &str,
        session_id: Uuid,
        name: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<(Admitted, bool)> {
        let key = (hash_token(secret), session_id, name.to_owned());
        let revision = credentials.revision();
        if let Some((a, at, seen)) = self.held().get(&key)
            && at.elapsed() < ADMISSION_TTL
            && *seen == revision
            && a.expires_at > now
        {
            return Ok((a.clone(), true));
        }
        let admitted = admit(db, credentials, key.0.clone(), session_id, name, now).await?;
        let mut held = self.held();
        if held.len() >= MOST_ADMISSIONS {
            held.clear();
        }
        held.insert(key, (admitted.clone(), std::time::Instant::now(), revision));
        Ok((admitted, false))
    }

    /// Forgets the admission of that grant, session and app: the next is read anew.
    pub fn forget(&self, secret: &str, session_id: Uuid, name: &str) {
        self.held().remove(&(hash_token(secret), session_id, name.to_owned()));
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
