//! What a look at a session finds, and what it then does: the supervisor's report read
//! ([`observe`]), turned into status steps, log lines and the output to copy ([`Plan`]).

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use entity::session;

use super::files::{Exit, Phase, SessionDir, State};
use super::{LocalRuntime, supervisor};
use crate::domain::live::usage::{self, Sample};
use crate::domain::model::SessionType;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::runtime::output::{Copied, Output, new_output};
use crate::domain::runtime::reconcile::{self, steps_between};
use crate::domain::{model::slots, reclaim::expiry};

/// A supervisor that has written nothing this long after its spec did not start.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// What a session's supervisor shows.
#[derive(Debug, PartialEq)]
pub(super) enum Observed {
    /// Nothing yet.
    Nothing,
    /// Under way.
    At { phase: Phase, pulled: bool },
    /// Over.
    Ended { exit: Exit, ran: bool, pulled: bool },
    /// The supervisor is gone without an exit record.
    Vanished(String),
}

pub(super) fn observe(sd: &SessionDir) -> Observed {
    match sd.read_state() {
        Some(State { exit: Some(exit), child, pulled, .. }) => Observed::Ended { exit, ran: child.is_some(), pulled },
        Some(state) if state.supervisor.alive() => Observed::At { phase: state.phase, pulled: state.pulled },
        // The supervisor writes its exit record and then exits: between our reading of the
        // state and asking whether it lives, it may have done both. Read again.
        Some(_) => match sd.read_state() {
            Some(State { exit: Some(exit), child, pulled, .. }) => {
                Observed::Ended { exit, ran: child.is_some(), pulled }
            }
            _ => Observed::Vanished("the session's supervisor vanished without an exit record".to_owned()),
        },
        None => {
            let age = std::fs::metadata(sd.spec()).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
            match age {
                Some(age) if age > START_DEADLINE => {
                    Observed::Vanished("the session's supervisor did not start".to_owned())
                }
                _ => Observed::Nothing,
            }
        }
    }
}

/// The status a phase shows as.
pub(crate) fn status_of(phase: Phase) -> SessionStatus {
    match phase {
        Phase::Preparing => SessionStatus::Preparing,
        Phase::Pulling => SessionStatus::Pulling,
        Phase::Prepared => SessionStatus::Prepared,
        Phase::Creating => SessionStatus::Creating,
        Phase::Running | Phase::Exited => SessionStatus::Running,
    }
}

/// The reason of a session ended for its work directory's size.
pub const DISK_LIMIT_EXCEEDED: &str = "disk limit exceeded";

/// How a session that ended is recorded: status, reason, result and exit code.
pub(crate) fn ending(s: &session::Model, exit: &Exit) -> (SessionStatus, String, SessionResult, Option<i32>) {
    if let Some(why) = &exit.failed {
        // A pull's failure is said as it is: the registry's words.
        let reason = if why.starts_with(super::supervisor::PULL_FAILED) {
            why.clone()
        } else {
            format!("failed to start: {why}")
        };
        return (SessionStatus::Error, reason, SessionResult::Failure, None);
    }
    let batch = s.session_type == SessionType::Batch.as_str();
    let code = exit.code;
    if exit.timed_out {
        return (
            SessionStatus::Terminated,
            crate::domain::reclaim::expiry::BATCH_TIMED_OUT.to_owned(),
            SessionResult::Failure,
            code,
        );
    }
    if exit.oom_killed {
        return (SessionStatus::Terminated, "OOM killed".to_owned(), SessionResult::Failure, code);
    }
    if exit.disk_exceeded {
        return (SessionStatus::Terminated, DISK_LIMIT_EXCEEDED.to_owned(), SessionResult::Failure, code);
    }
    if exit.stopped {
        let reason = s.status_info.clone().unwrap_or_else(|| "stopped".to_owned());
        // A batch job stopped before it finished failed; any other session ended as asked.
        let result = if batch { SessionResult::Failure } else { SessionResult::Success };
        return (SessionStatus::Terminated, reason, result, code);
    }
    let result = if code == Some(0) { SessionResult::Success } else { SessionResult::Failure };
    (SessionStatus::Terminated, supervisor::describe_code(code), result, code)
}

/// What the local runtime does once a look is written.
#[derive(Default)]
pub(super) struct After {
    /// Where the copy of the output is, written once committed.
    pub(super) copied: Option<(PathBuf, Copied)>,
    /// A terminal session whose directory goes once its output is in the log.
    pub(super) remove: Option<PathBuf>,
}

pub(super) type Plan = reconcile::Plan<After>;

impl LocalRuntime {
    /// What a look does for session `s`: its steps and output ([`Self::plan_steps`]), and
    /// what it used when a sample is due.
    pub(super) fn plan(&self, s: session::Model, now: DateTime<Utc>) -> Option<Plan> {
        let usage = self.sample(&s, now);
        let keep = usage.as_ref().map(|_| s.clone());
        match self.plan_steps(s, now) {
            Some(mut plan) => {
                plan.usage = usage;
                Some(plan)
            }
            None => Some(Plan::sampled(keep?, usage?)),
        }
    }

    /// What a running session uses, when a sample is due: the cores it kept busy since the
    /// previous sample, and its memory. The first sample has its memory alone: its
    /// processes may have run before the session was seen RUNNING, so its start is no base
    /// for their CPU time.
    fn sample(&self, s: &session::Model, now: DateTime<Utc>) -> Option<Sample> {
        if s.status != SessionStatus::Running.as_str() || !usage::due(s, now) {
            return None;
        }
        let root = || SessionDir::of(&self.config.dir, s.id).read_state().and_then(|st| st.child).map(|c| c.pid);
        let (cpu_time, memory) = self.enforcement.usage(s.id, root)?;
        let at = std::time::Instant::now();
        let mut seen = self.cpu_seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut sample = Sample::from([(slots::MEM.to_owned(), memory)]);
        if let Some((before, then)) = seen.insert(s.id, (cpu_time, at))
            && at > then
        {
            sample.insert(slots::CPU.to_owned(), (cpu_time - before).max(0.0) / (at - then).as_secs_f64());
        }
        Some(sample)
    }

    fn plan_steps(&self, s: session::Model, now: DateTime<Utc>) -> Option<Plan> {
        let sd = SessionDir::of(&self.config.dir, s.id);
        let status = SessionStatus::parse(&s.status)?;
        let started = sd.spec().exists();
        if status == SessionStatus::Terminating {
            if !started {
                // Asked to stop before its supervisor started: nothing runs.
                let reason = s.status_info.clone();
                return Some(Plan::steps(
                    s,
                    vec![(SessionStatus::Terminated, reason, None)],
                    "session terminated before it started".to_owned(),
                ));
            }
            std::fs::write(sd.stop(), b"").ok();
        }
        if let Some((reason, log)) = expiry::due(&s, now).ok().flatten() {
            std::fs::write(sd.stop(), b"").ok();
            return Some(Plan::steps(s, vec![(SessionStatus::Terminating, Some(reason), None)], log));
        }
        if status == SessionStatus::Scheduled && !started {
            return match self.start(&s) {
                Ok(()) => None,
                Err(why) => Some(Plan::failed_to_start(s, &why)),
            };
        }
        let observed = if started {
            observe(&sd)
        } else {
            // Past SCHEDULED, and its directory is gone (the runtime directory was wiped).
            Observed::Vanished("the session's directory is gone".to_owned())
        };
        let ended = matches!(observed, Observed::Ended { .. } | Observed::Vanished(_));
        let Output { lines: output, copied, rest } = new_output(&sd.output(), &sd.ingested(), ended);
        let agent = &self.config.agent;
        // The log reads in order: the start-up steps, the output, then the end.
        let mut step_lines = Vec::new();
        let mut steps = Vec::new();
        let mut end_line = None;
        match observed {
            Observed::Nothing => {}
            Observed::At { phase, pulled } => {
                for to in steps_between(status, status_of(phase), pulled) {
                    step_lines.push(step_line(to, agent, &s.image));
                    steps.push((to, None, None));
                }
            }
            Observed::Ended { exit, ran, pulled } => {
                let (end, reason, result, code) = ending(&s, &exit);
                if end != SessionStatus::Error && ran {
                    for to in steps_between(status, SessionStatus::Running, pulled) {
                        step_lines.push(step_line(to, agent, &s.image));
                        steps.push((to, None, None));
                    }
                }
                // The end is recorded with the last of the output.
                if !rest {
                    end_line = Some(match end {
                        SessionStatus::Error => format!("error: {reason}"),
                        _ => format!("session ended: {reason}"),
                    });
                    steps.push((end, Some(reason), Some((result, code))));
                }
            }
            Observed::Vanished(why) => {
                end_line = Some(format!("error: {why}"));
                steps.push((SessionStatus::Error, Some(why), Some((SessionResult::Failure, None))));
            }
        }
        if steps.is_empty() && output.is_empty() && copied.is_none() {
            return None;
        }
        Some(Plan {
            session: s,
            steps,
            step_lines,
            output,
            end_line,
            placed: None,
            usage: None,
            after: After { copied, remove: None },
        })
    }

    /// A directory whose session is no longer live here: stop what may still run, copy the
    /// rest of its output, and remove it once that is in the log.
    pub(super) fn plan_leftover(&self, s: session::Model) -> Option<Plan> {
        let sd = SessionDir::of(&self.config.dir, s.id);
        let state = sd.read_state();
        let running = match &state {
            Some(state) => state.exit.is_none() && state.supervisor.alive(),
            // A supervisor may be starting: it reads `stop` first thing.
            None => observe(&sd) == Observed::Nothing,
        };
        if running {
            std::fs::write(sd.stop(), b"").ok();
            return None;
        }
        // The directory goes with the last of the output (a long one takes ticks).
        let out = new_output(&sd.output(), &sd.ingested(), true);
        let remove = (!out.rest).then_some(sd.root);
        Some(Plan {
            session: s,
            steps: Vec::new(),
            step_lines: Vec::new(),
            output: out.lines,
            end_line: None,
            placed: None,
            usage: None,
            after: After { copied: out.copied, remove },
        })
    }
}

fn step_line(to: SessionStatus, agent: &str, image: &str) -> String {
    match to {
        SessionStatus::Preparing => format!("preparing the sandbox on agent {agent}"),
        SessionStatus::Pulling => format!("running the prepare step of image {image} on agent {agent}"),
        SessionStatus::Prepared => format!("image {image} ready on agent {agent}"),
        SessionStatus::Creating => "starting the sandbox".to_owned(),
        _ => "session running".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionStatus::*;

    #[test]
    fn observed_steps_go_in_order_and_pulling_only_when_it_happened() {
        assert_eq!(steps_between(Scheduled, Running, false), [Preparing, Prepared, Creating, Running]);
        assert_eq!(steps_between(Scheduled, Running, true), [Preparing, Pulling, Prepared, Creating, Running]);
        assert_eq!(steps_between(Preparing, Pulling, false), [Pulling]);
        assert_eq!(steps_between(Running, Running, false), []);
        assert_eq!(steps_between(Creating, Preparing, false), [], "never backwards");
        assert_eq!(steps_between(Terminating, Running, false), [], "a stopping session only ends");
    }

    #[test]
    fn an_ending_names_its_cause() {
        let s = |ty: &str| session::Model {
            session_type: ty.to_owned(),
            status: "TERMINATING".into(),
            status_info: Some("user-requested".to_owned()),
            ..crate::domain::testing::session()
        };
        let exit = |e: Exit| ending(&s("BATCH"), &e);
        assert_eq!(exit(Exit { code: Some(3), ..Exit::default() }).1, "exit 3");
        assert_eq!(exit(Exit { code: Some(137), ..Exit::default() }).1, "signal 9");
        assert_eq!(exit(Exit { code: Some(0), ..Exit::default() }).2, SessionResult::Success);
        assert_eq!(exit(Exit { code: Some(124), timed_out: true, ..Exit::default() }).1, "batch timeout");
        assert_eq!(exit(Exit { code: Some(137), oom_killed: true, ..Exit::default() }).1, "OOM killed");
        assert_eq!(exit(Exit { failed: Some("no bwrap".into()), ..Exit::default() }).0, Error);
        let stopped = ending(&s("INTERACTIVE"), &Exit { code: Some(143), stopped: true, ..Exit::default() });
        assert_eq!((stopped.1.as_str(), stopped.2), ("user-requested", SessionResult::Success));
    }
}
