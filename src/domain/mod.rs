//! The rules of sessiond, in the page's language. Nothing here knows a transport (its
//! names, paths, headers or cursors): functions take a database connection or transaction
//! and return [`DomainError`]s, which each transport maps to its public codes in one place.
//!
//! One folder per subsystem (docs/ARCHITECTURE.md maps them): [`model`] the vocabulary,
//! [`store`] how rows are read and written, [`directory`] who and what the platform has,
//! [`sessions`] reading sessions, [`lifecycle`] the one writer of their changes, [`launch`],
//! [`scheduling`], [`runtime`] the engines, [`live`] the live feeds, [`reclaim`] expiry and
//! idleness, [`apps`] and [`storage`].

pub mod apps;
pub mod directory;
pub mod error;
pub mod launch;
pub mod lifecycle;
pub mod live;
pub mod model;
pub mod reclaim;
pub mod runtime;
pub mod scheduling;
pub mod sessions;
pub mod storage;
pub mod store;

pub use error::{DomainError, DomainResult, InputProblem};

/// The values of an `IN` list, padded to the next power of two by repeating the last one,
/// so that lists of every length share a handful of statement shapes (1, 2, 4, 8, …).
/// Each pooled connection keeps its prepared statements: without the padding every length
/// is a statement of its own, prepared again and held in every connection's cache.
pub(crate) fn padded<T: Clone>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut values: Vec<T> = values.into_iter().collect();
    if let Some(last) = values.last().cloned() {
        values.resize(values.len().next_power_of_two(), last);
    }
    values
}

/// Begins a transaction that will write. On SQLite it takes the write lock at once
/// (`BEGIN IMMEDIATE`), waiting up to the busy timeout, instead of failing when a read
/// turns into a write after another writer committed. PostgreSQL ignores the mode.
pub async fn begin_write(db: &sea_orm::DatabaseConnection) -> Result<sea_orm::DatabaseTransaction, sea_orm::DbErr> {
    use sea_orm::{SqliteTransactionMode, TransactionOptions, TransactionTrait};
    db.begin_with_options(TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..Default::default()
    })
    .await
}

/// What unit tests of the domain share.
#[cfg(test)]
pub(crate) mod testing {
    use chrono::Utc;
    use serde_json::json;
    use uuid::Uuid;

    use entity::session;

    /// A RUNNING batch session row, nil ids, nothing requested: a test sets what it looks at.
    pub(crate) fn session() -> session::Model {
        let now = Utc::now();
        session::Model {
            id: Uuid::nil(),
            name: "s".into(),
            session_type: "BATCH".into(),
            status: "RUNNING".into(),
            status_info: None,
            result: "UNDEFINED".into(),
            exit_code: None,
            owner_id: Uuid::nil(),
            keypair_id: Uuid::nil(),
            project_id: Uuid::nil(),
            domain_id: Uuid::nil(),
            resource_group: "g".into(),
            image: "i".into(),
            requested_slots: json!({}),
            occupied_slots: json!({}),
            cluster_size: 1,
            environment: json!([]),
            startup_command: None,
            batch_timeout_seconds: None,
            priority: 0,
            agent_id: None,
            launch_group_id: None,
            pending_reasons: json!([]),
            created_at: now,
            scheduled_at: None,
            started_at: None,
            terminated_at: None,
            status_changed_at: now,
            queue_position: None,
            lifetime_seconds: None,
            extended_seconds: 0,
            extensions: 0,
            expiry_warned_for: None,
            utilization: json!({}),
            utilization_samples: 0,
            utilization_sampled_at: None,
            idle: None,
            active_at: None,
            typed_at: None,
            exempt_idle: false,
            cpu_used: 0.0,
            mem_used: 0.0,
            status_actor_user_id: None,
            status_actor_rule: None,
            launched_from_session_id: None,
            launched_from_name: None,
            launched_from_template_id: None,
            starts_at: None,
            callback_url: None,
            callback_on_running: false,
            pending_digest: crate::domain::sessions::occupancy::reasons_digest(&[]),
            pull_progress: None,
            image_digest: None,
            mounts: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn padding_repeats_the_last_value_up_to_a_power_of_two() {
        assert_eq!(super::padded(Vec::<u8>::new()), Vec::<u8>::new());
        assert_eq!(super::padded([7]), [7]);
        assert_eq!(super::padded([1, 2, 3]), [1, 2, 3, 3]);
        assert_eq!(super::padded([1, 2, 3, 4]), [1, 2, 3, 4]);
        assert_eq!(super::padded(1..=5).len(), 8);
    }
}
