//! The demo's data, declared in the bundled `demo.toml`: two domains, three
//! projects, five users with their tokens, the `default` keypair policy, two resource
//! groups with agents, and three images. Seeded only into an empty database, with stable
//! ids (the names' [`stable_id`]s), through `apply`.

use sea_orm::{DatabaseConnection, EntityTrait, PaginatorTrait};
use uuid::Uuid;

use entity::domain;

use crate::domain::model::ids::stable_id;
use crate::domain::{DomainError, DomainResult, directory::apply};

/// A demo user and the token that authenticates it. Everything else about the demo's users
/// (roles, domains, projects) is in `demo.toml`; these are the demo's public tokens, listed
/// at start-up.
pub struct DemoUser {
    pub email: &'static str,
    pub token: &'static str,
}

pub const DEMO_USERS: &[DemoUser] = &[
    DemoUser { email: "alice@example.com", token: "demo-alice" },
    DemoUser { email: "bob@example.com", token: "demo-bob" },
    DemoUser { email: "admin@example.com", token: "demo-admin" },
    DemoUser { email: "root@example.com", token: "demo-root" },
    DemoUser { email: "carol@other.example", token: "demo-carol" },
];

/// The stable id of the demo project `domain/name`.
pub fn demo_project_id(domain_and_name: &str) -> Uuid {
    stable_id("project", domain_and_name)
}

/// The stable id of a demo user.
pub fn demo_user_id(email: &str) -> Uuid {
    stable_id("user", email)
}

/// The stable id of a demo user's keypair.
pub fn demo_keypair_id(email: &str) -> Uuid {
    let local = email.split('@').next().unwrap_or(email);
    stable_id("keypair", &format!("AKDEMO{}", local.to_uppercase()))
}

/// Seeds the demo data when the database has no domain yet: applies the bundled
/// `demo.toml`, as `sessiond apply` would. Returns whether it seeded.
pub async fn seed_demo(db: &DatabaseConnection) -> DomainResult<bool> {
    if domain::Entity::find().count(db).await? > 0 {
        return Ok(false);
    }
    let declared = apply::demo(db).await.map_err(|e| DomainError::invariant(format!("demo.toml: {e}")))?;
    match apply::apply(db, &declared, apply::Options::default()).await {
        Ok(_) => Ok(true),
        Err(apply::ApplyError::Failed(e)) => Err(e),
        Err(e @ apply::ApplyError::Refused(_)) => Err(DomainError::invariant(e.to_string())),
    }
}
