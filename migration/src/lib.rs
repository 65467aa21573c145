//! The sessiond schema, as sea-orm migrations that run identically on SQLite and PostgreSQL.

pub use sea_orm_migration::prelude::*;

mod m20261129_000001_init;
mod m20261129_000002_queue_position;
mod m20261130_000003_signing_keys;
mod m20261130_000004_image_environment;
mod m20261201_000005_revisions;
mod m20261201_000006_engines;
mod m20261202_000007_expiry;
mod m20261202_000008_utilization;
mod m20261202_000009_idle;
mod m20261202_000010_utilization_history;
mod m20261202_000011_max_priority;
mod m20261202_000012_actors;
mod m20261202_000013_launched_from;
mod m20261202_000014_session_templates;
mod m20261202_000015_starts_at;
mod m20261202_000016_dependencies;
mod m20261202_000017_callbacks;
mod m20261202_000018_pending_digest;
mod m20261204_000019_session_tallies;
mod m20261205_000020_scheduler_passes;
mod m20261205_000021_registries;
mod m20261205_000022_session_pull;
mod m20261206_000023_app_grants;
mod m20261206_000024_storages;
mod m20261206_000025_folders;
mod m20261206_000026_session_mounts;

/// Every migration of sessiond, in order.
pub struct Migrator;

#[sea_orm_migration::async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261129_000001_init::Migration),
            Box::new(m20261129_000002_queue_position::Migration),
            Box::new(m20261130_000003_signing_keys::Migration),
            Box::new(m20261130_000004_image_environment::Migration),
            Box::new(m20261201_000005_revisions::Migration),
            Box::new(m20261201_000006_engines::Migration),
            Box::new(m20261202_000007_expiry::Migration),
            Box::new(m20261202_000008_utilization::Migration),
            Box::new(m20261202_000009_idle::Migration),
            Box::new(m20261202_000010_utilization_history::Migration),
            Box::new(m20261202_000011_max_priority::Migration),
            Box::new(m20261202_000012_actors::Migration),
            Box::new(m20261202_000013_launched_from::Migration),
            Box::new(m20261202_000014_session_templates::Migration),
            Box::new(m20261202_000015_starts_at::Migration),
            Box::new(m20261202_000016_dependencies::Migration),
            Box::new(m20261202_000017_callbacks::Migration),
            Box::new(m20261202_000018_pending_digest::Migration),
            Box::new(m20261204_000019_session_tallies::Migration),
            Box::new(m20261205_000020_scheduler_passes::Migration),
            Box::new(m20261205_000021_registries::Migration),
            Box::new(m20261205_000022_session_pull::Migration),
            Box::new(m20261206_000023_app_grants::Migration),
            Box::new(m20261206_000024_storages::Migration),
            Box::new(m20261206_000025_folders::Migration),
            Box::new(m20261206_000026_session_mounts::Migration),
        ]
    }
}
