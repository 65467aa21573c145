//! Per-request DataLoaders for the relations of sessions (owner, project, resource group,
//! image, launch group, status transitions). Built for every request, so the cache never
//! outlives a request or crosses users.
//!
//! A list page does not rely on the loaders' batching window (timing-dependent: a slow
//! resolver splits a batch): [`prefetch_relations`] loads each selected relation of the
//! whole page in one statement first, and the field resolvers then read the cache. A page
//! therefore costs a fixed number of statements whatever its size.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_graphql::Context;
use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use entity::{image, launch_group, project, resource_group, session_status_transition, user};

use super::viewer::{Project, User};
use crate::domain::{DomainError, relations};

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
    prefetch(ctx, rows, &owners, project, selected).await
}

/// The same for one session, the field being resolved: its relations load together (the
/// session's own fields then resolve one after the other, from the cache).
pub async fn prefetch_one(ctx: &Context<'_>, row: &entity::session::Model) -> Result<Related, Arc<DomainError>> {
    let look = ctx.look_ahead();
    Ok(prefetch(ctx, vec![row], &[], None, |name: &str| look.field(name).exists()).await?.of(row))
}

async fn prefetch(
    ctx: &Context<'_>,
    rows: Vec<&entity::session::Model>,
    known_owners: &[&user::Model],
    project: Option<&project::Model>,
    selected: impl Fn(&str) -> bool,
) -> Result<Prefetched, Arc<DomainError>> {
    if rows.is_empty() {
        return Ok(Prefetched::default());
    }
    let Ok(l) = ctx.data::<Loaders>() else { return Ok(Prefetched::default()) };
    // Independent relations load concurrently: the page waits for the slowest, not the sum.
    let owners = async {
        let mut owners = HashMap::new();
        if !selected("owner") {
            return Ok(owners);
        }
        for user in known_owners {
            if let std::collections::hash_map::Entry::Vacant(e) = owners.entry(user.id) {
                e.insert(Arc::new(User::try_from((*user).clone()).map_err(Arc::new)?));
            }
        }
        let missing: HashSet<_> =
            rows.iter().map(|r| UserId(r.owner_id)).filter(|k| !owners.contains_key(&k.0)).collect();
        if !missing.is_empty() {
            for (id, user) in l.load_many(missing).await? {
                owners.insert(id.0, Arc::new(User::try_from(user).map_err(Arc::new)?));
            }
        }
        Ok::<_, Arc<DomainError>>(owners)
    };
    let projects = async {
        if !selected("project") {
            return Ok(HashMap::new());
        }
        match project {
            Some(p) if rows.iter().all(|r| r.project_id == p.id) => {
                Ok(HashMap::from([(p.id, Arc::new(Project(p.clone())))]))
            }
            _ => {
                let found = l.load_many(rows.iter().map(|r| ProjectId(r.project_id)).collect::<HashSet<_>>()).await?;
                Ok(found.into_iter().map(|(id, p)| (id.0, Arc::new(Project(p)))).collect())
            }
        }
    };
    let groups = async {
        if selected("resourceGroup") {
            l.load_many(rows.iter().map(|r| ResourceGroupName(r.resource_group.clone())).collect::<HashSet<_>>())
                .await?;
        }
        Ok(())
    };
    let images = async {
        if selected("image") || selected("apps") {
            l.load_many(rows.iter().map(|r| ImageName(r.image.clone())).collect::<HashSet<_>>()).await?;
        }
        Ok(())
    };
    let launch_groups = async {
        let keys: HashSet<_> = rows.iter().filter_map(|r| r.launch_group_id.map(LaunchGroupId)).collect();
        if selected("launchGroup") && !keys.is_empty() {
            l.load_many(keys).await?;
        }
        Ok(())
    };
    let limits = async {
        if selected("expiry") {
            l.load_many(rows.iter().map(|r| ExtensionLimitsOf(r.keypair_id)).collect::<HashSet<_>>()).await?;
        }
        Ok(())
    };
    let transitions = async {
        if selected("statusTransitions") {
            l.load_many(rows.iter().map(|r| TransitionsOf(r.id)).collect::<HashSet<_>>()).await?;
        }
        Ok(())
    };
    let (owners, projects, (), (), (), (), ()) =
        tokio::try_join!(owners, projects, groups, images, launch_groups, limits, transitions)?;
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceGroupName(pub String);
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageName(pub String);
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
    type Value = crate::domain::expiry::ExtensionLimits;
    type Error = Arc<DomainError>;

    async fn load(&self, keys: &[ExtensionLimitsOf]) -> LoadResult<ExtensionLimitsOf, Self::Value> {
        let ids: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
        keyed(crate::domain::expiry::limits(&self.db, &ids).await, ExtensionLimitsOf)
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
