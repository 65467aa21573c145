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

/// The years an instant given as input may fall in: what both databases store and compare
/// alike (SQLite compares its text, so a fifth digit or a sign would sort wrongly), and what
/// RFC 3339 writes. Every time a request gives is checked against it, for lists, counts,
/// exports, their links and launches alike.
pub const YEARS: std::ops::RangeInclusive<i32> = 1..=9999;

/// The problem with `t` as the input `field`, if its year is outside [`YEARS`].
pub fn out_of_range(field: &str, t: DateTime<Utc>) -> Option<crate::domain::InputProblem> {
    use chrono::Datelike;
    (!YEARS.contains(&t.year())).then(|| {
        crate::domain::InputProblem::new(
            "OUT_OF_RANGE",
            Some(field.to_owned()),
            format!("a time is between the years {} and {}", YEARS.start(), YEARS.end()),
        )
    })
}
