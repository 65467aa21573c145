//! The server's own secrets: random keys generated on first use and stored, so that every
//! replica and every restart shares them (`signing_keys`, one row per key name), and keys
//! set on purpose ([`set`], an owner's rotated callback key).

use base64::Engine;
use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Query};

use crate::domain::{DomainError, DomainResult, model::clock};

/// `bytes` as lower-case hex: how digests, signatures and keys are written.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(out, "{b:02x}"); // writing to a String cannot fail
    }
    out
}

/// The 32-byte key named `name`, made now if there is none yet.
pub async fn key(db: &impl ConnectionTrait, name: &str) -> DomainResult<Vec<u8>> {
    if let Some((secret, _)) = find(db, name).await? {
        return Ok(secret);
    }
    let mut secret = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
    let insert = Query::insert()
        .into_table(Alias::new("signing_keys"))
        .columns([Alias::new("name"), Alias::new("secret"), Alias::new("created_at")])
        .values_panic([
            name.into(),
            base64::engine::general_purpose::STANDARD.encode(secret).into(),
            clock::now().into(),
        ])
        // Two replicas starting at once: the first key stays, both read it back.
        .on_conflict(OnConflict::column(Alias::new("name")).do_nothing().to_owned())
        .to_owned();
    db.execute_raw(db.get_database_backend().build(&insert)).await?;
    let (secret, _) =
        find(db, name).await?.ok_or_else(|| DomainError::invariant(format!("the key {name} vanished")))?;
    Ok(secret)
}

/// The secret named `name` and when it was set, if there is one.
pub async fn find(db: &impl ConnectionTrait, name: &str) -> DomainResult<Option<(Vec<u8>, DateTime<Utc>)>> {
    let select = Query::select()
        .columns([Alias::new("secret"), Alias::new("created_at")])
        .from(Alias::new("signing_keys"))
        .and_where(ExprTrait::eq(Expr::col(Alias::new("name")), name))
        .to_owned();
    let Some(row) = db.query_one_raw(db.get_database_backend().build(&select)).await? else {
        return Ok(None);
    };
    let text: String = row.try_get("", "secret")?;
    let at: DateTime<Utc> = row.try_get("", "created_at")?;
    let secret = base64::engine::general_purpose::STANDARD.decode(text).map_err(DomainError::internal)?;
    Ok(Some((secret, at)))
}

/// Sets the secret named `name` to `secret`, as of `at`, whatever it was.
pub async fn set(db: &impl ConnectionTrait, name: &str, secret: &[u8], at: DateTime<Utc>) -> DomainResult<()> {
    let insert = Query::insert()
        .into_table(Alias::new("signing_keys"))
        .columns([Alias::new("name"), Alias::new("secret"), Alias::new("created_at")])
        .values_panic([name.into(), base64::engine::general_purpose::STANDARD.encode(secret).into(), at.into()])
        .on_conflict(
            OnConflict::column(Alias::new("name"))
                .update_columns([Alias::new("secret"), Alias::new("created_at")])
                .to_owned(),
        )
        .to_owned();
    db.execute_raw(db.get_database_backend().build(&insert)).await?;
    Ok(())
}
