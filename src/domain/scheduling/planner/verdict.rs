//! What a session is told, worked out once per distinct situation rather than once per
//! session: a holder's quota arithmetic (keypair, project, domain) once per state the holder
//! is in during the pass, and the checks, reasons and their digest once per request shape in
//! those states.
//!
//! A holder's state moves only when the pass starts a session it holds (its `used`, and a
//! keypair's `active`): each holder has a generation, moved then. A session's checks depend
//! on nothing but its keypair's, project's and domain's states, its request, its group and
//! what happened to it there (placed, no room, no room on any agent that takes sessions,
//! queued behind): a verdict is kept under exactly those and shared (`Arc`) by every session
//! it fits. A queue of 100 000 sessions from a few hundred users in a few shapes builds a
//! few thousand verdicts, not 100 000 lists of reasons, messages and digests.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};
use uuid::Uuid;

use super::fit::admission_checks;
use super::{Check, PendingSession, Snapshot, WaitReasons};
use crate::domain::model::slots::{ResourceRequest, ResourceSlots};
use crate::domain::sessions::occupancy::{LimitLayer, PendingReason, reasons_digest};

/// What happened to a session in its group, past the admission checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Placed {
    /// An agent has room for it.
    Room,
    /// No agent has room now.
    NoRoom,
    /// No agent that takes sessions could hold it even empty (only drained or silent ones).
    NoRoomAnywhere,
    /// It waits behind an earlier session of its band that does not fit.
    Behind,
}

/// A request as the pass works with it: its shape (equal requests, equal shapes) and the
/// whole session's slots.
pub(super) struct Shape {
    id: u32,
    pub(super) total: Arc<ResourceSlots>,
}

/// The admission checks of a session as its holders stand.
#[derive(Clone)]
pub(super) struct Admission {
    /// Which holder states and request they were worked out for.
    id: u32,
    /// Whether every one passed: the session may start wherever it goes.
    pub(super) admitted: bool,
    checks: Arc<[Check]>,
}

/// Every check a session ran, and every failure among them: it starts only when there is
/// none (and so an agent had room).
#[derive(Clone)]
pub(super) struct Verdict {
    pub(super) checks: Arc<[Check]>,
    pub(super) reasons: Arc<WaitReasons>,
}

/// The verdicts of one pass. [`Verdicts::fresh`] keeps nothing and works everything out
/// for each session, as the pass did before: the tests hold the kept ones to it.
pub(super) struct Verdicts {
    keep: bool,
    /// Each holder's generation, by layer; absent: 0.
    generations: [FxHashMap<Uuid, u32>; 3],
    /// Requests by hash, with their shape's id and total.
    shapes: FxHashMap<u64, Vec<(ResourceRequest, u32, Arc<ResourceSlots>)>>,
    admissions: FxHashMap<AdmissionKey, Admission>,
    verdicts: FxHashMap<(u32, usize, Placed), Verdict>,
    next: u32,
}

/// A session's holders, each in its generation, and its shape.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct AdmissionKey {
    holders: [(Uuid, u32); 3],
    shape: u32,
}

const KEYPAIR: usize = 0;
const PROJECT: usize = 1;
const DOMAIN: usize = 2;

impl Verdicts {
    pub(super) fn new() -> Self {
        Self {
            keep: true,
            generations: Default::default(),
            shapes: HashMap::default(),
            admissions: HashMap::default(),
            verdicts: HashMap::default(),
            next: 0,
        }
    }

    /// Keeps nothing: every session's checks and reasons worked out anew.
    #[cfg(test)]
    pub(super) fn fresh() -> Self {
        Self { keep: false, ..Self::new() }
    }

    fn next_id(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    pub(super) fn shape(&mut self, request: &ResourceRequest) -> Shape {
        if !self.keep {
            return Shape { id: self.next_id(), total: Arc::new(request.total()) };
        }
        let mut h = FxHasher::default();
        request.cluster_size.hash(&mut h);
        for (slot, amount) in request.per_container.iter() {
            slot.hash(&mut h);
            amount.to_bits().hash(&mut h);
        }
        let hash = h.finish();
        if let Some((_, id, total)) = self.shapes.get(&hash).and_then(|b| b.iter().find(|(r, _, _)| r == request)) {
            return Shape { id: *id, total: total.clone() };
        }
        let id = self.next_id();
        let total = Arc::new(request.total());
        self.shapes.entry(hash).or_default().push((request.clone(), id, total.clone()));
        Shape { id, total }
    }

    /// Whether `s` (of `shape`) may start wherever it goes, and the checks that say so.
    pub(super) fn admission(&mut self, state: &Snapshot, s: &PendingSession, shape: &Shape) -> &Admission {
        let generation = |layer: usize, id: Uuid| (id, self.generations[layer].get(&id).copied().unwrap_or(0));
        let key = AdmissionKey {
            holders: [generation(KEYPAIR, s.keypair), generation(PROJECT, s.project), generation(DOMAIN, s.domain)],
            shape: shape.id,
        };
        if !self.keep || !self.admissions.contains_key(&key) {
            let checks: Arc<[Check]> = admission_checks(state, s, &shape.total).into();
            let admitted = all_passed(&checks);
            let id = self.next_id();
            self.admissions.insert(key, Admission { id, admitted, checks });
        }
        &self.admissions[&key]
    }

    /// The whole verdict of a session with `admission`, in group `g` (named `group`), that
    /// was `placed`.
    pub(super) fn verdict(&mut self, admission: &Admission, g: usize, group: &str, placed: Placed) -> Verdict {
        let key = (admission.id, g, placed);
        if self.keep
            && let Some(v) = self.verdicts.get(&key)
        {
            return v.clone();
        }
        let mut checks = admission.checks.to_vec();
        checks.push(placement_check(group, placed));
        let reasons: Vec<PendingReason> = checks.iter().flat_map(|c| c.failures.iter().cloned()).collect();
        let reasons = Arc::new(WaitReasons { digest: reasons_digest(&reasons), reasons });
        let verdict = Verdict { checks: checks.into(), reasons };
        if self.keep {
            self.verdicts.insert(key, verdict.clone());
        }
        verdict
    }

    /// `s` was started: its holders' states moved.
    pub(super) fn started(&mut self, s: &PendingSession) {
        for (layer, id) in [(KEYPAIR, s.keypair), (PROJECT, s.project), (DOMAIN, s.domain)] {
            *self.generations[layer].entry(id).or_default() += 1;
        }
    }
}

/// Whether none of `checks` failed: what a session needs to start.
pub(super) fn all_passed(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.failures.is_empty())
}

/// The check that follows the admission checks: the queue when the session waits behind
/// another, else whether an agent has room.
fn placement_check(group: &str, placed: Placed) -> Check {
    let no_capacity = |message: String| PendingReason {
        code: "NO_CAPACITY",
        message,
        layer: Some(LimitLayer::ResourceGroup),
        slot: None,
        requested: None,
        remaining: None,
    };
    match placed {
        Placed::Behind => Check {
            name: "queue",
            failures: vec![PendingReason {
                code: "QUEUED_BEHIND",
                message: "waiting behind an earlier session of the same priority that does not fit yet".into(),
                layer: None,
                slot: None,
                requested: None,
                remaining: None,
            }],
        },
        Placed::Room => Check { name: "capacity", failures: Vec::new() },
        Placed::NoRoom => Check {
            name: "capacity",
            failures: vec![no_capacity(format!("no agent of resource group `{group}` has room for this request now"))],
        },
        Placed::NoRoomAnywhere => Check {
            name: "capacity",
            failures: vec![no_capacity(format!(
                "no agent of resource group `{group}` that takes sessions now could hold this request (others are drained or not answering)"
            ))],
        },
    }
}
