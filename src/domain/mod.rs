//! The rules of sessiond. Nothing here knows GraphQL or HTTP: functions take a database
//! connection or transaction and return [`DomainError`]s, which exactly one place in the
//! GraphQL layer turns into public error codes.

pub mod auth;
pub mod clock;
pub mod error;
pub mod events;
pub mod generate;
pub mod ids;
pub mod launch;
pub mod lifecycle;
pub mod model;
pub mod occupancy;
pub mod seed;
pub mod sessions;
pub mod settings;
pub mod slots;
pub mod status;
pub mod visibility;

pub use error::{DomainError, DomainResult, InputProblem};
