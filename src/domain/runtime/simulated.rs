//! The simulated runtime: nothing runs. It drives the sessions of the resource groups whose
//! engine is declared `kind = "simulated"` (the demo's, tests'), never any other.
//! [`SimulatedRuntime`] walks a scheduled session through SCHEDULED → PREPARING → PULLING (only when the agent lacks the
//! image) → PREPARED → CREATING → RUNNING, one step per `step`, writing log lines; ends
//! batch sessions after `batch_run` (exit 0, SUCCESS) or at their batch timeout when that
//! is shorter (exit 124, FAILURE); ends any session past its keypair policy's
//! `max_session_lifetime`; and finishes TERMINATING sessions.
//!
//! It keeps no state of its own: every step is decided from the stored status and the time
//! it was entered, so after a restart it resumes every non-terminal session where it was,
//! and a step is taken once (the status-guarded update of [`lifecycle`] refuses a second).
//!
//! Since it runs nothing, a session's environment tells it what "running" gave, so that the
//! engines' conformance suite asks it the same cases as the real engines (which pass these
//! variables to the session like any other):
//! - `SESSIOND_SIM_FAIL=<STATUS>`: instead of entering that status the session goes ERROR
//!   (a start-up that failed);
//! - `SESSIOND_SIM_EXIT=<code>`: a batch session ends with that exit code (default 0);
//! - `SESSIOND_SIM_OUTPUT=<text>`: its output, written to its log when it ends;
//! - `SESSIOND_SIM_VANISH=1`: a running session's "job" vanishes (ERROR, with the reason).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::sea_query::Query;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde_json::Value;

use entity::{agent, engine, resource_group, session};

use super::engines::EngineKind;
use super::reconcile::{self, Plan};
use super::{Runtime, TIMEOUT_EXIT_CODE, env_var};
use crate::domain::live::events::EventBus;
use crate::domain::live::usage::{self, Sample};
use crate::domain::model::SessionType;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::{DomainResult, model::clock, model::slots, reclaim::expiry};

/// The rule its status changes name as their actor.
const ENGINE_RULE: &str = "simulated runtime";
const FAIL_VARIABLE: &str = "SESSIOND_SIM_FAIL";
const EXIT_VARIABLE: &str = "SESSIOND_SIM_EXIT";
const OUTPUT_VARIABLE: &str = "SESSIOND_SIM_OUTPUT";
const VANISH_VARIABLE: &str = "SESSIOND_SIM_VANISH";

#[derive(Clone, Debug)]
pub struct SimulatedRuntime {
    pub step: Duration,
    pub batch_run: Duration,
    /// An agent it leaves alone: the machine itself, when the local runtime drives it.
    pub except_agent: Option<String>,
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// What happens next to a session, if anything is due.
struct Next {
    to: SessionStatus,
    reason: Option<String>,
    result: Option<(SessionResult, Option<i32>)>,
    log: String,
    /// What it "printed", written before the log line.
    output: Vec<String>,
}

/// The output a session's environment gives it, as lines.
fn output_of(s: &session::Model) -> Vec<String> {
    env_var(s, OUTPUT_VARIABLE).map(|t| t.lines().map(str::to_owned).collect()).unwrap_or_default()
}

/// What a simulated running session uses at `now`: a plausible curve of its request, the
/// same for the same session at the same moment (a demo's figures are stable for its seed):
/// CPU between a quarter and 85 % of its cores in slow waves, memory filling to about three
/// quarters of its request over the first minutes, accelerators busy in waves of their own.
pub fn simulated_use(s: &session::Model, now: DateTime<Utc>) -> Sample {
    let requested = crate::domain::sessions::requested_slots(s).unwrap_or_default();
    let t = (now - s.started_at.unwrap_or(s.status_changed_at)).num_milliseconds().max(0) as f64 / 1000.0;
    simulated_use_at(s.id, &requested, t)
}

/// What the simulated curve gives session `id` requesting `requested`, `t` seconds after
/// its start.
pub fn simulated_use_at(id: uuid::Uuid, requested: &crate::domain::model::slots::ResourceSlots, t: f64) -> Sample {
    use std::f64::consts::TAU;
    let phase = (id.as_u128() % 997) as f64 / 997.0 * TAU;
    let wave = |period: f64, shift: f64| 0.5 + 0.5 * (TAU * t / period + phase + shift).sin();
    let mut sample = Sample::new();
    for (slot, amount) in requested.iter() {
        let used = match slot {
            slots::CPU => amount * (0.25 + 0.6 * wave(300.0, 0.0)),
            slots::MEM => amount * (0.3 + 0.4 * (1.0 - (-t / 120.0).exp()) + 0.1 * wave(600.0, 1.0)),
            _ => amount * (0.2 + 0.7 * wave(240.0, 2.0)),
        };
        sample.insert(slot.to_owned(), used);
    }
    sample
}

impl SimulatedRuntime {
    fn next(&self, s: &session::Model, now: DateTime<Utc>, pulled: &HashMap<String, Vec<String>>) -> Option<Next> {
        use SessionStatus::*;
        let status = SessionStatus::parse(&s.status)?;
        let step_due = now - s.status_changed_at >= delta(self.step);
        let agent = s.agent_id.clone().unwrap_or_default();
        let step = |to: SessionStatus, log: String| {
            if env_var(s, FAIL_VARIABLE).as_deref() == Some(to.as_str()) {
                Next {
                    to: Error,
                    reason: Some(format!("failed to start: injected failure entering {to}")),
                    result: Some((SessionResult::Failure, None)),
                    log: format!("error: could not enter {to} on agent {agent}"),
                    output: Vec::new(),
                }
            } else {
                Next { to, reason: None, result: None, log, output: Vec::new() }
            }
        };
        let has_image = pulled.get(&agent).is_some_and(|images| images.contains(&s.image));
        match status {
            Scheduled if step_due => Some(step(Preparing, format!("preparing the environment on agent {agent}"))),
            Preparing if step_due && !has_image => {
                Some(step(Pulling, format!("pulling image {} on agent {agent}", s.image)))
            }
            Preparing | Pulling if step_due => {
                Some(step(Prepared, format!("image {} ready on agent {agent}", s.image)))
            }
            Prepared if step_due => Some(step(Creating, "creating the container".to_owned())),
            Creating if step_due => Some(step(Running, "session running".to_owned())),
            // As every engine ends a stopped session: a batch job stopped before it finished
            // failed, any other session ended as asked.
            Terminating if step_due => Some(Next {
                to: Terminated,
                reason: s.status_info.clone(),
                result: Some((
                    if s.session_type == SessionType::Batch.as_str() {
                        SessionResult::Failure
                    } else {
                        SessionResult::Success
                    },
                    None,
                )),
                log: "session terminated".to_owned(),
                output: Vec::new(),
            }),
            Running => {
                let ran = now - s.started_at.unwrap_or(s.status_changed_at);
                if let Some((reason, log)) = expiry::due(s, now).ok().flatten() {
                    return Some(Next { to: Terminating, reason: Some(reason), result: None, log, output: Vec::new() });
                }
                if env_var(s, VANISH_VARIABLE).as_deref() == Some("1") {
                    let why = "the simulated job vanished (as its SESSIOND_SIM_VANISH asked)";
                    return Some(Next {
                        to: Error,
                        reason: Some(why.to_owned()),
                        result: Some((SessionResult::Failure, None)),
                        log: format!("error: {why}"),
                        output: Vec::new(),
                    });
                }
                if s.session_type != SessionType::Batch.as_str() {
                    return None;
                }
                let run = delta(self.batch_run);
                match s.batch_timeout_seconds.and_then(TimeDelta::try_seconds) {
                    Some(timeout) if timeout < run && ran >= timeout => Some(Next {
                        to: Terminated,
                        reason: Some(expiry::BATCH_TIMED_OUT.to_owned()),
                        result: Some((SessionResult::Failure, Some(TIMEOUT_EXIT_CODE))),
                        log: "session ended: batch timeout".to_owned(),
                        output: output_of(s),
                    }),
                    _ if ran >= run => {
                        let code = env_var(s, EXIT_VARIABLE).and_then(|c| c.trim().parse::<i32>().ok()).unwrap_or(0);
                        let reason = super::local::supervisor::describe_code(Some(code));
                        let result = if code == 0 { SessionResult::Success } else { SessionResult::Failure };
                        Some(Next {
                            to: Terminated,
                            log: format!("session ended: {reason}"),
                            reason: Some(reason),
                            result: Some((result, Some(code))),
                            output: output_of(s),
                        })
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

impl Runtime for SimulatedRuntime {
    fn tick(&self) -> Duration {
        (self.step / 4).clamp(Duration::from_millis(5), Duration::from_millis(250))
    }

    async fn drive(&self, db: &DatabaseConnection, bus: &EventBus) -> DomainResult<usize> {
        use SessionStatus::*;
        let now = clock::now();
        let driven = [Scheduled, Preparing, Pulling, Prepared, Creating, Running, Terminating];
        // Read first, outside any transaction: most ticks find nothing due and take no lock.
        // Only the sessions of groups whose engine is a simulated one.
        let simulated = Query::select()
            .column(resource_group::Column::Name)
            .from(resource_group::Entity)
            .and_where(
                resource_group::Column::Engine.in_subquery(
                    Query::select()
                        .column(engine::Column::Name)
                        .from(engine::Entity)
                        .and_where(engine::Column::Kind.eq(EngineKind::Simulated.as_str()))
                        .take(),
                ),
            )
            .take();
        let mut sessions = session::Entity::find()
            .filter(session::Column::Status.is_in(driven.iter().map(|s| s.as_str())))
            .filter(session::Column::ResourceGroup.in_subquery(simulated))
            .all(db)
            .await?;
        if let Some(except) = &self.except_agent {
            sessions.retain(|s| s.agent_id.as_ref() != Some(except));
        }
        if sessions.is_empty() {
            return Ok(0);
        }
        let pulled: HashMap<String, Vec<String>> = agent::Entity::find()
            .all(db)
            .await?
            .into_iter()
            .map(|a| {
                let images = a
                    .pulled_images
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect();
                (a.id, images)
            })
            .collect();
        let plans: Vec<Plan> = sessions
            .into_iter()
            .filter_map(|s| {
                let usage = (s.status == SessionStatus::Running.as_str() && usage::due(&s, now))
                    .then(|| simulated_use(&s, now));
                let plan = match self.next(&s, now, &pulled) {
                    None => Plan::sampled(s, usage?),
                    Some(next) => {
                        let mut plan = Plan::steps(s, vec![(next.to, next.reason, next.result)], next.log);
                        plan.output = next.output;
                        plan.usage = usage;
                        plan
                    }
                };
                Some(plan)
            })
            .collect();
        if plans.is_empty() {
            return Ok(0);
        }
        // The updates are guarded by the status read above: a session that moved meanwhile
        // (terminated by its owner, driven by another replica) is left alone.
        reconcile::write(db, bus, ENGINE_RULE, &plans, |agent, images| {
            let mut all = pulled.get(agent).cloned().unwrap_or_default();
            all.extend(images.iter().map(|i| (*i).to_owned()));
            all.sort();
            all.dedup();
            Some(Value::from(all))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_simulated_use_is_plausible_and_the_same_for_the_same_moment() {
        let started = Utc::now();
        let s = session::Model {
            requested_slots: serde_json::json!({"cpu": 4.0, "mem": 8589934592.0, "cuda.device": 1.0}),
            started_at: Some(started),
            ..crate::domain::testing::session()
        };
        for minutes in [0, 1, 7, 60, 600] {
            let at = started + chrono::TimeDelta::minutes(minutes);
            let u = simulated_use(&s, at);
            assert_eq!(u, simulated_use(&s, at), "stable");
            assert!((1.0..=3.4).contains(&u["cpu"]), "{u:?}");
            assert!(u["mem"] > 0.0 && u["mem"] <= 8589934592.0, "{u:?}");
            assert!((0.2..=0.9).contains(&u["cuda.device"]), "{u:?}");
        }
        let later = simulated_use(&s, started + chrono::TimeDelta::seconds(75));
        assert_ne!(simulated_use(&s, started), later, "it moves");
    }
}
