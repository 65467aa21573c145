//! The one session status enum (the database, the API and the events all use it) and the only
//! place that decides which transitions are legal.

use crate::domain::model::string_enum;

string_enum!(
    SessionStatus {
        Pending = "PENDING",
        Scheduled = "SCHEDULED",
        Preparing = "PREPARING",
        Pulling = "PULLING",
        Prepared = "PREPARED",
        Creating = "CREATING",
        Running = "RUNNING",
        Terminating = "TERMINATING",
        Terminated = "TERMINATED",
        Cancelled = "CANCELLED",
        Error = "ERROR",
    }
);

string_enum!(SessionResult { Undefined = "UNDEFINED", Success = "SUCCESS", Failure = "FAILURE" });

impl SessionStatus {
    pub const TERMINAL: &'static [SessionStatus] = &[Self::Terminated, Self::Cancelled, Self::Error];

    /// Terminal sessions hold nothing, never change again and free their name.
    pub fn is_terminal(self) -> bool {
        Self::TERMINAL.contains(&self)
    }

    /// The Running tab shows every non-terminal status, PENDING included.
    pub fn non_terminal() -> impl Iterator<Item = SessionStatus> {
        Self::ALL.iter().copied().filter(|s| !s.is_terminal())
    }

    /// Resources are held from SCHEDULED until the session is terminal.
    pub fn is_occupying(self) -> bool {
        !self.is_terminal() && self != Self::Pending
    }

    /// Whether `self → to` is a legal transition.
    pub fn can_become(self, to: SessionStatus) -> bool {
        use SessionStatus::*;
        match (self, to) {
            (from, _) if from.is_terminal() => false,
            (_, Error) => true,
            (Pending, Scheduled | Cancelled) => true,
            (Scheduled, Preparing) => true,
            (Preparing, Pulling | Prepared) => true,
            (Pulling, Prepared) => true,
            (Prepared, Creating) => true,
            (Creating, Running) => true,
            // Ending a started session: graceful, or forced straight to TERMINATED.
            (Scheduled | Preparing | Pulling | Prepared | Creating | Running, Terminating | Terminated) => true,
            (Terminating, Terminated) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SessionStatus::*;
    use super::*;

    #[test]
    fn the_start_up_path_is_legal_step_by_step() {
        let path = [Pending, Scheduled, Preparing, Pulling, Prepared, Creating, Running, Terminating, Terminated];
        for pair in path.windows(2) {
            assert!(pair[0].can_become(pair[1]), "{} → {}", pair[0], pair[1]);
        }
        assert!(Preparing.can_become(Prepared), "pulling is skipped when the agent has the image");
    }

    #[test]
    fn terminal_statuses_never_change() {
        for from in SessionStatus::TERMINAL {
            for to in SessionStatus::ALL {
                assert!(!from.can_become(*to), "{from} → {to}");
            }
        }
    }

    #[test]
    fn no_skipping_or_going_back() {
        assert!(!Pending.can_become(Running));
        assert!(!Running.can_become(Pending));
        assert!(!Running.can_become(Cancelled), "only a pending session is cancelled");
        assert!(!Pending.can_become(Terminating), "a pending session is cancelled, not terminated");
        assert!(Creating.can_become(Error));
    }

    #[test]
    fn every_legal_transition_written_out() {
        let legal: &[(SessionStatus, &[SessionStatus])] = &[
            (Pending, &[Scheduled, Cancelled, Error]),
            (Scheduled, &[Preparing, Terminating, Terminated, Error]),
            (Preparing, &[Pulling, Prepared, Terminating, Terminated, Error]),
            (Pulling, &[Prepared, Terminating, Terminated, Error]),
            (Prepared, &[Creating, Terminating, Terminated, Error]),
            (Creating, &[Running, Terminating, Terminated, Error]),
            (Running, &[Terminating, Terminated, Error]),
            (Terminating, &[Terminated, Error]),
            (Terminated, &[]),
            (Cancelled, &[]),
            (Error, &[]),
        ];
        let all = [
            Pending,
            Scheduled,
            Preparing,
            Pulling,
            Prepared,
            Creating,
            Running,
            Terminating,
            Terminated,
            Cancelled,
            Error,
        ];
        for (from, tos) in legal {
            for to in all {
                assert_eq!(from.can_become(to), tos.contains(&to), "{from} → {to}");
            }
        }
        let terminal: Vec<_> = all.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [Terminated, Cancelled, Error]);
    }

    #[test]
    fn occupancy_runs_from_scheduled_to_terminal() {
        let occupying: Vec<_> = SessionStatus::ALL.iter().filter(|s| s.is_occupying()).collect();
        assert_eq!(occupying, [&Scheduled, &Preparing, &Pulling, &Prepared, &Creating, &Running, &Terminating]);
        assert_eq!(SessionStatus::non_terminal().count(), 8);
    }
}
