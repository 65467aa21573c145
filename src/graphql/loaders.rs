//! Per-request DataLoaders for the relations of sessions (owner, project, resource group,
//! image, launch group, status transitions). Built for every request, so the cache never
//! outlives a request or crosses users.
//!
//! A list page does not rely on the loaders' batching window (timing-dependent: a slow
//! resolver splits a batch): [`prefetch_relations`] loads each selected relation of the
//! whole page in one statement first ([`crate::domain::sessions::related::load`], as the compiled list
//! path does, planned by the same [`session_relation`]), and the field resolvers then read
//! the cache. A page therefore costs a fixed number of statements whatever its size.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::Context;
use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use entity::{image, launch_group, project, resource_group, session_status_transition, user};

use super::people::{Project, User};
use crate::domain::live::Live;
use crate::domain::sessions::related::{self, Relation, Wanted};
use crate::domain::{DomainError, sessions::relations};

pub struct DbLoader {
    db: DatabaseConnection,
}

pub type Loaders = DataLoader<DbLoader, HashMapCache>;

/// Large enough for the biggest page (500 sessions): one statement per relation.
const MAX_BATCH: usize = 1000;

pub fn loaders(db: DatabaseConnection) -> Loaders {
    // No batching window: list pages prefetch (see above), so waiting only adds latency.
    DataLoader::with_cache(DbLoader { db }, tokio::spawn, HashMapCache::default())
        .max_batch_size(MAX_BATCH)
        .delay(std::time::Duration::ZERO)
}

/// The owners and projects of a page's sessions, loaded once for the page and handed to each
/// row, which then resolves them without a loader call.
#[derive(Default)]
pub struct Prefetched {
    owners: HashMap<Uuid, Arc<User>>,
    projects: HashMap<Uuid, Arc<Project>>,
}

/// What a row was handed of [`Prefetched`] (or of an event's shared relations).
#[derive(Clone, Default)]
pub struct Related {
    pub owner: Option<Arc<User>>,
    pub project: Option<Arc<Project>>,
    pub resource_group: Option<resource_group::Model>,
    pub image: Option<image::Model>,
}

impl Prefetched {
    pub fn of(&self, row: &entity::session::Model) -> Related {
        Related {
            owner: self.owners.get(&row.owner_id).cloned(),
            project: self.projects.get(&row.project_id).cloned(),
            ..Related::default()
        }
    }
}

/// The relation each field of `Session` needs loaded: the one rule both the executor's
/// prefetch and the compiled list path plan by.
pub fn session_relation(field: &str) -> Option<Relation> {
    Some(match field {
        "owner" => Relation::Owner,
        "project" => Relation::Project,
        "resourceGroup" => Relation::ResourceGroup,
        "image" | "apps" => Relation::Image,
        "launchGroup" => Relation::LaunchGroup,
        "expiry" => Relation::ExtensionLimits,
        "statusTransitions" => Relation::Transitions,
        "statusChangedBy" => Relation::Actors,
        _ => return None,
    })
}

/// The relations of `Session` fields that `selected` says are asked for.
fn wanted(selected: impl Fn(&str) -> bool) -> Wanted {
    let mut wanted = Wanted::default();
    for field in [
        "owner",
        "project",
        "resourceGroup",
        "image",
        "apps",
        "launchGroup",
        "expiry",
        "statusTransitions",
        "statusChangedBy",
    ] {
        if let Some(r) = session_relation(field).filter(|_| selected(field)) {
            wanted.add(r);
        }
    }
    wanted
}

/// Loads, for all `rows` at once, each relation the query selects on them. The owners came
/// with the rows; `project`, when the caller already read the project of the rows, is taken
/// as it is.
pub async fn prefetch_relations<'m>(
    ctx: &Context<'_>,
    rows: impl Iterator<Item = (&'m entity::session::Model, &'m user::Model)>,
    project: Option<&project::Model>,
) -> Result<Prefetched, Arc<DomainError>> {
    let look = ctx.look_ahead();
    let selected =
        |name: &str| look.field("edges").field("node").field(name).exists() || look.field("nodes").field(name).exists();
    let (rows, owners): (Vec<_>, Vec<_>) = rows.unzip();
    prefetch(ctx, rows, &owners, project, wanted(selected)).await
}

/// The same for one session, the field being resolved: its relations load together (the
/// session's own fields then resolve one after the other, from the cache).
pub async fn prefetch_one(ctx: &Context<'_>, row: &entity::session::Model) -> Result<Related, Arc<DomainError>> {
    let look = ctx.look_ahead();
    Ok(prefetch(ctx, vec![row], &[], None, wanted(|name: &str| look.field(name).exists())).await?.of(row))
}

/// Loads what `wanted` names through the one loader of pages ([`related::load`]), then hands
/// it to this request's loaders, whose caches the field resolvers read.
async fn prefetch(
    ctx: &Context<'_>,
    rows: Vec<&entity::session::Model>,
    known_owners: &[&user::Model],
    project: Option<&project::Model>,
    wanted: Wanted,
) -> Result<Prefetched, Arc<DomainError>> {
    if rows.is_empty() || wanted == Wanted::default() {
        return Ok(Prefetched::default());
    }
    let (Ok(l), Ok(db)) = (ctx.data::<Loaders>(), ctx.data::<DatabaseConnection>()) else {
        return Ok(Prefetched::default());
    };
    let catalog = ctx.data::<Live>().ok().map(|live| &live.credentials);
    let known = related::Known { owners: known_owners, project, catalog };
    let loaded = related::load(db, &rows, wanted, known).await.map_err(Arc::new)?;
    let mut owners = HashMap::new();
    let mut projects = HashMap::new();
    if wanted.has(Relation::Owner) {
        let known = known_owners.iter().map(|u| (*u).clone());
        for user in known.chain(loaded.owners.values().cloned()) {
            if let std::collections::hash_map::Entry::Vacant(e) = owners.entry(user.id) {
                e.insert(Arc::new(User::try_from(user).map_err(Arc::new)?));
            }
        }
    }
    if wanted.has(Relation::Project) {
        let known = project.filter(|p| rows.iter().any(|r| r.project_id == p.id)).cloned();
        for p in known.into_iter().chain(loaded.projects.values().cloned()) {
            projects.insert(p.id, Arc::new(Project(p)));
        }
    }
    l.feed_many(loaded.owners.into_iter().map(|(k, v)| (UserId(k), v))).await;
    // Who changed a session's status (Actor.user reads users through the same loader),
    // the owners among them too.
    if wanted.has(Relation::Actors) {
        let owners_acting = known_owners.iter().filter(|u| rows.iter().any(|r| r.status_actor_user_id == Some(u.id)));
        l.feed_many(owners_acting.map(|u| (UserId(u.id), (*u).clone()))).await;
    }
    l.feed_many(loaded.actors.into_iter().map(|(k, v)| (UserId(k), v))).await;
    l.feed_many(loaded.projects.into_iter().map(|(k, v)| (ProjectId(k), v))).await;
    l.feed_many(loaded.resource_groups.into_iter().map(|(k, v)| (ResourceGroupName(k), v))).await;
    l.feed_many(loaded.images.into_iter().map(|(k, v)| (ImageName(k), v))).await;
    l.feed_many(loaded.launch_groups.into_iter().map(|(k, v)| (LaunchGroupId(k), v))).await;
    l.feed_many(loaded.extension_limits.into_iter().map(|(k, v)| (ExtensionLimitsOf(k), v))).await;
    l.feed_many(loaded.transitions.into_iter().map(|(k, v)| (TransitionsOf(k), v))).await;
    Ok(Prefetched { owners, projects })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UserId(pub Uuid);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProjectId(pub Uuid);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchGroupId(pub Uuid);
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransitionsOf(pub Uuid);
/// The sessions a session waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DependenciesOf(pub Uuid);
/// A session's completion callbacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallbacksOf(pub Uuid);
/// The sessions that wait for a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DependentsOf(pub Uuid);
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceGroupName(pub String);
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageName(pub String);
/// Whether a user is a member of a project: (user, project).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemberOf(pub Uuid, pub Uuid);
/// The extension limits of a keypair's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtensionLimitsOf(pub Uuid);

type LoadResult<K, V> = Result<HashMap<K, V>, Arc<DomainError>>;

/// Re-keys a domain batch load by the loader's key type.
fn keyed<K: Eq + std::hash::Hash, D, V>(
    found: Result<HashMap<D, V>, DomainError>,
    key: impl Fn(D) -> K,
) -> LoadResult<K, V> {
    Ok(found.map_err(Arc::new)?.into_iter().map(|(k, v)| (key(k), v)).collect())
}

impl Loader<UserId> for DbLoader {
    type Value = user::Model;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[UserId]) -> LoadResult<UserId, user::Model> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(relations::users(&self.db, &ids).await, UserId)
    }
}

impl Loader<ProjectId> for DbLoader {
    type Value = project::Model;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[ProjectId]) -> LoadResult<ProjectId, project::Model> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(relations::projects(&self.db, &ids).await, ProjectId)
    }
}

impl Loader<LaunchGroupId> for DbLoader {
    type Value = launch_group::Model;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[LaunchGroupId]) -> LoadResult<LaunchGroupId, launch_group::Model> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(relations::launch_groups(&self.db, &ids).await, LaunchGroupId)
    }
}

impl Loader<ResourceGroupName> for DbLoader {
    type Value = resource_group::Model;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[ResourceGroupName]) -> LoadResult<ResourceGroupName, resource_group::Model> {
        let names: Vec<String> = keys.iter().map(|k| k.0.clone()).collect();
        keyed(relations::resource_groups(&self.db, &names).await, ResourceGroupName)
    }
}

impl Loader<ImageName> for DbLoader {
    type Value = image::Model;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[ImageName]) -> LoadResult<ImageName, image::Model> {
        let names: Vec<String> = keys.iter().map(|k| k.0.clone()).collect();
        keyed(relations::images(&self.db, &names).await, ImageName)
    }
}

impl Loader<ExtensionLimitsOf> for DbLoader {
    type Value = crate::domain::reclaim::expiry::ExtensionLimits;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[ExtensionLimitsOf]) -> LoadResult<ExtensionLimitsOf, Self::Value> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(crate::domain::reclaim::expiry::limits(&self.db, &ids).await, ExtensionLimitsOf)
    }
}

impl Loader<DependenciesOf> for DbLoader {
    type Value = Vec<entity::session::Model>;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[DependenciesOf]) -> LoadResult<DependenciesOf, Self::Value> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(crate::domain::scheduling::dependencies::depends_on(&self.db, &ids).await, DependenciesOf)
    }
}

impl Loader<CallbacksOf> for DbLoader {
    type Value = Vec<crate::domain::lifecycle::callbacks::Callback>;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[CallbacksOf]) -> LoadResult<CallbacksOf, Self::Value> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(crate::domain::lifecycle::callbacks::of_sessions(&self.db, &ids).await, CallbacksOf)
    }
}

impl Loader<DependentsOf> for DbLoader {
    type Value = Vec<entity::session::Model>;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[DependentsOf]) -> LoadResult<DependentsOf, Self::Value> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(crate::domain::scheduling::dependencies::dependents(&self.db, &ids).await, DependentsOf)
    }
}

impl Loader<TransitionsOf> for DbLoader {
    type Value = Vec<session_status_transition::Model>;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[TransitionsOf]) -> LoadResult<TransitionsOf, Vec<session_status_transition::Model>> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(relations::transitions(&self.db, &ids).await, TransitionsOf)
    }
}

impl Loader<MemberOf> for DbLoader {
    type Value = bool;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[MemberOf]) -> LoadResult<MemberOf, bool> {
        let mut out = HashMap::with_capacity(keys.len());
        let users: std::collections::BTreeSet<Uuid> = keys.iter().map(|k| k.0).collect();
        for user in users {
            let projects: Vec<Uuid> = keys.iter().filter(|k| k.0 == user).map(|k| k.1).collect();
            let member =
                crate::domain::sessions::visibility::member_of(&self.db, user, &projects).await.map_err(Arc::new)?;
            out.extend(projects.into_iter().map(|p| (MemberOf(user, p), member.contains(&p))));
        }
        Ok(out)
    }
}
