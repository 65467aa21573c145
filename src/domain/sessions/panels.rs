//! The resource summary panels at the top of the Sessions page, and the strictest-limit
//! rule: for each slot, remaining = the smallest (limit − used) over the layers that limit
//! it (keypair, project, domain, and the resource group's free capacity where it applies);
//! the binding layer is the one that gives it. Usage is summed by aggregate SQL (one
//! statement for all holders), never by loading sessions.

use std::collections::BTreeSet;

use sea_orm::{ConnectionTrait, EntityTrait, QueryOrder};
use uuid::Uuid;

use entity::{domain, keypair_resource_policy, slot_type};

use crate::domain::directory::auth::Viewer;
use crate::domain::model::ResourcePanelView;
use crate::domain::model::slots::ResourceSlots;
use crate::domain::sessions::occupancy::{self, Holder, LimitLayer};
use crate::domain::{DomainError, DomainResult, directory::catalog, sessions::visibility};

/// One layer's figures for one slot; `limit: None` is unlimited.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerUsage {
    pub layer: LimitLayer,
    pub limit: Option<f64>,
    pub used: f64,
    pub remaining: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SlotUsage {
    pub slot: String,
    pub used: f64,
    /// The binding layer's own limit, which `remaining` is left of (its use is in
    /// `layers`): a figure of one layer, never a sum of figures of different ones. `None`
    /// when every layer is unlimited.
    pub limit: Option<f64>,
    pub remaining: Option<f64>,
    pub binding_layer: Option<LimitLayer>,
    pub layers: Vec<LayerUsage>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub view: ResourcePanelView,
    pub resource_group: Option<String>,
    pub slots: Vec<SlotUsage>,
}

fn layer(layer: LimitLayer, limit: Option<f64>, used: f64) -> LayerUsage {
    LayerUsage { layer, limit, used, remaining: limit.map(|l| (l - used).max(0.0)) }
}

/// The strictest-limit rule for one slot: the layer that leaves the least binds, and its
/// limit and what it leaves are the slot's. Nothing remains below zero; a layer over its
/// limit binds by how far it is over.
pub fn strictest(slot: &str, used: f64, layers: Vec<LayerUsage>) -> SlotUsage {
    let binding = layers
        .iter()
        .filter_map(|l| l.limit.map(|limit| (l.layer, limit, limit - l.used)))
        .min_by(|a, b| a.2.total_cmp(&b.2));
    SlotUsage {
        slot: slot.to_owned(),
        used,
        limit: binding.map(|(_, limit, _)| limit),
        remaining: binding.map(|(_, _, r)| r.max(0.0)),
        binding_layer: binding.map(|(l, _, _)| l),
        layers,
    }
}

/// The RESOURCE_GROUP layer: the group's capacity against what everyone holds in it.
fn group_layer(capacity: f64, used: f64) -> LayerUsage {
    layer(LimitLayer::ResourceGroup, Some(capacity), used)
}

/// A slot of TOTAL_IN_RESOURCE_GROUP: the group's own figures. Its capacity is the limit,
/// even when it is over-committed (agents drained or shrunk under running sessions).
pub fn group_figures(slot: &str, capacity: f64, used: f64) -> SlotUsage {
    strictest(slot, used, vec![group_layer(capacity, used)])
}

/// The resource panel of `view` for the viewer in a project. `resource_group` defaults to
/// the project's first allowed group; a project the viewer cannot see, or a group the
/// project may not use, is `NOT_FOUND`.
pub async fn resource_panel(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    project_id: Uuid,
    view: ResourcePanelView,
    resource_group: Option<&str>,
) -> DomainResult<Panel> {
    let project = visibility::visible_project(db, viewer, project_id).await?;
    let allowed: Vec<String> =
        catalog::project_resource_groups(db, project.id).await?.into_iter().map(|g| g.name).collect();
    let group = match resource_group {
        Some(g) if allowed.iter().any(|a| a == g) => Some(g.to_owned()),
        Some(_) => return Err(DomainError::NotFound("resource group")),
        None if view == ResourcePanelView::MyTotal => None,
        None => Some(allowed.first().cloned().ok_or(DomainError::NotFound("resource group"))?),
    };

    // Capacity of the alive, schedulable agents of the group (or of every allowed group,
    // for the slots MY_TOTAL lists).
    let scope: Vec<String> = group.iter().cloned().collect::<Vec<_>>();
    let scope = if scope.is_empty() { allowed.clone() } else { scope };
    let agents = catalog::schedulable_agents(db, Some(&scope)).await?;
    let capacity = agents.iter().fold(ResourceSlots::new(), |acc, a| acc.add(&a.capacity));

    let mut holders = vec![
        Holder::Owner(viewer.user_id),
        Holder::Keypair(viewer.keypair_id),
        Holder::Project(project.id),
        Holder::Domain(project.domain_id),
    ];
    if let Some(g) = &group {
        holders.push(Holder::OwnerInGroup(viewer.user_id, g.clone()));
        holders.push(Holder::ResourceGroup(g.clone()));
    }
    let used = occupancy::occupied(db, &holders).await?;
    let empty = ResourceSlots::new();
    let (mine, keypair_used, project_used, domain_used) = (&used[0], &used[1], &used[2], &used[3]);
    let (mine_in_group, group_used) = (used.get(4).unwrap_or(&empty), used.get(5).unwrap_or(&empty));

    let policy = keypair_resource_policy::Entity::find_by_id(viewer.resource_policy.clone()).one(db).await?;
    let keypair_limit =
        policy.map(|p| ResourceSlots::from_json(&p.total_resource_slots)).transpose()?.unwrap_or_default();
    let project_limit = ResourceSlots::from_json(&project.total_resource_slots)?;
    let domain_limit = domain::Entity::find_by_id(project.domain_id)
        .one(db)
        .await?
        .map(|d| ResourceSlots::from_json(&d.total_resource_slots))
        .transpose()?
        .unwrap_or_default();

    // Every slot the group serves, then any other in use, in the catalogue's order.
    let mut names: BTreeSet<String> = capacity.slot_names().map(str::to_owned).collect();
    names.extend(mine.slot_names().map(str::to_owned));
    let order: Vec<String> = slot_type::Entity::find()
        .order_by_asc(slot_type::Column::Position)
        .all(db)
        .await?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut slots: Vec<String> = order.iter().filter(|s| names.contains(*s)).cloned().collect();
    slots.extend(names.into_iter().filter(|n| !order.contains(n)));

    let slots = slots
        .iter()
        .map(|slot| {
            let quota_layers = || {
                vec![
                    layer(LimitLayer::Keypair, keypair_limit.limit(slot), keypair_used.get(slot)),
                    layer(LimitLayer::Project, project_limit.limit(slot), project_used.get(slot)),
                    layer(LimitLayer::Domain, domain_limit.limit(slot), domain_used.get(slot)),
                ]
            };
            let in_group = || group_layer(capacity.get(slot), group_used.get(slot));
            match view {
                ResourcePanelView::MyTotal => strictest(slot, mine.get(slot), quota_layers()),
                ResourcePanelView::MyInResourceGroup => {
                    let mut layers = quota_layers();
                    layers.push(in_group());
                    strictest(slot, mine_in_group.get(slot), layers)
                }
                ResourcePanelView::TotalInResourceGroup => {
                    group_figures(slot, capacity.get(slot), group_used.get(slot))
                }
            }
        })
        .collect();
    Ok(Panel { view, resource_group: group, slots })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strictest_layer_binds() {
        let s = strictest(
            "cpu",
            3.0,
            vec![
                layer(LimitLayer::Keypair, Some(16.0), 3.0),
                layer(LimitLayer::Project, None, 10.0),
                layer(LimitLayer::Domain, Some(48.0), 40.0),
            ],
        );
        assert_eq!((s.remaining, s.binding_layer, s.limit), (Some(8.0), Some(LimitLayer::Domain), Some(48.0)));
    }

    /// With a second keypair, the user's own use (all keypairs) is not the keypair layer's:
    /// the limit shown is the keypair's, not that use plus what the keypair leaves.
    #[test]
    fn the_limit_is_the_binding_layers_own() {
        let s = strictest(
            "cpu",
            7.0,
            vec![layer(LimitLayer::Keypair, Some(16.0), 0.0), layer(LimitLayer::Domain, Some(48.0), 7.0)],
        );
        assert_eq!(
            (s.used, s.limit, s.remaining, s.binding_layer),
            (7.0, Some(16.0), Some(16.0), Some(LimitLayer::Keypair))
        );
    }

    #[test]
    fn unlimited_everywhere_has_no_limit() {
        let s =
            strictest("mem", 5.0, vec![layer(LimitLayer::Keypair, None, 5.0), layer(LimitLayer::Project, None, 5.0)]);
        assert_eq!((s.limit, s.remaining, s.binding_layer), (None, None, None));
    }

    #[test]
    fn an_over_committed_group_shows_its_capacity_as_the_limit() {
        let s = group_figures("cpu", 8.0, 10.0);
        assert_eq!(
            (s.used, s.limit, s.remaining, s.binding_layer),
            (10.0, Some(8.0), Some(0.0), Some(LimitLayer::ResourceGroup))
        );
        let s = group_figures("cpu", 32.0, 8.0);
        assert_eq!((s.limit, s.remaining), (Some(32.0), Some(24.0)));
    }

    #[test]
    fn over_a_limit_nothing_remains_and_the_limit_shows_it() {
        let s = strictest("cpu", 20.0, vec![layer(LimitLayer::Keypair, Some(16.0), 20.0)]);
        assert_eq!((s.remaining, s.limit), (Some(0.0), Some(16.0)));
        // Over one layer by 4 and under another by 2: the one over binds.
        let s = strictest(
            "cpu",
            20.0,
            vec![layer(LimitLayer::Keypair, Some(16.0), 20.0), layer(LimitLayer::Domain, Some(48.0), 46.0)],
        );
        assert_eq!((s.remaining, s.limit, s.binding_layer), (Some(0.0), Some(16.0), Some(LimitLayer::Keypair)));
    }
}
