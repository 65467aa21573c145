//! Applying a declaration inside one transaction: each kind compared with what is stored,
//! created or updated where it differs (each change recorded in the plan), then — with
//! `prune` — what is not declared deleted, unless live sessions use it. The same code runs
//! for a dry run, whose transaction is rolled back.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseTransaction, EntityTrait, QueryFilter, QuerySelect, Set, Unchanged,
};
use uuid::Uuid;

use entity::{domain, keypair, keypair_resource_policy, session};

use super::shown::{diff, diff_opt, limits_shown, slots_diff};
use super::{Action, ApplyError, Change, Declared, Plan};
use crate::domain::lifecycle::history::{self, Entry};
use crate::domain::model::actor::Actor;
use crate::domain::model::clock;
use crate::domain::model::ids::stable_id;
use crate::domain::model::status::SessionStatus;
use crate::domain::reclaim::expiry::Granted;

pub(super) struct Writer<'t> {
    pub(super) txn: &'t DatabaseTransaction,
    pub(super) now: DateTime<Utc>,
    pub(super) plan: Plan,
    pub(super) refused: Vec<String>,
    /// Who makes the changes.
    pub(super) actor: &'t Actor,
}

pub(super) async fn write(
    txn: &'_ DatabaseTransaction,
    d: &Declared,
    prune: bool,
    actor: &'_ Actor,
) -> Result<Plan, ApplyError> {
    let mut w = Writer { txn, now: clock::now(), plan: Plan::default(), refused: Vec::new(), actor };
    let domain_ids = w.domains(d).await?;
    w.policies(d).await?;
    w.engines(d).await?;
    w.groups(d).await?;
    let project_ids = w.projects(d, &domain_ids).await?;
    w.users(d, &domain_ids, &project_ids).await?;
    w.agents(d).await?;
    w.registries(d).await?;
    w.storage(d).await?;
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
    /// lifetime, its idle checks): a session's expiry follows its policy. Each session it
    /// changes gets a line of history naming who made the change.
    async fn regrant(&mut self, name: &str, granted: Granted) -> Result<(), ApplyError> {
        use sea_orm::sea_query::{Expr, Query};
        let keypairs = Query::select()
            .column(keypair::Column::Id)
            .from(keypair::Entity)
            .and_where(keypair::Column::ResourcePolicy.eq(name))
            .take();
        let live: Vec<(Uuid, Option<i64>, Option<serde_json::Value>)> = session::Entity::find()
            .select_only()
            .columns([session::Column::Id, session::Column::LifetimeSeconds, session::Column::Idle])
            .filter(session::Column::KeypairId.in_subquery(keypairs))
            .filter(session::Column::Status.is_not_in(SessionStatus::TERMINAL.iter().map(|s| s.as_str())))
            .into_tuple()
            .all(self.txn)
            .await?;
        let changed: Vec<_> = live
            .into_iter()
            .filter(|(_, lifetime, idle)| *lifetime != granted.lifetime || *idle != granted.idle)
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        for ids in changed.chunks(1000) {
            session::Entity::update_many()
                .col_expr(session::Column::LifetimeSeconds, Expr::value(granted.lifetime))
                .col_expr(session::Column::Idle, Expr::value(granted.idle.clone()))
                .col_expr(session::Column::ExpiryWarnedFor, Expr::value(Option::<DateTime<Utc>>::None))
                .filter(session::Column::Id.is_in(ids.iter().map(|c| c.0)))
                .exec(self.txn)
                .await?;
        }
        let shown = |l: Option<i64>| l.map_or_else(|| "unlimited".to_owned(), |s| format!("{s} s"));
        let notes = changed
            .into_iter()
            .map(|(id, lifetime, idle)| {
                let mut what = Vec::new();
                if lifetime != granted.lifetime {
                    what.push(format!("lifetime {} → {}", shown(lifetime), shown(granted.lifetime)));
                }
                if idle != granted.idle {
                    what.push(if granted.idle.is_some() { "new idle checks" } else { "no idle checks" }.to_owned());
                }
                let message = format!("keypair policy `{name}` changed: {}", what.join(", "));
                Entry::note(id, "policy", message, self.actor.clone())
            })
            .collect();
        history::record(self.txn, notes, self.now).await?;
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
                max_priority: Set(p.max_priority),
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
            diff_opt(&mut details, "max_priority", &m.max_priority, &p.max_priority);
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
}
