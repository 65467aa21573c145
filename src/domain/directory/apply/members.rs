//! Writing the declared projects (with the resource groups each may use), users (with
//! their memberships) and keypairs.

use std::collections::{BTreeMap, BTreeSet};

use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set, Unchanged};
use uuid::Uuid;

use entity::{domain, keypair, project, project_member, resource_group_project, user};

use super::shown::{diff, diff_list, limits_shown, slots_diff};
use super::write::Writer;
use super::{Action, ApplyError, Declared};
use crate::domain::model::ids::stable_id;

impl Writer<'_> {
    /// Projects, and the resource groups each may use, in order. Links to groups the files
    /// do not declare (the local runtime's own group) stay, after the declared ones.
    pub(super) async fn projects(
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
    pub(super) async fn users(
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
}
