//! The reconciler core every engine shares. An engine starts, stops and looks; each look
//! gives, per session, a [`Plan`]: the statuses the session went through since the last
//! look (the last may end it, with result and exit code), the log lines of those steps, its
//! new output, the node it runs on, and what it used ([`usage`]). [`write`] turns a tick's plans into guarded
//! transitions ([`lifecycle`]), log lines and scheduling history in one transaction, the
//! same way for every engine; a session that moved meanwhile (terminated by its owner,
//! driven by another replica) keeps its output and is looked at again next tick.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::NotSet, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};
use serde_json::Value;
use uuid::Uuid;

use entity::{agent, session, session_log};

use crate::domain::lifecycle::history::{self, Entry, SchedulingResult};
use crate::domain::lifecycle::{self, Applied, Change};
use crate::domain::live::events::EventBus;
use crate::domain::live::usage::{self, Sample, Sampled};
use crate::domain::model::actor::Actor;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::reclaim::expiry;
use crate::domain::reclaim::idle;
use crate::domain::{DomainResult, model::clock};

/// A status to enter, with its reason and, when it ends the session, result and exit code.
pub type Step = (SessionStatus, Option<String>, Option<(SessionResult, Option<i32>)>);

/// What one look found for one session, and what to do once it is written (`after`: the
/// engine's own, e.g. the local runtime's copy offset).
pub struct Plan<A = ()> {
    pub session: session::Model,
    /// Statuses to go through, in order; the last may end the session.
    pub steps: Vec<Step>,
    /// The log lines of the steps (written only if the steps are), the session's output
    /// (written in any case), and the line of its end.
    pub step_lines: Vec<String>,
    pub output: Vec<String>,
    pub end_line: Option<String>,
    /// The agent its engine placed it on, when that is not the one stored.
    pub placed: Option<String>,
    /// What it used at this look, when the look sampled it ([`usage::due`]).
    pub usage: Option<Sample>,
    pub after: A,
}

impl<A: Default> Plan<A> {
    /// Status changes with their log line, nothing else.
    pub fn steps(session: session::Model, steps: Vec<Step>, line: String) -> Self {
        let end = steps.last().is_some_and(|(to, _, _)| to.is_terminal());
        let (step_lines, end_line) = if end { (Vec::new(), Some(line)) } else { (vec![line], None) };
        Self {
            session,
            steps,
            step_lines,
            output: Vec::new(),
            end_line,
            placed: None,
            usage: None,
            after: A::default(),
        }
    }

    /// Nothing but what the session used at this look.
    pub fn sampled(session: session::Model, usage: Sample) -> Self {
        Self {
            session,
            steps: Vec::new(),
            step_lines: Vec::new(),
            output: Vec::new(),
            end_line: None,
            placed: None,
            usage: Some(usage),
            after: A::default(),
        }
    }

    /// The session failed to start: ERROR with `why`, recorded as START_FAILED.
    pub fn failed_to_start(session: session::Model, why: &str) -> Self {
        Self::steps(
            session,
            vec![(SessionStatus::Error, Some(format!("failed to start: {why}")), Some((SessionResult::Failure, None)))],
            format!("error: {why}"),
        )
    }
}

/// The start-up statuses after `from` up to `to`, in order (PULLING only when it happened).
pub fn steps_between(from: SessionStatus, to: SessionStatus, pulled: bool) -> Vec<SessionStatus> {
    use SessionStatus::*;
    if from == Terminating {
        return Vec::new(); // a stopping session only ends
    }
    let order = [Scheduled, Preparing, Pulling, Prepared, Creating, Running];
    let (Some(a), Some(b)) = (order.iter().position(|s| *s == from), order.iter().position(|s| *s == to)) else {
        return Vec::new();
    };
    order[a + 1..=b.max(a)].iter().copied().filter(|s| *s != Pulling || pulled || to == Pulling).collect()
}

/// The phase of the scheduling history a step to `to` is recorded under.
pub fn history_phase(to: SessionStatus) -> &'static str {
    match to {
        SessionStatus::Preparing | SessionStatus::Pulling | SessionStatus::Prepared => "prepare",
        SessionStatus::Creating | SessionStatus::Running => "start",
        SessionStatus::Error => "error",
        _ => "terminate",
    }
}

fn log_row(session_id: Uuid, line: String, now: DateTime<Utc>) -> session_log::ActiveModel {
    session_log::ActiveModel { id: NotSet, session_id: Set(session_id), line: Set(line), created_at: Set(now) }
}

/// Who makes a step with `reason` of an `engine`'s look: the expiry that ended the session
/// (lifetime, idle check, batch timeout), else the engine itself.
fn actor(engine: &str, reason: Option<&str>) -> Actor {
    Actor::system(reason.and_then(expiry::rule_of).unwrap_or(engine))
}

/// Writes a look's plans in one transaction and publishes their transitions once committed.
/// `pulled(agent, images)`: the images an agent has now that sessions pulled `images` there
/// (stored when one went through PULLING; `None`: the engine does not keep images).
/// Returns how many sessions changed status.
pub async fn write<A>(
    db: &DatabaseConnection,
    bus: &EventBus,
    engine: &str,
    plans: &[Plan<A>],
    pulled: impl Fn(&str, &[&str]) -> Option<Value>,
) -> DomainResult<usize> {
    let now = clock::now();
    let mut changes = Vec::new();
    for p in plans {
        let mut at = p.session.clone();
        for (to, reason, result) in &p.steps {
            let mut change = Change::new(at.clone(), *to, reason.clone(), actor(engine, reason.as_deref()));
            change.result = *result;
            change.agent = p.placed.clone();
            changes.push(change);
            at.status = to.as_str().to_owned();
        }
    }
    let txn = crate::domain::begin_write(db).await?;
    let mut transitions = lifecycle::Transitions::default();
    let applied = lifecycle::apply(&txn, changes, now, &mut transitions).await?;
    let moved: HashSet<Uuid> =
        applied.iter().filter_map(|a| if let Applied::Moved(m) = a { Some(m.id) } else { None }).collect();
    let mut logs = Vec::new();
    let mut entries = Vec::new();
    let mut pulling: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for p in plans {
        let id = p.session.id;
        if moved.contains(&id) {
            logs.extend(p.output.iter().map(|line| log_row(id, line.clone(), now)));
            continue;
        }
        let lines = p.step_lines.iter().chain(&p.output).chain(&p.end_line);
        logs.extend(lines.map(|line| log_row(id, line.clone(), now)));
        if let Some((last, reason, _)) = p.steps.last() {
            let through = p.session.status == SessionStatus::Pulling.as_str()
                || p.steps.iter().any(|(s, _, _)| *s == SessionStatus::Pulling);
            if through && let Some(agent) = p.placed.as_ref().or(p.session.agent_id.as_ref()) {
                pulling.entry(agent.as_str()).or_default().push(p.session.image.as_str());
            }
            let path: Vec<&str> = p.steps.iter().map(|(s, _, _)| s.as_str()).collect();
            let failed = *last == SessionStatus::Error;
            let agent = p.placed.as_ref().or(p.session.agent_id.as_ref());
            entries.push(Entry {
                session_id: id,
                phase: history_phase(*last),
                from: SessionStatus::parse(&p.session.status),
                to: Some(*last),
                result: if failed { SchedulingResult::Failure } else { SchedulingResult::Success },
                error_code: failed.then(|| {
                    let pull = reason.as_deref().is_some_and(|r| r.starts_with(super::local::supervisor::PULL_FAILED));
                    if pull { "PULL_FAILED" } else { "START_FAILED" }.to_owned()
                }),
                message: format!(
                    "{}{}{}",
                    path.join(" → "),
                    agent.map(|a| format!(" on agent {a}")).unwrap_or_default(),
                    reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
                ),
                sub_steps: Value::Array(Vec::new()),
                repeats: true,
                actor: actor(engine, reason.as_deref()),
                pass: None,
            });
        }
    }
    for (agent_id, images) in pulling {
        if let Some(now_pulled) = pulled(agent_id, &images) {
            agent::Entity::update_many()
                .col_expr(agent::Column::PulledImages, Expr::value(now_pulled))
                .filter(agent::Column::Id.eq(agent_id))
                .exec(&txn)
                .await?;
        }
    }
    // One statement whatever the number of lines.
    crate::domain::store::rows::insert_all(&txn, logs, None).await?;
    let mut samples = Vec::new();
    for p in plans {
        if let Some(sample) = &p.usage {
            let active = idle::shows_activity(&p.session, sample)?;
            samples.push(Sampled { session: &p.session, sample: sample.clone(), active });
        }
    }
    usage::record(&txn, &samples, now).await?;
    history::record(&txn, entries, now).await?;
    lifecycle::commit(txn, transitions, bus).await
}

/// What a session's supervisor says of its image's pull (its `pull.json`).
#[derive(Clone, Debug)]
pub struct PullSeen {
    pub session: session::Model,
    pub state: crate::domain::runtime::local::files::PullState,
}

/// What the supervisors of `live` sessions say of their pulls that is news: progress of
/// those PULLING, a digest not recorded yet. `dir_of`: a session's directory.
pub fn pulls_seen(
    live: &[session::Model],
    dir_of: impl Fn(Uuid) -> crate::domain::runtime::local::files::SessionDir,
) -> Vec<PullSeen> {
    let pulling = SessionStatus::Pulling.as_str();
    live.iter()
        .filter_map(|s| {
            let state = dir_of(s.id).read_pull()?;
            let news = s.status == pulling || state.digest.as_deref() != s.image_digest.as_deref();
            (news && (state.digest.is_some() || s.status == pulling)).then(|| PullSeen { session: s.clone(), state })
        })
        .collect()
}

/// How often a session's pull progress is recorded and announced, at most.
pub const PULL_PROGRESS_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(1);

/// A session's stored pull progress: how far, and when it was written.
pub fn stored_progress(s: &session::Model) -> Option<(crate::domain::runtime::image::Progress, DateTime<Utc>)> {
    let v = s.pull_progress.as_ref()?;
    let progress = serde_json::from_value(v.get("progress")?.clone()).ok()?;
    let at = v.get("at")?.as_str()?.parse().ok()?;
    Some((progress, at))
}

/// Records what supervisors say of their sessions' pulls, through the one writer: the
/// progress of a session still PULLING (a PULL_PROGRESS event, at most once a second per
/// session, no history line: the PULLING step is the history), and the digest its image
/// resolved to, once (MODIFIED, with a history line). Returns how many were written.
pub async fn pulls(db: &DatabaseConnection, bus: &EventBus, engine: &str, seen: Vec<PullSeen>) -> DomainResult<usize> {
    use crate::domain::lifecycle::{Modification, Transitions, Written};
    use crate::domain::model::EventKind;
    let now = clock::now();
    let mut writes = Vec::new();
    for p in seen {
        let s = &p.session;
        let status = SessionStatus::stored(&s.status)?;
        let progress = p.state.progress;
        // The last progress (the pull done) is always told; the others once a second.
        let due = match stored_progress(s) {
            Some((stored, _)) if stored == progress => false,
            _ if p.state.digest.is_some() => true,
            Some((_, at)) => now - at >= PULL_PROGRESS_EVERY,
            None => true,
        };
        if status == SessionStatus::Pulling && due {
            let percent = progress.percent().unwrap_or(0);
            let message = format!(
                "pulling: {percent} % ({} of {} bytes, {} of {} layers)",
                progress.bytes_done, progress.bytes_total, progress.layers_done, progress.layers_total
            );
            let mut m = Modification::new(s.id, status, "pull", message, Actor::system(engine));
            m.kind = EventKind::PullProgress;
            m.history = false;
            let stored = serde_json::json!({"progress": progress, "at": now.to_rfc3339()});
            m.set = vec![(session::Column::PullProgress, Expr::value(stored))];
            writes.push(m);
        }
        if let Some(digest) = &p.state.digest
            && s.image_digest.as_deref() != Some(digest.as_str())
        {
            let message = format!("image {} pulled as {digest}", s.image);
            let mut m = Modification::new(s.id, status, "pull", message, Actor::system(engine));
            m.guard_status = false;
            m.set = vec![(session::Column::ImageDigest, Expr::value(digest.clone()))];
            writes.push(m);
        }
    }
    if writes.is_empty() {
        return Ok(0);
    }
    let txn = crate::domain::begin_write(db).await?;
    let mut transitions = Transitions::default();
    let mut written = 0;
    for m in writes {
        if let Written::Done(_) = lifecycle::modify(&txn, m, now, &mut transitions).await? {
            written += 1;
        }
    }
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(written)
}
