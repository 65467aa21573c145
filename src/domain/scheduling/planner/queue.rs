//! In what order a priority band is taken: FIFO and LIFO by creation, DRF by each owner's
//! dominant share as allocations change it.

use std::cmp::Ordering;
use std::collections::HashMap;

use uuid::Uuid;

use super::{PendingSession, Snapshot};
use crate::domain::model::SchedulerStrategy;
use crate::domain::model::slots::ResourceSlots;

/// The dominant share of `usage` in `capacity`: the largest fraction over the slots.
pub fn dominant_share(usage: &ResourceSlots, capacity: &ResourceSlots) -> f64 {
    usage
        .iter()
        .filter_map(|(slot, used)| capacity.limit(slot).filter(|c| *c > 0.0).map(|c| used / c))
        .fold(0.0, f64::max)
}

fn by_creation(a: &PendingSession, b: &PendingSession) -> Ordering {
    a.created.cmp(&b.created).then(a.id.cmp(&b.id))
}

/// The sessions of one priority band in the order the strategy takes them. For DRF the
/// order depends on allocations, so it is produced step by step by [`Queue`].
pub(super) fn order_band(band: &mut [PendingSession], strategy: SchedulerStrategy) {
    match strategy {
        SchedulerStrategy::Lifo => band.sort_by(|a, b| by_creation(b, a)),
        _ => band.sort_by(by_creation),
    }
}

/// The order a priority band is taken in. FIFO and LIFO are a fixed order; DRF serves,
/// each time, the owner with the lowest dominant share (ties: the oldest waiting session),
/// kept in a heap so that a band of n sessions costs O(n log n).
pub(super) enum Queue {
    Fixed(std::collections::VecDeque<PendingSession>),
    Drf {
        /// Each owner's sessions, oldest first.
        owners: HashMap<Uuid, std::collections::VecDeque<PendingSession>>,
        /// (share, oldest creation, id, owner), smallest first.
        heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF64, i64, Uuid, Uuid)>>,
    },
}

/// An f64 with a total order, for the DRF heap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct OrdF64(pub(super) f64);

impl Eq for OrdF64 {}

impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Queue {
    pub(super) fn new(
        band: Vec<PendingSession>,
        strategy: SchedulerStrategy,
        state: &Snapshot,
        group: &str,
        capacity: &ResourceSlots,
    ) -> Self {
        if strategy != SchedulerStrategy::Drf {
            return Queue::Fixed(band.into());
        }
        let mut owners: HashMap<Uuid, std::collections::VecDeque<PendingSession>> = HashMap::new();
        for s in band {
            owners.entry(s.owner).or_default().push_back(s);
        }
        let mut q = Queue::Drf { owners, heap: Default::default() };
        let ids: Vec<Uuid> = match &q {
            Queue::Drf { owners, .. } => owners.keys().copied().collect(),
            Queue::Fixed(_) => Vec::new(),
        };
        for owner in ids {
            q.push_owner(owner, state, group, capacity);
        }
        q
    }

    fn push_owner(&mut self, owner: Uuid, state: &Snapshot, group: &str, capacity: &ResourceSlots) {
        if let Queue::Drf { owners, heap } = self
            && let Some(head) = owners.get(&owner).and_then(|q| q.front())
        {
            let empty = ResourceSlots::new();
            let share = dominant_share(state.owner_usage.get(&(group.to_owned(), owner)).unwrap_or(&empty), capacity);
            heap.push(std::cmp::Reverse((OrdF64(share), head.created, head.id, owner)));
        }
    }

    pub(super) fn next(&mut self) -> Option<PendingSession> {
        match self {
            Queue::Fixed(q) => q.pop_front(),
            Queue::Drf { owners, heap } => {
                let std::cmp::Reverse((_, _, _, owner)) = heap.pop()?;
                owners.get_mut(&owner)?.pop_front()
            }
        }
    }

    /// After `s` was taken (scheduled or not), its owner's next session competes again,
    /// with the owner's share as it now is.
    pub(super) fn taken(&mut self, s: &PendingSession, state: &Snapshot, group: &str, capacity: &ResourceSlots) {
        self.push_owner(s.owner, state, group, capacity);
    }
}
