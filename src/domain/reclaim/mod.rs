//! Reclaiming live sessions: when each will end and why ([`expiry`]: lifetimes, batch
//! timeouts, extensions and warnings), and interactive sessions that show no activity
//! ([`idle`]).

pub mod expiry;
pub mod idle;
