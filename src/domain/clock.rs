//! Time as the database stores it. Both databases keep microseconds, so every timestamp
//! is truncated to them before it is written: a value read back equals the value written,
//! and keyset page positions compare equal on SQLite and PostgreSQL.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

pub fn now() -> DateTime<Utc> {
    truncate(Utc::now())
}

pub fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::microseconds(1)).unwrap_or(t)
}
