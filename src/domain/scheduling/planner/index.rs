//! Where a session goes: the agent with the most free CPU (ties: the smallest id) that has
//! room for all of its containers, found through an index rather than a scan of every agent.
//!
//! The agents are kept ordered by free CPU, most first, so the agent a request goes to is
//! the first in that order with room for it, and no agent after one with too little CPU can
//! have room: a request is answered after the agents with enough CPU that lack another slot,
//! not after every agent. Within a pass an agent's free capacity only shrinks, so a request
//! that fits no agent fits none for the rest of the pass, nor does any request at least as
//! large in every slot: those are remembered and answered at once. Whether a request fits
//! some agent's whole capacity does not change in a pass: it is worked out once per shape.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use super::Agent;
use super::queue::OrdF64;
use crate::domain::model::slots::{EPSILON, ResourceSlots};

/// How the pass finds the agent a request goes to; [`AgentIndex`] in the server, a plain
/// scan in the tests that hold the index to it.
pub(super) trait Placer {
    fn new(agents: &[Agent]) -> Self;
    /// The position of the agent `total` goes to, if one has room.
    fn place(&mut self, agents: &[Agent], total: &ResourceSlots) -> Option<usize>;
    /// Agent `i`'s free CPU was `before`; it is now what `agents[i]` says.
    fn moved(&mut self, agents: &[Agent], i: usize, before: f64);
    /// Whether `total` fits some agent's whole capacity (held or not).
    fn fits_some_capacity(&mut self, agents: &[Agent], total: &ResourceSlots) -> bool;
}

/// The most requests remembered, per group and pass, as fitting no agent.
const MAX_FULL: usize = 64;

pub(super) struct AgentIndex {
    /// (free CPU, most first; rank of the id, smallest first; position of the agent).
    order: BTreeSet<(Reverse<OrdF64>, usize, usize)>,
    /// Each agent's rank among the ids, by position.
    rank: Vec<usize>,
    /// Requests no agent has room for now, and so for the rest of the pass.
    full: Vec<ResourceSlots>,
    /// Whether a request fits some agent's whole capacity, by its slots.
    fits_capacity: HashMap<Vec<(String, u64)>, bool>,
}

fn free_cpu(a: &Agent) -> f64 {
    a.free.get("cpu")
}

impl Placer for AgentIndex {
    fn new(agents: &[Agent]) -> Self {
        let mut by_id: Vec<usize> = (0..agents.len()).collect();
        by_id.sort_by(|&a, &b| agents[a].id.cmp(&agents[b].id));
        let mut rank = vec![0; agents.len()];
        for (r, &i) in by_id.iter().enumerate() {
            rank[i] = r;
        }
        let order = (0..agents.len()).map(|i| (Reverse(OrdF64(free_cpu(&agents[i]))), rank[i], i)).collect();
        Self { order, rank, full: Vec::new(), fits_capacity: HashMap::new() }
    }

    fn place(&mut self, agents: &[Agent], total: &ResourceSlots) -> Option<usize> {
        if self.full.iter().any(|f| at_least(total, f)) {
            return None;
        }
        let wanted = total.get("cpu");
        // As `ResourceSlots::fits_in` decides CPU (an agent without the slot has none).
        let found = self
            .order
            .iter()
            .take_while(|(Reverse(free), _, _)| wanted <= free.0 + EPSILON || wanted <= EPSILON)
            .map(|&(_, _, i)| i)
            .find(|&i| total.fits_in(&agents[i].free, false));
        if found.is_none() && self.full.len() < MAX_FULL {
            self.full.push(total.clone());
        }
        found
    }

    fn moved(&mut self, agents: &[Agent], i: usize, before: f64) {
        self.order.remove(&(Reverse(OrdF64(before)), self.rank[i], i));
        self.order.insert((Reverse(OrdF64(free_cpu(&agents[i]))), self.rank[i], i));
    }

    fn fits_some_capacity(&mut self, agents: &[Agent], total: &ResourceSlots) -> bool {
        let key: Vec<(String, u64)> = total.iter().map(|(s, a)| (s.to_owned(), a.to_bits())).collect();
        *self.fits_capacity.entry(key).or_insert_with(|| agents.iter().any(|a| total.fits_in(&a.capacity, false)))
    }
}

/// Whether `a` asks for every slot `b` asks for, at least as much of each: then wherever
/// `b` has no room, `a` has none either.
fn at_least(a: &ResourceSlots, b: &ResourceSlots) -> bool {
    b.iter().all(|(slot, amount)| a.limit(slot).is_some_and(|mine| mine >= amount))
}

#[cfg(test)]
pub(super) mod scan {
    use super::*;

    /// The way the pass placed sessions before the index: a scan of every agent. The index
    /// must decide exactly as it does.
    pub(in crate::domain::scheduling::planner) struct Scan;

    impl Placer for Scan {
        fn new(_: &[Agent]) -> Self {
            Scan
        }

        fn place(&mut self, agents: &[Agent], total: &ResourceSlots) -> Option<usize> {
            agents
                .iter()
                .enumerate()
                .filter(|(_, a)| total.fits_in(&a.free, false))
                .max_by(|(_, a), (_, b)| a.free.get("cpu").total_cmp(&b.free.get("cpu")).then_with(|| b.id.cmp(&a.id)))
                .map(|(i, _)| i)
        }

        fn moved(&mut self, _: &[Agent], _: usize, _: f64) {}

        fn fits_some_capacity(&mut self, agents: &[Agent], total: &ResourceSlots) -> bool {
            agents.iter().any(|a| total.fits_in(&a.capacity, false))
        }
    }
}
