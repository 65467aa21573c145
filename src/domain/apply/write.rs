//! Applying a declaration inside one transaction: each kind compared with what is stored,
//! created or updated where it differs (each change recorded in the plan), then — with
//! `prune` — what is not declared deleted, unless live sessions use it. The same code runs
//! for a dry run, whose transaction is rolled back.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter, QueryOrder, Set, Unchanged,
};
use serde_json::Value;
use uuid::Uuid;

use entity::{
    agent, domain, engine, image, keypair, keypair_resource_policy, project, project_member, resource_group,
    resource_group_project, session, user,
};

use super::shown::{diff, diff_list, diff_opt, limits_shown, slots_diff, slots_shown, strings, type_names};
use super::{Action, ApplyError, Change, Declared, Plan};
use crate::domain::environments::LocalImage;
use crate::domain::expiry::Granted;
use crate::domain::ids::stable_id;
use crate::domain::slots::ResourceSlots;
use crate::domain::status::SessionStatus;
use crate::domain::{catalog, clock};

pub(super) struct Writer<'t> {
    pub(super) txn: &'t DatabaseTransaction,
    now: DateTime<Utc>,
    pub(super) plan: Plan,
    pub(super) refused: Vec<String>,
}

pub(super) async fn write(txn: &DatabaseTransaction, d: &Declared, prune: bool) -> Result<Plan, ApplyError> {
    let mut w = Writer { txn, now: clock::now(), plan: Plan::default(), refused: Vec::new() };
    let domain_ids = w.domains(d).await?;
    w.policies(d).await?;
    w.engines(d).await?;
    w.groups(d).await?;
    let project_ids = w.projects(d, &domain_ids).await?;
    w.users(d, &domain_ids, &project_ids).await?;
    w.agents(d).await?;
    w.images(d).await?;
    w.undeclared(d, prune).await?;
    if w.refused.is_empty() { Ok(w.plan) } else { Err(ApplyError::Refused(w.refused)) }
}

impl Writer<'_> {
    pub(super) fn change(&mut self, action: Action, kind: &'static str, name: &str, details: Vec<String>) {
        self.plan.changes.push(Change { action, kind, name: name.to_owned(), details });
    }

    async fn domains(&mut self, d: &Declared) -> Result<BTreeMap<String, Uuid>, ApplyError> {
        let stored: BTreeMap<String, domain::Model> =
            domain::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        let mut ids = BTreeMap::new();
        for (name, decl) in &d.domains {
            match stored.get(name) {
                None => {
                    let id = stable_id("domain", name);
                    domain::ActiveModel {
                        id: Set(id),
                        name: Set(name.clone()),
                        total_resource_slots: Set(decl.limits.to_json()),
                        created_at: Set(self.now),
                    }
                    .insert(self.txn)
                    .await?;
                    self.change(Action::Create, "domain", name, limits_shown(&decl.limits));
                    ids.insert(name.clone(), id);
                }
                Some(m) => {
                    let mut details = Vec::new();
                    slots_diff(&mut details, "limits", &m.total_resource_slots, &decl.limits)?;
                    if !details.is_empty() {
                        domain::ActiveModel {
                            id: Unchanged(m.id),
                            total_resource_slots: Set(decl.limits.to_json()),
                            ..Default::default()
                        }
                        .update(self.txn)
                        .await?;
                        self.change(Action::Update, "domain", name, details);
                    }
                    ids.insert(name.clone(), m.id);
                }
            }
        }
        Ok(ids)
    }

    /// Gives the live sessions of the keypairs under policy `name` what it now gives (its
    /// lifetime, its idle checks): a session's expiry follows its policy.
    async fn regrant(&mut self, name: &str, granted: Granted) -> Result<(), ApplyError> {
        use sea_orm::sea_query::{Expr, Query};
        let keypairs = Query::select()
            .column(keypair::Column::Id)
            .from(keypair::Entity)
            .and_where(keypair::Column::ResourcePolicy.eq(name))
            .take();
        session::Entity::update_many()
            .col_expr(session::Column::LifetimeSeconds, Expr::value(granted.lifetime))
            .col_expr(session::Column::Idle, Expr::value(granted.idle))
            .col_expr(session::Column::ExpiryWarnedFor, Expr::value(Option::<DateTime<Utc>>::None))
            .filter(session::Column::KeypairId.in_subquery(keypairs))
            .filter(session::Column::Status.is_not_in(SessionStatus::TERMINAL.iter().map(|s| s.as_str())))
            .exec(self.txn)
            .await?;
        Ok(())
    }

    async fn policies(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, keypair_resource_policy::Model> = keypair_resource_policy::Entity::find()
            .all(self.txn)
            .await?
            .into_iter()
            .map(|m| (m.name.clone(), m))
            .collect();
        for (name, p) in &d.policies {
            let row = keypair_resource_policy::ActiveModel {
                name: Set(name.clone()),
                total_resource_slots: Set(p.limits.to_json()),
                max_concurrent_sessions: Set(p.max_concurrent_sessions),
                max_pending_sessions: Set(p.max_pending_sessions),
                max_session_lifetime_seconds: Set(p.max_session_lifetime_seconds),
                max_extension_seconds: Set(p.max_extension_seconds),
                max_extensions: Set(p.max_extensions),
                idle_timeout_seconds: Set(p.idle_timeout_seconds),
                idle_utilization: Set(p.idle_utilization.to_json()),
                idle_counts_terminal: Set(p.idle_counts_terminal),
                created_at: Set(self.now),
            };
            let Some(m) = stored.get(name) else {
                row.insert(self.txn).await?;
                self.change(Action::Create, "keypair policy", name, limits_shown(&p.limits));
                continue;
            };
            let mut details = Vec::new();
            slots_diff(&mut details, "limits", &m.total_resource_slots, &p.limits)?;
            diff(&mut details, "max_concurrent_sessions", &m.max_concurrent_sessions, &p.max_concurrent_sessions);
            diff(&mut details, "max_pending_sessions", &m.max_pending_sessions, &p.max_pending_sessions);
            diff_opt(
                &mut details,
                "max_session_lifetime_seconds",
                &m.max_session_lifetime_seconds,
                &p.max_session_lifetime_seconds,
            );
            diff_opt(&mut details, "max_extension_seconds", &m.max_extension_seconds, &p.max_extension_seconds);
            diff_opt(&mut details, "max_extensions", &m.max_extensions, &p.max_extensions);
            diff_opt(&mut details, "idle_timeout_seconds", &m.idle_timeout_seconds, &p.idle_timeout_seconds);
            slots_diff(&mut details, "idle_utilization", &m.idle_utilization, &p.idle_utilization)?;
            diff(&mut details, "idle_counts_terminal", &m.idle_counts_terminal, &p.idle_counts_terminal);
            if !details.is_empty() {
                let updated = keypair_resource_policy::ActiveModel {
                    name: Unchanged(name.clone()),
                    created_at: Unchanged(m.created_at),
                    ..row
                }
                .update(self.txn)
                .await?;
                let granted = Granted::of(Some(&updated));
                if granted != Granted::of(Some(m)) {
                    self.regrant(name, granted).await?;
                }
                self.change(Action::Update, "keypair policy", name, details);
            }
        }
        Ok(())
    }

    /// Engines: their kind and settings (a token's file or variable, never the token).
    async fn engines(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, engine::Model> =
            engine::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        for (name, e) in &d.engines {
            let kind = e.settings.kind().as_str().to_owned();
            let settings = e.settings.to_json();
            let shown = |v: &Value| {
                v.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k} {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                    .collect::<Vec<_>>()
            };
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
                    details.extend(shown(&settings));
                    self.change(Action::Create, "engine", name, details);
                }
                Some(m) if m.kind != kind || m.settings != settings => {
                    let mut details = Vec::new();
                    diff(&mut details, "kind", &m.kind.as_str(), &kind.as_str());
                    if m.settings != settings {
                        details.push(format!(
                            "settings: {} → {}",
                            shown(&m.settings).join(", "),
                            shown(&settings).join(", ")
                        ));
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

    async fn groups(&mut self, d: &Declared) -> Result<(), ApplyError> {
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

    /// Projects, and the resource groups each may use, in order. Links to groups the files
    /// do not declare (the local runtime's own group) stay, after the declared ones.
    async fn projects(
        &mut self,
        d: &Declared,
        domain_ids: &BTreeMap<String, Uuid>,
    ) -> Result<BTreeMap<String, Uuid>, ApplyError> {
        let domain_names: BTreeMap<Uuid, String> =
            domain::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.id, m.name)).collect();
        let stored: BTreeMap<String, project::Model> = project::Entity::find()
            .all(self.txn)
            .await?
            .into_iter()
            .filter_map(|m| domain_names.get(&m.domain_id).map(|dn| (format!("{dn}/{}", m.name), m)))
            .collect();
        let links = resource_group_project::Entity::find()
            .order_by_asc(resource_group_project::Column::Position)
            .order_by_asc(resource_group_project::Column::ResourceGroup)
            .all(self.txn)
            .await?;
        let mut ids = BTreeMap::new();
        for (key, p) in &d.projects {
            let Some(&domain_id) = domain_ids.get(&p.domain) else { continue };
            let (id, mut details, created) = match stored.get(key) {
                None => {
                    let id = stable_id("project", key);
                    project::ActiveModel {
                        id: Set(id),
                        domain_id: Set(domain_id),
                        name: Set(p.name.clone()),
                        total_resource_slots: Set(p.limits.to_json()),
                        created_at: Set(self.now),
                    }
                    .insert(self.txn)
                    .await?;
                    (id, limits_shown(&p.limits), true)
                }
                Some(m) => {
                    let mut details = Vec::new();
                    slots_diff(&mut details, "limits", &m.total_resource_slots, &p.limits)?;
                    if !details.is_empty() {
                        project::ActiveModel {
                            id: Unchanged(m.id),
                            total_resource_slots: Set(p.limits.to_json()),
                            ..Default::default()
                        }
                        .update(self.txn)
                        .await?;
                    }
                    (m.id, details, false)
                }
            };
            ids.insert(key.clone(), id);
            let current: Vec<String> =
                links.iter().filter(|l| l.project_id == id).map(|l| l.resource_group.clone()).collect();
            let declared_now: Vec<String> = current.iter().filter(|g| d.groups.contains_key(*g)).cloned().collect();
            if declared_now != p.resource_groups {
                let others = current.iter().filter(|g| !d.groups.contains_key(*g));
                let order: Vec<String> = p.resource_groups.iter().chain(others).cloned().collect();
                resource_group_project::Entity::delete_many()
                    .filter(resource_group_project::Column::ProjectId.eq(id))
                    .exec(self.txn)
                    .await?;
                let rows = order.iter().enumerate().map(|(i, g)| resource_group_project::ActiveModel {
                    resource_group: Set(g.clone()),
                    project_id: Set(id),
                    position: Set(i32::try_from(i).unwrap_or(i32::MAX)),
                });
                resource_group_project::Entity::insert_many(rows).exec_without_returning(self.txn).await?;
                if !created {
                    diff_list(&mut details, "resource_groups", &declared_now, &p.resource_groups);
                } else if !p.resource_groups.is_empty() {
                    details.push(format!("resource_groups: {}", p.resource_groups.join(", ")));
                }
            }
            match (created, details.is_empty()) {
                (true, _) => self.change(Action::Create, "project", key, details),
                (false, false) => self.change(Action::Update, "project", key, details),
                (false, true) => {}
            }
        }
        Ok(ids)
    }

    /// Users, their memberships (of declared projects) and their declared keypairs.
    async fn users(
        &mut self,
        d: &Declared,
        domain_ids: &BTreeMap<String, Uuid>,
        project_ids: &BTreeMap<String, Uuid>,
    ) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, user::Model> =
            user::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.email.to_lowercase(), m)).collect();
        // Each user's memberships, grouped once: looking them up per user stays linear.
        let mut members: BTreeMap<Uuid, Vec<Uuid>> = BTreeMap::new();
        for m in project_member::Entity::find().all(self.txn).await? {
            members.entry(m.user_id).or_default().push(m.project_id);
        }
        let no_members = Vec::new();
        let declared_projects: BTreeMap<Uuid, &str> = project_ids.iter().map(|(k, id)| (*id, k.as_str())).collect();
        let project_domains: BTreeMap<Uuid, Uuid> =
            project::Entity::find().all(self.txn).await?.into_iter().map(|p| (p.id, p.domain_id)).collect();
        let keypairs: BTreeMap<String, keypair::Model> =
            keypair::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.access_key.clone(), m)).collect();
        for (email, u) in &d.users {
            let Some(&domain_id) = domain_ids.get(&u.domain) else { continue };
            let (id, mut details, created) = match stored.get(email) {
                None => {
                    let id = stable_id("user", email);
                    user::ActiveModel {
                        id: Set(id),
                        domain_id: Set(domain_id),
                        email: Set(email.clone()),
                        full_name: Set(u.full_name.clone()),
                        role: Set(u.role.as_str().to_owned()),
                        created_at: Set(self.now),
                    }
                    .insert(self.txn)
                    .await?;
                    (id, vec![format!("{} in {}", u.role.as_str(), u.domain)], true)
                }
                Some(m) => {
                    let mut details = Vec::new();
                    let old_domain = domain_ids.iter().find(|(_, id)| **id == m.domain_id).map(|(n, _)| n.as_str());
                    diff(&mut details, "domain", &old_domain.unwrap_or("(undeclared)"), &u.domain.as_str());
                    diff(&mut details, "name", &m.full_name, &u.full_name);
                    diff(&mut details, "role", &m.role.as_str(), &u.role.as_str());
                    if !details.is_empty() {
                        user::ActiveModel {
                            id: Unchanged(m.id),
                            domain_id: Set(domain_id),
                            full_name: Set(u.full_name.clone()),
                            role: Set(u.role.as_str().to_owned()),
                            ..Default::default()
                        }
                        .update(self.txn)
                        .await?;
                    }
                    (m.id, details, false)
                }
            };
            let want: BTreeSet<String> = u.projects.iter().map(|p| format!("{}/{p}", u.domain)).collect();
            let of_user = members.get(&id).unwrap_or(&no_members);
            let have: BTreeSet<String> =
                of_user.iter().filter_map(|p| declared_projects.get(p).map(|k| (*k).to_owned())).collect();
            // A user belongs to projects of its own domain only: memberships of another
            // domain's projects that the files do not declare (after a move) go too.
            let elsewhere: Vec<Uuid> = of_user
                .iter()
                .filter(|p| !declared_projects.contains_key(p))
                .filter(|p| project_domains.get(p).is_some_and(|d| *d != domain_id))
                .copied()
                .collect();
            if !elsewhere.is_empty() {
                project_member::Entity::delete_many()
                    .filter(project_member::Column::UserId.eq(id))
                    .filter(project_member::Column::ProjectId.is_in(elsewhere.clone()))
                    .exec(self.txn)
                    .await?;
                details.push(format!("left {} project(s) of another domain", elsewhere.len()));
            }
            for key in want.difference(&have) {
                let Some(&project_id) = project_ids.get(key) else { continue };
                project_member::ActiveModel {
                    project_id: Set(project_id),
                    user_id: Set(id),
                    created_at: Set(self.now),
                }
                .insert(self.txn)
                .await?;
            }
            let gone: Vec<Uuid> = have.difference(&want).filter_map(|k| project_ids.get(k).copied()).collect();
            if !gone.is_empty() {
                project_member::Entity::delete_many()
                    .filter(project_member::Column::UserId.eq(id))
                    .filter(project_member::Column::ProjectId.is_in(gone))
                    .exec(self.txn)
                    .await?;
            }
            if want != have {
                let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
                if created {
                    details.push(format!("projects: {}", list(&want)));
                } else {
                    details.push(format!("projects: [{}] → [{}]", list(&have), list(&want)));
                }
            }
            let action = if created { Action::Create } else { Action::Update };
            if created || !details.is_empty() {
                self.change(action, "user", email, details);
            }
            for k in &u.keypairs {
                self.keypair(k, id, email, keypairs.get(&k.access_key)).await?;
            }
        }
        Ok(())
    }

    async fn keypair(
        &mut self,
        k: &super::KeypairDecl,
        user_id: Uuid,
        email: &str,
        stored: Option<&keypair::Model>,
    ) -> Result<(), ApplyError> {
        let taken = keypair::Entity::find()
            .filter(keypair::Column::SecretHash.eq(k.secret_hash.clone()))
            .filter(keypair::Column::AccessKey.ne(k.access_key.clone()))
            .one(self.txn)
            .await?;
        if let Some(other) = taken {
            self.refused.push(format!(
                "keypair {}: its secret is the secret of keypair {} already; every keypair needs its own",
                k.access_key, other.access_key
            ));
            return Ok(());
        }
        let Some(m) = stored else {
            keypair::ActiveModel {
                id: Set(stable_id("keypair", &k.access_key)),
                user_id: Set(user_id),
                access_key: Set(k.access_key.clone()),
                secret_hash: Set(k.secret_hash.clone()),
                resource_policy: Set(k.policy.clone()),
                is_active: Set(true),
                created_at: Set(self.now),
            }
            .insert(self.txn)
            .await?;
            self.change(Action::Create, "keypair", &k.access_key, vec![format!("of {email}, policy {}", k.policy)]);
            return Ok(());
        };
        if m.user_id != user_id {
            self.refused.push(format!("keypair {}: it belongs to another user, not {email}", k.access_key));
            return Ok(());
        }
        let mut details = Vec::new();
        diff(&mut details, "policy", &m.resource_policy, &k.policy);
        if m.secret_hash != k.secret_hash {
            details.push("secret replaced".to_owned());
        }
        if !details.is_empty() {
            keypair::ActiveModel {
                id: Unchanged(m.id),
                resource_policy: Set(k.policy.clone()),
                secret_hash: Set(k.secret_hash.clone()),
                ..Default::default()
            }
            .update(self.txn)
            .await?;
            self.change(Action::Update, "keypair", &k.access_key, details);
        }
        Ok(())
    }

    async fn agents(&mut self, d: &Declared) -> Result<(), ApplyError> {
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

    async fn images(&mut self, d: &Declared) -> Result<(), ApplyError> {
        let stored: BTreeMap<String, image::Model> =
            image::Entity::find().all(self.txn).await?.into_iter().map(|m| (m.name.clone(), m)).collect();
        for (name, i) in &d.images {
            let types = type_names(&i.types);
            let local = i.local.as_ref().map(|l| serde_json::to_value(l).unwrap_or(Value::Null));
            let row = image::ActiveModel {
                name: Set(name.clone()),
                supported_types: Set(Value::from(types.clone())),
                minimum_slots: Set(i.minimum.to_json()),
                apps: Set(Value::from(i.apps.clone())),
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
            diff_list(&mut details, "apps", &strings(&m.apps), &i.apps);
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
