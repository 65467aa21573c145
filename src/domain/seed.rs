//! The demo data of DESIGN §6: two domains, three projects, five users with their tokens,
//! the `default` keypair policy, two resource groups with agents, and three images.
//! Seeded only into an empty database, in one transaction, with stable ids.

use sea_orm::{
    ActiveModelTrait, ConnectionTrait, EntityTrait, PaginatorTrait, Set, TransactionSession, TransactionTrait,
};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{
    agent, domain, image, keypair, keypair_resource_policy, project, project_member, resource_group,
    resource_group_project, user,
};

use super::auth::hash_token;
use super::ids::stable_id;
use super::model::{Role, SchedulerStrategy, SessionType};
use super::{DomainResult, clock};

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// A demo user and the token that authenticates it.
pub struct DemoUser {
    pub email: &'static str,
    pub token: &'static str,
    pub role: Role,
    pub domain: &'static str,
    /// Projects as `domain/name`.
    pub projects: &'static [&'static str],
}

pub const DEMO_USERS: &[DemoUser] = &[
    DemoUser {
        email: "alice@example.com",
        token: "demo-alice",
        role: Role::User,
        domain: "default",
        projects: &["default/default", "default/research"],
    },
    DemoUser {
        email: "bob@example.com",
        token: "demo-bob",
        role: Role::User,
        domain: "default",
        projects: &["default/default", "default/research"],
    },
    DemoUser {
        email: "admin@example.com",
        token: "demo-admin",
        role: Role::Admin,
        domain: "default",
        projects: &["default/default", "default/research"],
    },
    DemoUser {
        email: "root@example.com",
        token: "demo-root",
        role: Role::Superadmin,
        domain: "default",
        projects: &[],
    },
    DemoUser {
        email: "carol@other.example",
        token: "demo-carol",
        role: Role::User,
        domain: "other",
        projects: &["other/other"],
    },
];

/// The stable id of the demo project `domain/name`.
pub fn demo_project_id(domain_and_name: &str) -> Uuid {
    stable_id("project", domain_and_name)
}

/// The stable id of a demo user.
pub fn demo_user_id(email: &str) -> Uuid {
    stable_id("user", email)
}

/// Seeds the demo data when the database has no domain yet. Returns whether it seeded.
pub async fn seed_demo<C: ConnectionTrait + TransactionTrait>(db: &C) -> DomainResult<bool> {
    let txn = db.begin().await?;
    if domain::Entity::find().count(&txn).await? > 0 {
        return Ok(false);
    }
    let now = clock::now();

    for (name, limit) in [("default", json!({"cpu": 48})), ("other", json!({}))] {
        domain::ActiveModel {
            id: Set(stable_id("domain", name)),
            name: Set(name.to_owned()),
            total_resource_slots: Set(limit),
            created_at: Set(now),
        }
        .insert(&txn)
        .await?;
    }
    for (dom, name, limit) in [
        ("default", "default", json!({})),
        ("default", "research", json!({"cuda.device": 2})),
        ("other", "other", json!({})),
    ] {
        project::ActiveModel {
            id: Set(demo_project_id(&format!("{dom}/{name}"))),
            domain_id: Set(stable_id("domain", dom)),
            name: Set(name.to_owned()),
            total_resource_slots: Set(limit),
            created_at: Set(now),
        }
        .insert(&txn)
        .await?;
    }

    keypair_resource_policy::ActiveModel {
        name: Set("default".to_owned()),
        total_resource_slots: Set(json!({"cpu": 16, "mem": 64 * GIB, "cuda.device": 4})),
        max_concurrent_sessions: Set(10),
        max_pending_sessions: Set(20),
        max_session_lifetime_seconds: Set(None),
        created_at: Set(now),
    }
    .insert(&txn)
    .await?;

    for u in DEMO_USERS {
        let user_id = demo_user_id(u.email);
        let local = u.email.split('@').next().unwrap_or(u.email);
        user::ActiveModel {
            id: Set(user_id),
            domain_id: Set(stable_id("domain", u.domain)),
            email: Set(u.email.to_owned()),
            full_name: Set(capitalize(local)),
            role: Set(u.role.as_str().to_owned()),
            created_at: Set(now),
        }
        .insert(&txn)
        .await?;
        for p in u.projects {
            project_member::ActiveModel {
                project_id: Set(demo_project_id(p)),
                user_id: Set(user_id),
                created_at: Set(now),
            }
            .insert(&txn)
            .await?;
        }
        keypair::ActiveModel {
            id: Set(stable_id("keypair", u.email)),
            user_id: Set(user_id),
            access_key: Set(format!("AKDEMO{}", local.to_uppercase())),
            secret_hash: Set(hash_token(u.token)),
            resource_policy: Set("default".to_owned()),
            is_active: Set(true),
            created_at: Set(now),
        }
        .insert(&txn)
        .await?;
    }

    let all_types = Value::from(SessionType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>());
    for (group, projects, description) in [
        ("default", &["default/default", "default/research"][..], "Shared pool of the default domain"),
        ("other", &["other/other"][..], "Pool of the other domain"),
    ] {
        resource_group::ActiveModel {
            name: Set(group.to_owned()),
            description: Set(description.to_owned()),
            scheduler: Set(SchedulerStrategy::Fifo.as_str().to_owned()),
            pending_timeout_seconds: Set(None),
            allowed_session_types: Set(all_types.clone()),
            created_at: Set(now),
        }
        .insert(&txn)
        .await?;
        for (position, p) in projects.iter().enumerate() {
            resource_group_project::ActiveModel {
                resource_group: Set(group.to_owned()),
                project_id: Set(demo_project_id(p)),
                position: Set(i32::try_from(position).unwrap_or(i32::MAX)),
            }
            .insert(&txn)
            .await?;
        }
    }
    for (id, group, slots) in [
        ("a1", "default", json!({"cpu": 8, "mem": 32 * GIB, "cuda.device": 2})),
        ("a2", "default", json!({"cpu": 8, "mem": 32 * GIB, "cuda.device": 2})),
        ("a3", "default", json!({"cpu": 16, "mem": 64 * GIB})),
        ("o1", "other", json!({"cpu": 8, "mem": 32 * GIB})),
    ] {
        agent::ActiveModel {
            id: Set(id.to_owned()),
            resource_group: Set(group.to_owned()),
            available_slots: Set(slots),
            status: Set(super::catalog::ALIVE.to_owned()),
            schedulable: Set(true),
            pulled_images: Set(json!([])),
            created_at: Set(now),
            last_heartbeat_at: Set(now),
        }
        .insert(&txn)
        .await?;
    }
    for (name, types, minimum, apps) in [
        (
            "python:3.12",
            &["INTERACTIVE", "BATCH"][..],
            json!({"cpu": 0.5, "mem": 512 * MIB}),
            &["jupyter", "terminal"][..],
        ),
        (
            "pytorch:2.5-cuda12",
            &["INTERACTIVE", "BATCH", "INFERENCE"][..],
            json!({"cpu": 1, "mem": 2 * GIB}),
            &["jupyter", "terminal", "tensorboard"][..],
        ),
        ("filebrowser:latest", &["UPLOAD"][..], json!({"cpu": 0.25, "mem": 256 * MIB}), &["filebrowser"][..]),
    ] {
        image::ActiveModel {
            name: Set(name.to_owned()),
            supported_types: Set(Value::from(types.to_vec())),
            minimum_slots: Set(minimum),
            apps: Set(Value::from(apps.to_vec())),
            created_at: Set(now),
        }
        .insert(&txn)
        .await?;
    }
    txn.commit().await?;
    Ok(true)
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
