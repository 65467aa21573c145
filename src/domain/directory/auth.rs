//! Bearer tokens: a token authenticates one keypair, and through it a user with a role.
//! Only the SHA-256 of a token is stored; tokens are 256-bit random strings, so a fast
//! hash is enough (there is nothing to brute-force).

use base64::Engine;
use rand::RngCore;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use entity::{keypair, user};

use crate::domain::model::Role;
use crate::domain::{DomainError, DomainResult, model::clock};

/// Who is asking: the authenticated keypair and its user.
#[derive(Clone, Debug, PartialEq)]
pub struct Viewer {
    pub user_id: Uuid,
    pub email: String,
    pub full_name: String,
    pub role: Role,
    pub domain_id: Uuid,
    pub keypair_id: Uuid,
    pub resource_policy: String,
}

impl Viewer {
    /// Whether the viewer administers the projects of `domain_id`.
    pub fn administers_domain(&self, domain_id: Uuid) -> bool {
        self.role == Role::Superadmin || (self.role == Role::Admin && self.domain_id == domain_id)
    }
}

pub fn hash_token(token: &str) -> String {
    crate::domain::directory::secrets::hex(&Sha256::digest(token.as_bytes()))
}

/// The viewer a token stands for; `Unauthenticated` for an unknown or inactive one.
pub async fn authenticate(db: &impl ConnectionTrait, token: &str) -> DomainResult<Viewer> {
    authenticate_hash(db, &hash_token(token)).await
}

/// The viewer of the token whose hash is `token_hash` (see [`hash_token`]).
pub async fn authenticate_hash(db: &impl ConnectionTrait, token_hash: &str) -> DomainResult<Viewer> {
    viewer_where(db, keypair::Column::SecretHash.eq(token_hash)).await?.ok_or(DomainError::Unauthenticated)
}

/// The viewer of an active keypair, by id (for a link that keypair signed); `None` for an
/// unknown or inactive one.
pub async fn keypair_viewer(db: &impl ConnectionTrait, keypair_id: Uuid) -> DomainResult<Option<Viewer>> {
    viewer_where(db, keypair::Column::Id.eq(keypair_id)).await
}

/// The viewer of the active keypair `which` picks, with its user, in one statement (every
/// request starts here).
async fn viewer_where(
    db: &impl ConnectionTrait,
    which: impl sea_orm::sea_query::IntoCondition,
) -> DomainResult<Option<Viewer>> {
    use sea_orm::{FromQueryResult, JoinType, QuerySelect, RelationTrait};
    #[derive(FromQueryResult)]
    struct Row {
        keypair_id: Uuid,
        resource_policy: String,
        user_id: Uuid,
        email: String,
        full_name: String,
        role: String,
        domain_id: Uuid,
    }
    let Some(r) = keypair::Entity::find()
        .select_only()
        .column_as(keypair::Column::Id, "keypair_id")
        .column(keypair::Column::ResourcePolicy)
        .column_as(user::Column::Id, "user_id")
        .column(user::Column::Email)
        .column(user::Column::FullName)
        .column(user::Column::Role)
        .column(user::Column::DomainId)
        .join(JoinType::InnerJoin, keypair::Relation::User.def())
        .filter(which)
        .filter(keypair::Column::IsActive.eq(true))
        .into_model::<Row>()
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(Viewer {
        user_id: r.user_id,
        email: r.email,
        full_name: r.full_name,
        role: Role::stored(&r.role)?,
        domain_id: r.domain_id,
        keypair_id: r.keypair_id,
        resource_policy: r.resource_policy,
    }))
}

/// A fresh random token: `sd_` and 43 URL-safe characters.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("sd_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

fn generate_access_key() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut bytes = [0u8; 18];
    rand::rng().fill_bytes(&mut bytes);
    let tail: String = bytes.iter().map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char).collect();
    format!("AK{tail}")
}

/// Creates a keypair for the user with `email` and returns its token, which is shown once:
/// only its hash is kept. `policy` defaults to the policy of the user's newest keypair,
/// else `default`.
/// A keypair as an operator sees it: never its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    pub access_key: String,
    pub resource_policy: String,
    pub active: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The keypairs of the user with `email`, oldest first.
pub async fn list_tokens(db: &impl ConnectionTrait, email: &str) -> DomainResult<Vec<TokenInfo>> {
    use sea_orm::QueryOrder;
    let u = user::Entity::find()
        .filter(user::Column::Email.eq(email))
        .one(db)
        .await?
        .ok_or(DomainError::NotFound("user"))?;
    Ok(keypair::Entity::find()
        .filter(keypair::Column::UserId.eq(u.id))
        .order_by_asc(keypair::Column::CreatedAt)
        .order_by_asc(keypair::Column::AccessKey)
        .all(db)
        .await?
        .into_iter()
        .map(|k| TokenInfo {
            access_key: k.access_key,
            resource_policy: k.resource_policy,
            active: k.is_active,
            created_at: k.created_at,
        })
        .collect())
}

const REVISION: &str = "credentials";

/// Says, inside the transaction that changes them, that credentials or the catalog (images,
/// resource groups) changed: every server sees it within [`crate::domain::directory::credentials::POLL`] once
/// the transaction commits, checks the viewers of its open connections again and reads the
/// catalog again.
pub async fn changed(txn: &impl ConnectionTrait) -> DomainResult<()> {
    let backend = txn.get_database_backend();
    let bump = Query::update()
        .table(Alias::new("revisions"))
        .value(Alias::new("value"), Expr::col(Alias::new("value")).add(1))
        .and_where(Expr::col(Alias::new("name")).eq(REVISION))
        .to_owned();
    txn.execute_raw(backend.build(&bump)).await?;
    Ok(())
}

/// The current revision of credentials.
pub async fn revision(db: &impl ConnectionTrait) -> DomainResult<i64> {
    let backend = db.get_database_backend();
    let select = Query::select()
        .column(Alias::new("value"))
        .from(Alias::new("revisions"))
        .and_where(Expr::col(Alias::new("name")).eq(REVISION))
        .to_owned();
    let row = db.query_one_raw(backend.build(&select)).await?;
    Ok(match row {
        Some(row) => row.try_get::<i64>("", "value")?,
        None => 0,
    })
}

/// The resource policy of each of `keypairs` that has one, by keypair: two statements.
pub async fn policies_of(
    db: &impl ConnectionTrait,
    keypairs: impl IntoIterator<Item = Uuid>,
) -> DomainResult<std::collections::HashMap<Uuid, entity::keypair_resource_policy::Model>> {
    use entity::keypair_resource_policy as policy;
    let wanted: std::collections::BTreeSet<Uuid> = keypairs.into_iter().collect();
    if wanted.is_empty() {
        return Ok(Default::default());
    }
    let pairs =
        keypair::Entity::find().filter(keypair::Column::Id.is_in(crate::domain::padded(wanted))).all(db).await?;
    let names: std::collections::BTreeSet<String> = pairs.iter().map(|k| k.resource_policy.clone()).collect();
    let policies: std::collections::HashMap<String, policy::Model> = policy::Entity::find()
        .filter(policy::Column::Name.is_in(crate::domain::padded(names)))
        .all(db)
        .await?
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
    Ok(pairs.into_iter().filter_map(|k| Some((k.id, policies.get(&k.resource_policy)?.clone()))).collect())
}

/// Revokes the token of the keypair with `access_key`: it authenticates no more, and the
/// connections it opened are closed within seconds on every server
/// ([`crate::domain::directory::credentials`]). Returns whether it was active until now.
pub async fn revoke_token(db: &sea_orm::DatabaseConnection, access_key: &str) -> DomainResult<bool> {
    let txn = crate::domain::begin_write(db).await?;
    let kp = keypair::Entity::find()
        .filter(keypair::Column::AccessKey.eq(access_key))
        .one(&txn)
        .await?
        .ok_or(DomainError::NotFound("token"))?;
    if !kp.is_active {
        return Ok(false);
    }
    keypair::ActiveModel { id: Set(kp.id), is_active: Set(false), ..Default::default() }.update(&txn).await?;
    changed(&txn).await?;
    txn.commit().await?;
    Ok(true)
}

/// Creates a keypair for the user with `email`; returns its token (shown once) and its
/// access key (the public name that lists and revokes it).
pub async fn create_token(
    db: &impl ConnectionTrait,
    email: &str,
    policy: Option<&str>,
) -> DomainResult<(String, String)> {
    let u = user::Entity::find()
        .filter(user::Column::Email.eq(email))
        .one(db)
        .await?
        .ok_or(DomainError::NotFound("user"))?;
    let policy = match policy {
        Some(p) => p.to_owned(),
        None => {
            use sea_orm::QueryOrder;
            keypair::Entity::find()
                .filter(keypair::Column::UserId.eq(u.id))
                .order_by_desc(keypair::Column::CreatedAt)
                .one(db)
                .await?
                .map_or_else(|| "default".to_owned(), |kp| kp.resource_policy)
        }
    };
    if entity::keypair_resource_policy::Entity::find_by_id(policy.clone()).one(db).await?.is_none() {
        return Err(DomainError::bad_input(
            "UNKNOWN_POLICY",
            Some("policy".to_owned()),
            format!("no keypair resource policy named `{policy}`"),
        ));
    }
    let token = generate_token();
    let access_key = generate_access_key();
    keypair::ActiveModel {
        id: Set(Uuid::new_v4()),
        user_id: Set(u.id),
        access_key: Set(access_key.clone()),
        secret_hash: Set(hash_token(&token)),
        resource_policy: Set(policy),
        is_active: Set(true),
        created_at: Set(clock::now()),
    }
    .insert(db)
    .await?;
    Ok((token, access_key))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashes_stable() {
        let (a, b) = (generate_token(), generate_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 43);
        assert_eq!(hash_token("demo-alice"), "c3fe0b469a6d4f19a25fbec114762d2186aa2c22888f52c5550a77fc104bcff3");
        assert_eq!(hash_token("x").len(), 64);
    }

    pub(crate) fn viewer(role: Role, user: u128, domain: u128) -> Viewer {
        Viewer {
            user_id: Uuid::from_u128(user),
            email: "someone@example.com".into(),
            full_name: String::new(),
            role,
            domain_id: Uuid::from_u128(domain),
            keypair_id: Uuid::from_u128(user + 1000),
            resource_policy: "default".into(),
        }
    }

    #[test]
    fn who_administers_which_domain() {
        let (own, other) = (Uuid::from_u128(10), Uuid::from_u128(20));
        let cases = [
            (Role::User, own, false),
            (Role::User, other, false),
            (Role::Admin, own, true),
            (Role::Admin, other, false),
            (Role::Superadmin, own, true),
            (Role::Superadmin, other, true),
        ];
        for (role, domain, expected) in cases {
            assert_eq!(viewer(role, 1, 10).administers_domain(domain), expected, "{role} of {domain}");
        }
    }
}
