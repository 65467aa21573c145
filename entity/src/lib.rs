//! sea-orm entities of sessiond: one module per table, no rules and no GraphQL.

pub mod agent;
pub mod domain;
pub mod engine;
pub mod engine_job;
pub mod idempotency_key;
pub mod image;
pub mod keypair;
pub mod keypair_resource_policy;
pub mod launch_group;
pub mod project;
pub mod project_member;
pub mod registry;
pub mod resource_group;
pub mod resource_group_project;
pub mod scheduling_history;
pub mod session;
pub mod session_callback;
pub mod session_callback_attempt;
pub mod session_dependency;
pub mod session_log;
pub mod session_status_transition;
pub mod session_template;
pub mod slot_type;
pub mod user;
pub mod user_setting;
pub mod utilization_point;
