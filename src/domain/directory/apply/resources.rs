//! Writing the declared engines and resource groups (before projects, which name groups),
//! and the agents and images (after).

use std::collections::BTreeMap;

use sea_orm::{ActiveModelTrait, EntityTrait, Set, Unchanged};
use serde_json::Value;

use entity::{agent, engine, image, registry, resource_group, storage};

use super::shown::{diff, diff_list, diff_opt, settings_shown, slots_diff, slots_shown, strings, type_names};
use super::write::Writer;
use super::{Action, ApplyError, Declared};
use crate::domain::directory::catalog;
use crate::domain::model::slots::ResourceSlots;
use crate::domain::runtime::environments::LocalImage;

/// Writes declared items (`name → settings`) to a table of `name`, `settings` (JSON) and
/// `created_at` (registries, storage): each created, changed, or left as it is.
macro_rules! named_settings {
    ($w:expr, $declared:expr, $table:ident, $kind:literal) => {{
        let stored: BTreeMap<String, $table::Model> =
            $table::Entity::find().all($w.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        for (name, item) in $declared {
            let settings = serde_json::to_value(item).expect(concat!("a ", $kind, " serialises"));
            match stored.get(name) {
                None => {
                    $table::ActiveModel {
                        name: Set(name.clone()),
                        settings: Set(settings.clone()),
                        created_at: Set($w.now),
                    }
                    .insert($w.txn)
                    .await?;
                    $w.change(Action::Create, $kind, name, vec![settings_shown(&settings).join(", ")]);
                }
                Some(m) if m.settings != settings => {
                    let details = vec![settings_change(&m.settings, &settings)];
                    $table::ActiveModel {
                        name: Unchanged(name.clone()),
                        settings: Set(settings),
                        created_at: Unchanged(m.created_at),
                    }
                    .update($w.txn)
                    .await?;
                    $w.change(Action::Update, $kind, name, details);
                }
                Some(_) => {}
            }
        }
    }};
}

impl Writer<'_> {
    /// Engines: their kind and settings (a token's file or variable, never the token).
    pub(super) async fn engines(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, engine::Model> =
            engine::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        for (name, e) in &d.engines {
            let kind = e.settings.kind().as_str().to_owned();
            let settings = e.settings.to_json();
            match stored.get(name) {
                None => {
                    engine::ActiveModel {
                        name: Set(name.clone()),
                        kind: Set(kind.clone()),
                        settings: Set(settings.clone()),
                        created_at: Set(self.now),
                    }
                    .insert(self.txn)
                    .await?;
                    let mut details = vec![format!("kind {kind}")];
                    details.extend(settings_shown(&settings));
                    self.change(Action::Create, "engine", name, details);
                }
                Some(m) if m.kind != kind || m.settings != settings => {
                    let mut details = Vec::new();
                    diff(&mut details, "kind", &m.kind.as_str(), &kind.as_str());
                    if m.settings != settings {
                        details.push(settings_change(&m.settings, &settings));
                    }
                    engine::ActiveModel {
                        name: Unchanged(name.clone()),
                        kind: Set(kind),
                        settings: Set(settings),
                        created_at: Unchanged(m.created_at),
                    }
                    .update(self.txn)
                    .await?;
                    self.change(Action::Update, "engine", name, details);
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Registries: where each is and the files of its credentials (never a credential).
    pub(super) async fn registries(&mut self, d: &Declared) -> Result<(), ApplyError> {
        named_settings!(self, &d.registries, registry, "registry");
        Ok(())
    }

    /// Storage: where folders are made, their default quota, the projects it is open to.
    pub(super) async fn storage(&mut self, d: &Declared) -> Result<(), ApplyError> {
        // A storage's folders are directories under its path: it moves only while it has none.
        for st in storage::Entity::find().all(self.txn).await? {
            let was: Option<crate::domain::storage::Storage> = serde_json::from_value(st.settings.clone()).ok();
            let moved = d.storage.get(&st.name).is_some_and(|now| was.is_none_or(|was| was.path != now.path));
            if moved {
                use crate::domain::storage::folders::{Holder, held_by};
                let folders = held_by(self.txn, Holder::Storage(st.name.clone())).await?;
                if folders > 0 {
                    self.refused.push(format!(
                        "storage {}: its path cannot change while {folders} folder(s) are made on it",
                        st.name
                    ));
                }
            }
        }
        named_settings!(self, &d.storage, storage, "storage");
        Ok(())
    }

    pub(super) async fn groups(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, resource_group::Model> =
            resource_group::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        for (name, g) in &d.groups {
            let types = type_names(&g.session_types);
            let row = resource_group::ActiveModel {
                name: Set(name.clone()),
                description: Set(g.description.clone()),
                scheduler: Set(g.scheduler.as_str().to_owned()),
                pending_timeout_seconds: Set(g.pending_timeout_seconds),
                allowed_session_types: Set(Value::from(types.clone())),
                engine: Set(g.engine.clone()),
                created_at: Set(self.now),
            };
            let Some(m) = stored.get(name) else {
                row.insert(self.txn).await?;
                self.change(Action::Create, "resource group", name, Vec::new());
                continue;
            };
            let mut details = Vec::new();
            diff(&mut details, "description", &m.description, &g.description);
            diff(&mut details, "scheduler", &m.scheduler.as_str(), &g.scheduler.as_str());
            diff_opt(&mut details, "pending_timeout_seconds", &m.pending_timeout_seconds, &g.pending_timeout_seconds);
            diff_list(&mut details, "session_types", &strings(&m.allowed_session_types), &types);
            diff_opt(&mut details, "engine", &m.engine, &g.engine);
            if !details.is_empty() {
                resource_group::ActiveModel {
                    name: Unchanged(name.clone()),
                    created_at: Unchanged(m.created_at),
                    ..row
                }
                .update(self.txn)
                .await?;
                self.change(Action::Update, "resource group", name, details);
            }
        }
        Ok(())
    }

    pub(super) async fn agents(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, agent::Model> =
            agent::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.id.clone(), m)).collect();
        for (id, a) in &d.agents {
            let slots = match &a.slots {
                Some(s) => s.clone(),
                None if stored.contains_key(id) => ResourceSlots::new(),
                None => ResourceSlots::from_json(&crate::domain::runtime::local::machine::capacity())?,
            };
            let Some(m) = stored.get(id) else {
                agent::ActiveModel {
                    id: Set(id.clone()),
                    resource_group: Set(a.resource_group.clone()),
                    available_slots: Set(slots.to_json()),
                    status: Set(catalog::ALIVE.to_owned()),
                    schedulable: Set(a.schedulable),
                    pulled_images: Set(Value::Array(Vec::new())),
                    created_at: Set(self.now),
                    last_heartbeat_at: Set(self.now),
                }
                .insert(self.txn)
                .await?;
                let mut details = vec![format!("in {}", a.resource_group)];
                details.extend(slots_shown("slots", &slots));
                self.change(Action::Create, "agent", id, details);
                continue;
            };
            // This machine's capacity is the server's to keep: it detects it at each start.
            let slots = if a.slots.is_some() { slots } else { ResourceSlots::from_json(&m.available_slots)? };
            let mut details = Vec::new();
            diff(&mut details, "resource_group", &m.resource_group, &a.resource_group);
            slots_diff(&mut details, "slots", &m.available_slots, &slots)?;
            diff(&mut details, "schedulable", &m.schedulable, &a.schedulable);
            if !details.is_empty() {
                agent::ActiveModel {
                    id: Unchanged(id.clone()),
                    resource_group: Set(a.resource_group.clone()),
                    available_slots: Set(slots.to_json()),
                    schedulable: Set(a.schedulable),
                    ..Default::default()
                }
                .update(self.txn)
                .await?;
                self.change(Action::Update, "agent", id, details);
            }
        }
        Ok(())
    }

    pub(super) async fn images(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, image::Model> =
            image::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        for (name, i) in &d.images {
            let types = type_names(&i.types);
            let local = i.local.as_ref().map(|l| serde_json::to_value(l).unwrap_or(Value::Null));
            let row = image::ActiveModel {
                name: Set(name.clone()),
                supported_types: Set(Value::from(types.clone())),
                minimum_slots: Set(i.minimum.to_json()),
                apps: Set(crate::domain::apps::stored(&i.apps)),
                local_environment: Set(local.clone()),
                created_at: Set(self.now),
            };
            let Some(m) = stored.get(name) else {
                row.insert(self.txn).await?;
                self.change(Action::Create, "image", name, vec![format!("types: {}", types.join(", "))]);
                continue;
            };
            let mut details = Vec::new();
            diff_list(&mut details, "types", &strings(&m.supported_types), &types);
            slots_diff(&mut details, "minimum", &m.minimum_slots, &i.minimum)?;
            let (was, now): (Vec<String>, Vec<String>) = (
                crate::domain::apps::of_image(m).iter().map(crate::domain::apps::AppSpec::shown).collect(),
                i.apps.iter().map(|a| a.spec().shown()).collect(),
            );
            diff_list(&mut details, "apps", &was, &now);
            if was == now && m.apps != crate::domain::apps::stored(&i.apps) {
                details.push("apps' commands changed".to_owned());
            }
            let stored_local: Option<LocalImage> =
                m.local_environment.as_ref().and_then(|v| serde_json::from_value(v.clone()).ok());
            if stored_local != i.local {
                details.push("local environment changed".to_owned());
            }
            if !details.is_empty() {
                image::ActiveModel { name: Unchanged(name.clone()), created_at: Unchanged(m.created_at), ..row }
                    .update(self.txn)
                    .await?;
                self.change(Action::Update, "image", name, details);
            }
        }
        Ok(())
    }
}

/// A change of an engine's or a registry's settings, as the plan says it.
fn settings_change(was: &Value, now: &Value) -> String {
    format!("settings: {} → {}", settings_shown(was).join(", "), settings_shown(now).join(", "))
}
