//! What a live session really uses, as its engine's looks sample it: per slot (cpu in cores
//! busy, mem in bytes resident, accelerators where the engine can read them) the latest
//! value, the average and the maximum since it started. Stored on the session (kept after it
//! ends, for the record) and written for every sampled session of a look in one statement.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::sea_query::{CaseStatement, Expr};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{session, utilization_point};

pub mod feed;

use crate::domain::model::slots;
use crate::domain::{DomainResult, padded};

/// A look samples a running session at most this often.
pub const SAMPLE_EVERY: TimeDelta = TimeDelta::seconds(2);

/// The history keeps one point per this much time (the sample that opens it)…
pub const POINT_EVERY: TimeDelta = TimeDelta::minutes(1);
/// …over this long: at most 61 points per session, whatever its length.
pub const HISTORY_KEPT: TimeDelta = TimeDelta::hours(1);

/// One sample of a session: per slot, the amount in use.
pub type Sample = BTreeMap<String, f64>;

/// What a session uses of one slot.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotUse {
    pub slot: String,
    /// At the latest sample.
    pub current: f64,
    /// Over every sample since it started.
    pub average: f64,
    pub maximum: f64,
}

/// The session's use per slot: cpu, then mem, then the others by name. Empty until its
/// engine sampled it.
pub fn of(s: &session::Model) -> Vec<SlotUse> {
    let mut uses: Vec<SlotUse> = s
        .utilization
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(slot, v)| {
            let [current, average, maximum] = [0, 1, 2].map(|i| v.get(i).and_then(Value::as_f64));
            Some(SlotUse { slot: slot.clone(), current: current?, average: average?, maximum: maximum? })
        })
        .collect();
    uses.sort_by(|a, b| shown_order(&a.slot, &b.slot));
    uses
}

/// The order slots are shown in: cpu, then mem, then the others by name.
fn shown_order(a: &str, b: &str) -> std::cmp::Ordering {
    let rank = |slot: &str| match slot {
        slots::CPU => 0,
        slots::MEM => 1,
        _ => 2,
    };
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

/// Whether a look at `now` takes a new sample of `s`: the first look in each period of
/// [`SAMPLE_EVERY`] on the clock samples every running session it has not sampled in that
/// period. So the sessions of a look are sampled together, and their samples written in
/// one transaction every 2 s, rather than each 2 s after its own last sample (a write at
/// nearly every look).
pub fn due(s: &session::Model, now: DateTime<Utc>) -> bool {
    let period = |t: DateTime<Utc>| t.timestamp_millis().div_euclid(SAMPLE_EVERY.num_milliseconds());
    s.utilization_sampled_at.is_none_or(|at| period(at) != period(now))
}

/// The session's stored use with `sample` added: the new value of its `utilization`, and
/// the count of samples. A slot the sample lacks keeps what it had.
pub fn folded(s: &session::Model, sample: &Sample) -> (Value, i32) {
    let n = f64::from(s.utilization_samples.max(0));
    let mut stored = s.utilization.as_object().cloned().unwrap_or_default();
    for (slot, &x) in sample {
        let before = stored.get(slot).and_then(|v| Some((v.get(1)?.as_f64()?, v.get(2)?.as_f64()?)));
        let (average, maximum) = match before {
            Some((a, m)) if n > 0.0 => ((a * n + x) / (n + 1.0), m.max(x)),
            _ => (x, x),
        };
        stored.insert(slot.clone(), json!([x, average, maximum]));
    }
    (Value::Object(stored), s.utilization_samples.saturating_add(1))
}

/// Whether a sample of `s` at `now` opens a new point of its history: the first sample,
/// or the first of a minute.
fn opens_point(s: &session::Model, now: DateTime<Utc>) -> bool {
    let minute = |t: DateTime<Utc>| t.timestamp().div_euclid(POINT_EVERY.num_seconds());
    s.utilization_sampled_at.is_none_or(|at| minute(at) != minute(now))
}

/// One session's sample of a look, and whether it shows activity to the session's idle
/// checks (`crate::domain::reclaim::idle::shows_activity`).
pub struct Sampled<'a> {
    pub session: &'a session::Model,
    pub sample: Sample,
    pub active: bool,
}

/// Stores the samples of one look, each folded into its session's use ([`folded`]), and
/// notes the sessions whose sample shows activity (`active_at`, never moved back): one
/// statement, however many sessions. A sample that opens a minute
/// is a point of its session's history too, and the points past [`HISTORY_KEPT`] of those
/// sessions go: two statements more, however many sessions.
pub async fn record(db: &impl ConnectionTrait, samples: &[Sampled<'_>], now: DateTime<Utc>) -> DomainResult<()> {
    if samples.is_empty() {
        return Ok(());
    }
    let mut uses: Option<CaseStatement> = None;
    let mut counts: Option<CaseStatement> = None;
    let mut active: Option<CaseStatement> = None;
    let mut cpu: Option<CaseStatement> = None;
    let mut mem: Option<CaseStatement> = None;
    let mut ids: Vec<Uuid> = Vec::with_capacity(samples.len());
    let mut points = Vec::new();
    for Sampled { session: s, sample, active: shows_activity } in samples {
        if opens_point(s, now) {
            points.push(utilization_point::ActiveModel {
                session_id: Set(s.id),
                at: Set(now),
                utilization: Set(json!(sample)),
                ..Default::default()
            });
        }
        let (value, n) = folded(s, sample);
        let this = session::Column::Id.eq(s.id);
        if *shows_activity {
            let later = Condition::all()
                .add(this.clone())
                .add(Condition::any().add(session::Column::ActiveAt.is_null()).add(session::Column::ActiveAt.lt(now)));
            active = Some(match active {
                None => Expr::case(later, Expr::value(now)),
                Some(c) => c.case(later, Expr::value(now)),
            });
        }
        uses = Some(match uses {
            None => Expr::case(this.clone(), Expr::value(value)),
            Some(c) => c.case(this.clone(), Expr::value(value)),
        });
        // The latest use of cpu and mem, as numbers a list orders by.
        for (slot, case) in [(slots::CPU, &mut cpu), (slots::MEM, &mut mem)] {
            if let Some(&x) = sample.get(slot) {
                *case = Some(match case.take() {
                    None => Expr::case(this.clone(), Expr::value(x)),
                    Some(c) => c.case(this.clone(), Expr::value(x)),
                });
            }
        }
        counts = Some(match counts {
            None => Expr::case(this, Expr::value(n)),
            Some(c) => c.case(this, Expr::value(n)),
        });
        ids.push(s.id);
    }
    let (Some(uses), Some(counts)) = (uses, counts) else { return Ok(()) };
    let mut update = session::Entity::update_many();
    if let Some(active) = active {
        update =
            update.col_expr(session::Column::ActiveAt, active.finally(Expr::col(session::Column::ActiveAt)).into());
    }
    for (column, case) in [(session::Column::CpuUsed, cpu), (session::Column::MemUsed, mem)] {
        if let Some(case) = case {
            update = update.col_expr(column, case.finally(Expr::col(column)).into());
        }
    }
    update
        .col_expr(session::Column::Utilization, uses.finally(Expr::col(session::Column::Utilization)).into())
        .col_expr(
            session::Column::UtilizationSamples,
            counts.finally(Expr::col(session::Column::UtilizationSamples)).into(),
        )
        .col_expr(session::Column::UtilizationSampledAt, Expr::value(now))
        .filter(session::Column::Id.is_in(padded(ids)))
        .exec(db)
        .await?;
    if !points.is_empty() {
        let pointed: Vec<Uuid> = points.iter().filter_map(|p| p.session_id.try_as_ref().copied()).collect();
        utilization_point::Entity::insert_many(points).exec_without_returning(db).await?;
        utilization_point::Entity::delete_many()
            .filter(utilization_point::Column::SessionId.is_in(padded(pointed)))
            .filter(utilization_point::Column::At.lt(now - HISTORY_KEPT))
            .exec(db)
            .await?;
    }
    Ok(())
}

/// One point of a session's history: when, and per slot what it used then (cpu, mem, then
/// the others by name).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub at: DateTime<Utc>,
    pub uses: Vec<(String, f64)>,
}

/// The longest window of history served: all that is kept.
pub const MOST_WINDOW_SECONDS: i64 = 3600;

/// The history of session `session_id` (visibility is checked by whoever found it) over
/// the `window_seconds` (60 to [`MOST_WINDOW_SECONDS`]) before its latest sample, oldest
/// first: a point a minute.
pub async fn history(db: &impl ConnectionTrait, s: &session::Model, window_seconds: i64) -> DomainResult<Vec<Point>> {
    if !(60..=MOST_WINDOW_SECONDS).contains(&window_seconds) {
        return Err(crate::domain::DomainError::bad_input(
            "OUT_OF_RANGE",
            Some("window".to_owned()),
            format!("`window` is 60 to {MOST_WINDOW_SECONDS} seconds"),
        ));
    }
    let Some(latest) = s.utilization_sampled_at else { return Ok(Vec::new()) };
    let rows = utilization_point::Entity::find()
        .filter(utilization_point::Column::SessionId.eq(s.id))
        .filter(utilization_point::Column::At.gt(latest - TimeDelta::seconds(window_seconds)))
        .order_by_asc(utilization_point::Column::At)
        .limit(u64::try_from(MOST_WINDOW_SECONDS / POINT_EVERY.num_seconds() + 1).unwrap_or(61))
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|p| {
            let mut uses: Vec<(String, f64)> = p
                .utilization
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(slot, v)| Some((slot.clone(), v.as_f64()?)))
                .collect();
            uses.sort_by(|a, b| shown_order(&a.0, &b.0));
            Point { at: p.at, uses }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(utilization: Value, utilization_samples: i32) -> session::Model {
        session::Model { utilization, utilization_samples, ..crate::domain::testing::session() }
    }

    #[test]
    fn the_sessions_of_a_look_are_due_together_once_a_period() {
        let t = |ms: i64| DateTime::from_timestamp_millis(ms).expect("a time");
        let sampled =
            |ms: i64| session::Model { utilization_sampled_at: Some(t(ms)), ..crate::domain::testing::session() };
        assert!(due(&crate::domain::testing::session(), t(1_000)), "never sampled");
        // Sampled at 10.1 s and 11.9 s: both due at the first look from 12 s on, not before.
        for at in [10_100, 11_900] {
            assert!(!due(&sampled(at), t(11_950)));
            assert!(due(&sampled(at), t(12_000)));
        }
    }

    #[test]
    fn samples_fold_into_current_average_and_maximum() {
        let mut s = session(json!({}), 0);
        for x in [1.0, 3.0, 2.0] {
            let (value, n) = folded(&s, &Sample::from([("cpu".to_owned(), x), ("mem".to_owned(), 10.0 * x)]));
            s.utilization = value;
            s.utilization_samples = n;
        }
        assert_eq!(s.utilization_samples, 3);
        let uses = of(&s);
        assert_eq!(uses.iter().map(|u| u.slot.as_str()).collect::<Vec<_>>(), ["cpu", "mem"]);
        assert_eq!((uses[0].current, uses[0].average, uses[0].maximum), (2.0, 2.0, 3.0));
        assert_eq!((uses[1].current, uses[1].average, uses[1].maximum), (20.0, 20.0, 30.0));
    }

    #[test]
    fn a_slot_first_seen_later_starts_from_its_first_sample() {
        let s = session(json!({"cpu": [1.0, 1.0, 1.0]}), 4);
        let (value, n) = folded(&s, &Sample::from([("cuda.device".to_owned(), 0.5)]));
        assert_eq!(n, 5);
        assert_eq!(value, json!({"cpu": [1.0, 1.0, 1.0], "cuda.device": [0.5, 0.5, 0.5]}));
    }
}
