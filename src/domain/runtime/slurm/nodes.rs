//! A Slurm group's agents are its partition's nodes: listed every few seconds and stored as
//! the group's agents (capacity from CPUs, memory and `gpu` gres; alive and schedulable from
//! the node's state). A node gone from the list, or every node while Slurm does not answer
//! past [`super::NODE_TIMEOUT`], is not alive.

use std::collections::BTreeMap;

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Unchanged,
};
use serde_json::{Value, json};

use entity::agent;

use super::client::Node;
use super::{NODE_TIMEOUT, SlurmEngine};
use crate::domain::{DomainResult, directory::catalog, model::clock};

/// The stored status of a node that is gone or unreachable.
pub const LOST: &str = "LOST";

/// GPUs a node's gres string lists (`gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:1,mps:100`).
pub fn gpus(gres: &str) -> i64 {
    gres.split(',')
        .filter_map(|g| {
            let g = g.split('(').next()?;
            let mut parts = g.split(':');
            (parts.next()? == "gpu").then(|| parts.next_back().and_then(|n| n.parse::<i64>().ok()).unwrap_or(1))
        })
        .sum()
}

/// Whether Slurm will start jobs on the node.
pub fn schedulable(n: &Node) -> bool {
    let state = n.state.to_lowercase();
    let bad_state = ["down", "drained", "draining", "drain", "fail", "failing", "future", "unknown", "inval"];
    let bad_flag = ["DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED"];
    !bad_state.iter().any(|b| state.contains(b)) && !n.state_flags.iter().any(|f| bad_flag.contains(&f.as_str()))
}

/// Whether the node answers (idle, mixed, allocated, even drained: it runs what it has).
pub fn alive(n: &Node) -> bool {
    let state = n.state.to_lowercase();
    !state.contains("down") && !state.contains("unknown") && !n.state_flags.iter().any(|f| f == "NOT_RESPONDING")
}

pub fn slots(n: &Node) -> Value {
    let mut slots = json!({ "cpu": n.cpus, "mem": n.real_memory.max(0) * (1 << 20) });
    let gpus = gpus(&n.gres);
    if gpus > 0 {
        slots["cuda.device"] = json!(gpus);
    }
    slots
}

impl SlurmEngine {
    pub(super) async fn refresh_nodes(&self, db: &DatabaseConnection) -> DomainResult<()> {
        let listed = self.client.nodes().await;
        let stored: BTreeMap<String, agent::Model> =
            agent::Entity::find().all(db).await?.into_iter().map(|a| (a.id.clone(), a)).collect();
        let now = clock::now();
        let nodes = match listed {
            Ok(nodes) => {
                self.answered(Ok(()));
                nodes
            }
            Err(e) => {
                self.answered(Err(&e));
                let silent = self.state().last_answer.is_none_or(|at| at.elapsed() >= NODE_TIMEOUT);
                if silent {
                    agent::Entity::update_many()
                        .col_expr(agent::Column::Status, Expr::value(LOST))
                        .filter(agent::Column::ResourceGroup.eq(self.group.clone()))
                        .filter(agent::Column::Status.ne(LOST))
                        .exec(db)
                        .await?;
                }
                return Ok(());
            }
        };
        let partition = &self.client.settings().partition;
        let mine: Vec<&Node> = nodes.iter().filter(|n| n.partitions.iter().any(|p| p == partition)).collect();
        self.health(|h| h.nodes = mine.len());
        for n in &mine {
            let status = if alive(n) { catalog::ALIVE } else { LOST };
            let (slots, schedulable) = (slots(n), schedulable(n));
            match stored.get(&n.name) {
                Some(a) if a.resource_group != self.group => {
                    tracing::warn!(
                        engine = %self.name,
                        "node {} is already the agent of resource group {}; it is not used",
                        n.name,
                        a.resource_group
                    );
                }
                Some(a) => {
                    if a.available_slots != slots || a.status != status || a.schedulable != schedulable {
                        agent::ActiveModel {
                            id: Unchanged(a.id.clone()),
                            available_slots: Set(slots),
                            status: Set(status.to_owned()),
                            schedulable: Set(schedulable),
                            last_heartbeat_at: Set(now),
                            ..Default::default()
                        }
                        .update(db)
                        .await?;
                    }
                }
                None => {
                    agent::Entity::insert(agent::ActiveModel {
                        id: Set(n.name.clone()),
                        resource_group: Set(self.group.clone()),
                        available_slots: Set(slots),
                        status: Set(status.to_owned()),
                        schedulable: Set(schedulable),
                        pulled_images: Set(json!([])),
                        created_at: Set(now),
                        last_heartbeat_at: Set(now),
                    })
                    .exec_without_returning(db)
                    .await?;
                }
            }
        }
        // Nodes gone from the partition.
        let listed: Vec<String> = mine.iter().map(|n| n.name.clone()).collect();
        agent::Entity::update_many()
            .col_expr(agent::Column::Status, Expr::value(LOST))
            .filter(agent::Column::ResourceGroup.eq(self.group.clone()))
            .filter(agent::Column::Status.ne(LOST))
            .filter(agent::Column::Id.is_not_in(listed))
            .exec(db)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_are_counted_from_the_gres() {
        assert_eq!(gpus("gpu:2"), 2);
        assert_eq!(gpus("gpu:a100:4(S:0-1)"), 4);
        assert_eq!(gpus("gpu:1,mps:100"), 1);
        assert_eq!(gpus("gpu"), 1);
        assert_eq!(gpus(""), 0);
        assert_eq!(gpus("mps:100"), 0);
    }

    #[test]
    fn node_states_decide_alive_and_schedulable() {
        let node = |state: &str, flags: &[&str]| Node {
            name: "n".into(),
            state: state.into(),
            state_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            cpus: 2,
            real_memory: 1000,
            gres: String::new(),
            partitions: vec![],
            reason: String::new(),
        };
        for s in ["idle", "mixed", "allocated"] {
            assert!(alive(&node(s, &[])) && schedulable(&node(s, &[])), "{s}");
        }
        assert!(alive(&node("idle", &["DRAIN"])) && !schedulable(&node("idle", &["DRAIN"])), "drained");
        assert!(!alive(&node("down", &[])) && !schedulable(&node("down", &[])), "down");
        assert!(!alive(&node("idle", &["NOT_RESPONDING"])), "not responding");
    }
}
