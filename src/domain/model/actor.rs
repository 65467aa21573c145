//! Who made a change to a session: a user (launch, terminate, modify, extend, exempt), or
//! the system by one of its rules (the scheduler, an engine, a timeout, an idle check).
//! Each status change and each line of a session's history keeps its actor.

use uuid::Uuid;

/// The rules by which the system changes sessions, as their actors name them.
pub mod rules {
    /// Places pending sessions on agents.
    pub const SCHEDULER: &str = "scheduler";
    /// Cancels a session that waited past its resource group's pending timeout.
    pub const PENDING_TIMEOUT: &str = "pending timeout";
    /// Reclaims a session at the end of its lifetime.
    pub const LIFETIME: &str = "lifetime";
    /// Reclaims an interactive session that showed no activity for its idle timeout.
    pub const IDLE_CHECK: &str = "idle check";
    /// Stops a batch session at its timeout.
    pub const BATCH_TIMEOUT: &str = "batch timeout";
    /// Cancels a session whose dependency ended without success.
    pub const DEPENDENCY: &str = "dependency";
    /// `sessiond apply` run without `--as`: a policy's new lifetime or idle checks.
    pub const APPLY: &str = "apply";
    /// Sessions made up by the data generator (benchmarks, demos at scale).
    pub const GENERATED: &str = "generated";
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    User(Uuid),
    /// The rule that fired ([`rules`], or an engine's name).
    System(String),
}

impl Actor {
    pub fn system(rule: &str) -> Self {
        Self::System(rule.to_owned())
    }

    /// The user, stored as `actor_user_id`.
    pub fn user_id(&self) -> Option<Uuid> {
        match self {
            Self::User(id) => Some(*id),
            Self::System(_) => None,
        }
    }

    /// The rule, stored as `actor_rule`.
    pub fn rule(&self) -> Option<String> {
        match self {
            Self::User(_) => None,
            Self::System(rule) => Some(rule.clone()),
        }
    }
}
