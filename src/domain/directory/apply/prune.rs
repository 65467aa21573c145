//! Pruning: what is stored but not declared is listed, or with `prune` deleted unless live
//! sessions use it (its row locked first), after everything declared was written.

use std::collections::BTreeMap;

use sea_orm::{ColumnTrait, Condition, DatabaseTransaction, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect};
use uuid::Uuid;

use entity::{
    agent, domain, engine, image, keypair, keypair_resource_policy, project, registry, resource_group, session,
    storage, user,
};

use super::write::Writer;
use super::{Action, ApplyError, Declared};
use crate::domain::model::status::SessionStatus;

impl Writer<'_> {
    /// What is stored but not declared: listed, or with `prune` deleted unless live sessions
    /// use it. Finished sessions that refer to it go with it, and the plan says how many.
    pub(super) async fn undeclared(&mut self, d: &Declared, prune: bool) -> Result<(), ApplyError> {
        use session::Column as S;
        let mut doomed: Vec<(&'static str, String, Condition, Deletion)> = Vec::new();
        // A Slurm group's agents are its nodes, discovered by its engine: never declared.
        let discovered = |group: &str| {
            d.groups
                .get(group)
                .and_then(|g| g.engine.as_ref())
                .and_then(|e| d.engines.get(e))
                .is_some_and(|e| e.settings.kind() == crate::domain::runtime::engines::EngineKind::Slurm)
        };
        for a in agent::Entity::find().all(self.txn).await? {
            if !d.agents.contains_key(&a.id) && !discovered(&a.resource_group) {
                doomed.push(("agent", a.id.clone(), S::AgentId.eq(a.id.clone()).into(), Deletion::Agent(a.id)));
            }
        }
        for i in image::Entity::find().all(self.txn).await? {
            if !d.images.contains_key(&i.name) {
                doomed.push(("image", i.name.clone(), S::Image.eq(i.name.clone()).into(), Deletion::Image(i.name)));
            }
        }
        for u in user::Entity::find().all(self.txn).await? {
            if !d.users.contains_key(&u.email.to_lowercase()) {
                doomed.push(("user", u.email.clone(), S::OwnerId.eq(u.id).into(), Deletion::User(u.id)));
            }
        }
        let domains: BTreeMap<Uuid, String> =
            domain::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.id, m.name)).collect();
        for p in project::Entity::find().all(self.txn).await? {
            let key = format!("{}/{}", domains.get(&p.domain_id).map_or("?", String::as_str), p.name);
            if !d.projects.contains_key(&key) {
                doomed.push(("project", key, S::ProjectId.eq(p.id).into(), Deletion::Project(p.id)));
            }
        }
        for g in resource_group::Entity::find().all(self.txn).await? {
            if !d.groups.contains_key(&g.name) {
                let cond = S::ResourceGroup.eq(g.name.clone()).into();
                doomed.push(("resource group", g.name.clone(), cond, Deletion::Group(g.name)));
            }
        }
        for p in keypair_resource_policy::Entity::find().all(self.txn).await? {
            if !d.policies.contains_key(&p.name) {
                // No session refers to a policy: its keypairs are counted when it is deleted,
                // after the users deleted before it took theirs with them.
                let cond = S::Id.is_null().into();
                doomed.push(("keypair policy", p.name.clone(), cond, Deletion::Policy(p.name)));
            }
        }
        let groups = resource_group::Entity::find().all(self.txn).await?;
        for e in engine::Entity::find().all(self.txn).await? {
            if !d.engines.contains_key(&e.name) {
                // Its groups' sessions use it.
                let runs = groups.iter().filter(|g| g.engine.as_ref() == Some(&e.name)).map(|g| g.name.clone());
                let cond = S::ResourceGroup.is_in(runs.collect::<Vec<_>>()).into();
                doomed.push(("engine", e.name.clone(), cond, Deletion::Engine(e.name)));
            }
        }
        for r in registry::Entity::find().all(self.txn).await? {
            if !d.registries.contains_key(&r.name) {
                // Sessions name images, not registries: an image still naming it is not
                // declared either (the file refers to no undeclared registry).
                doomed.push(("registry", r.name.clone(), S::Id.is_null().into(), Deletion::Registry(r.name)));
            }
        }
        for st in storage::Entity::find().all(self.txn).await? {
            if !d.storage.contains_key(&st.name) {
                // Refused while folders are made on it (below).
                doomed.push(("storage", st.name.clone(), S::Id.is_null().into(), Deletion::Storage(st.name)));
            }
        }
        for (id, name) in &domains {
            if !d.domains.contains_key(name) {
                doomed.push(("domain", name.clone(), S::DomainId.eq(*id).into(), Deletion::Domain(*id)));
            }
        }
        for (kind, name, uses, deletion) in doomed {
            if !prune {
                self.plan.undeclared.push(format!("{kind} {name}"));
                continue;
            }
            // Locked first: on PostgreSQL a launch or a placement that would refer to it now
            // waits for this transaction (and then fails), so what is counted stays true.
            deletion.lock(self.txn).await?;
            if let Deletion::Policy(policy) = &deletion {
                let keypairs = keypair::Entity::find()
                    .filter(keypair::Column::ResourcePolicy.eq(policy.clone()))
                    .count(self.txn)
                    .await?;
                if keypairs > 0 {
                    self.refused.push(format!(
                        "keypair policy {name}: {keypairs} keypair(s) still have it; give them another policy first"
                    ));
                    continue;
                }
            }
            // Folders hold data: what they belong to goes once they have gone.
            use crate::domain::storage::folders::{Holder, held_by};
            let holder = match &deletion {
                Deletion::Storage(storage) => Some(Holder::Storage(storage.clone())),
                Deletion::User(id) => Some(Holder::User(*id)),
                Deletion::Project(id) => Some(Holder::Project(*id)),
                _ => None,
            };
            if let Some(holder) = holder {
                let folders = held_by(self.txn, holder).await?;
                if folders > 0 {
                    let whose = if kind == "storage" { "are made on it" } else { "are its" };
                    self.refused.push(format!("{kind} {name}: {folders} folder(s) {whose}; delete them first"));
                    continue;
                }
            }
            let live_statuses = SessionStatus::non_terminal().map(|s| s.as_str());
            let live = session::Entity::find()
                .filter(uses.clone())
                .filter(S::Status.is_in(live_statuses))
                .count(self.txn)
                .await?;
            if live > 0 {
                self.refused.push(format!("{kind} {name}: {live} live session(s) use it"));
                continue;
            }
            let finished = session::Entity::find().filter(uses).count(self.txn).await?;
            deletion.run(self.txn).await?;
            let details =
                if finished > 0 { vec![format!("with the records of {finished} finished session(s)")] } else { vec![] };
            self.change(Action::Delete, kind, &name, details);
        }
        Ok(())
    }
}

/// One undeclared object to delete; what refers to it goes with it (the schema cascades).
enum Deletion {
    Agent(String),
    Image(String),
    User(Uuid),
    Project(Uuid),
    Group(String),
    Policy(String),
    Domain(Uuid),
    Engine(String),
    Registry(String),
    Storage(String),
}

impl Deletion {
    /// Locks its row (`FOR UPDATE`; SQLite's write transaction holds the whole database).
    async fn lock(&self, txn: &DatabaseTransaction) -> Result<(), sea_orm::DbErr> {
        match self {
            Self::Agent(id) => agent::Entity::find_by_id(id.clone()).lock_exclusive().one(txn).await.map(drop),
            Self::Image(name) => image::Entity::find_by_id(name.clone()).lock_exclusive().one(txn).await.map(drop),
            Self::User(id) => user::Entity::find_by_id(*id).lock_exclusive().one(txn).await.map(drop),
            Self::Project(id) => project::Entity::find_by_id(*id).lock_exclusive().one(txn).await.map(drop),
            Self::Group(name) => {
                resource_group::Entity::find_by_id(name.clone()).lock_exclusive().one(txn).await.map(drop)
            }
            Self::Policy(name) => {
                keypair_resource_policy::Entity::find_by_id(name.clone()).lock_exclusive().one(txn).await.map(drop)
            }
            Self::Domain(id) => domain::Entity::find_by_id(*id).lock_exclusive().one(txn).await.map(drop),
            Self::Engine(name) => engine::Entity::find_by_id(name.clone()).lock_exclusive().one(txn).await.map(drop),
            Self::Registry(name) => {
                registry::Entity::find_by_id(name.clone()).lock_exclusive().one(txn).await.map(drop)
            }
            Self::Storage(name) => storage::Entity::find_by_id(name.clone()).lock_exclusive().one(txn).await.map(drop),
        }
    }

    async fn run(self, txn: &DatabaseTransaction) -> Result<(), sea_orm::DbErr> {
        match self {
            Self::Agent(id) => agent::Entity::delete_by_id(id).exec(txn).await?,
            Self::Image(name) => image::Entity::delete_by_id(name).exec(txn).await?,
            Self::User(id) => {
                // Its access to the project folders of others goes with it.
                entity::folder_access::Entity::delete_many()
                    .filter(entity::folder_access::Column::UserId.eq(id))
                    .exec(txn)
                    .await?;
                user::Entity::delete_by_id(id).exec(txn).await?
            }
            Self::Project(id) => project::Entity::delete_by_id(id).exec(txn).await?,
            Self::Group(name) => resource_group::Entity::delete_by_id(name).exec(txn).await?,
            Self::Policy(name) => keypair_resource_policy::Entity::delete_by_id(name).exec(txn).await?,
            Self::Domain(id) => domain::Entity::delete_by_id(id).exec(txn).await?,
            Self::Engine(name) => {
                // Groups kept that still name it run nothing from now on.
                resource_group::Entity::update_many()
                    .col_expr(resource_group::Column::Engine, sea_orm::sea_query::Expr::value(Option::<String>::None))
                    .filter(resource_group::Column::Engine.eq(name.clone()))
                    .exec(txn)
                    .await?;
                engine::Entity::delete_by_id(name).exec(txn).await?
            }
            Self::Registry(name) => registry::Entity::delete_by_id(name).exec(txn).await?,
            Self::Storage(name) => storage::Entity::delete_by_id(name).exec(txn).await?,
        };
        Ok(())
    }
}
