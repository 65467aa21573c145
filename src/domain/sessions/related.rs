//! What the sessions of a page refer to, loaded together: each relation a transport says it
//! needs ([`Wanted`]) in one statement for the whole page, the independent ones at once.
//! Every transport that shows a page of sessions (the GraphQL executor, its compiled list
//! path) loads through [`load`], so a page costs the same statements whichever answers it.

use std::collections::{BTreeSet, HashMap, HashSet};

use uuid::Uuid;

use entity::{image, launch_group, project, resource_group, session, session_status_transition, user};

use crate::domain::directory::credentials::Credentials;
use crate::domain::reclaim::expiry::{self, ExtensionLimits};
use crate::domain::{DomainResult, sessions::relations};

/// A record a session refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    Owner,
    Project,
    ResourceGroup,
    Image,
    LaunchGroup,
    /// The extension limits of its keypair's policy (its expiry).
    ExtensionLimits,
    /// Its status changes, oldest first.
    Transitions,
    /// The user who made its latest status change (when not its owner).
    Actors,
}

/// The relations a page needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wanted(u8);

impl Wanted {
    pub fn add(&mut self, r: Relation) {
        self.0 |= 1 << r as u8;
    }

    pub fn has(self, r: Relation) -> bool {
        self.0 & (1 << r as u8) != 0
    }
}

/// The relations of a page, each keyed as its sessions refer to it; empty when not wanted.
#[derive(Debug, Default)]
pub struct Loaded {
    pub owners: HashMap<Uuid, user::Model>,
    pub projects: HashMap<Uuid, project::Model>,
    pub resource_groups: HashMap<String, resource_group::Model>,
    pub images: HashMap<String, image::Model>,
    pub launch_groups: HashMap<Uuid, launch_group::Model>,
    /// By keypair.
    pub extension_limits: HashMap<Uuid, ExtensionLimits>,
    /// By session.
    pub transitions: HashMap<Uuid, Vec<session_status_transition::Model>>,
    /// The users who made the sessions' latest status changes, but their owners.
    pub actors: HashMap<Uuid, user::Model>,
}

/// Loads the `wanted` relations of `sessions`, but the owners and the project already
/// `known` (a page's statement reads its owners and project with it; they are not in the
/// answer): one statement per relation with something to load, run concurrently.
pub async fn load(
    db: &impl sea_orm::ConnectionTrait,
    sessions: &[&session::Model],
    wanted: Wanted,
    known: Known<'_>,
) -> DomainResult<Loaded> {
    /// The distinct keys `of` gives for the sessions, if `r` is wanted (none otherwise).
    fn keys<K: Ord>(
        wanted: Wanted,
        r: Relation,
        sessions: &[&session::Model],
        mut of: impl FnMut(&session::Model) -> Option<K>,
    ) -> Vec<K> {
        if !wanted.has(r) {
            return Vec::new();
        }
        sessions.iter().filter_map(|s| of(s)).collect::<BTreeSet<_>>().into_iter().collect()
    }
    /// One statement for `keys`, none when there are none.
    async fn each<K, V, F>(keys: Vec<K>, load: impl FnOnce(Vec<K>) -> F) -> DomainResult<HashMap<K, V>>
    where
        F: Future<Output = DomainResult<HashMap<K, V>>>,
    {
        if keys.is_empty() { Ok(HashMap::new()) } else { load(keys).await }
    }
    let known_owners: HashSet<Uuid> = known.owners.iter().map(|u| u.id).collect();
    let known_project = known.project.map(|p| p.id);
    let owners =
        keys(wanted, Relation::Owner, sessions, |s| (!known_owners.contains(&s.owner_id)).then_some(s.owner_id));
    let projects =
        keys(wanted, Relation::Project, sessions, |s| (known_project != Some(s.project_id)).then_some(s.project_id));
    let catalog = match known.catalog {
        Some(c) if wanted.has(Relation::ResourceGroup) || wanted.has(Relation::Image) => Some(c.catalog().await?),
        _ => None,
    };
    let (mut known_groups, mut known_images) = (HashMap::new(), HashMap::new());
    let groups = keys(wanted, Relation::ResourceGroup, sessions, |s| {
        known_in(catalog.as_ref().map(|c| &c.resource_groups), &s.resource_group, &mut known_groups)
    });
    let images = keys(wanted, Relation::Image, sessions, |s| {
        known_in(catalog.as_ref().map(|c| &c.images), &s.image, &mut known_images)
    });
    let launch_groups = keys(wanted, Relation::LaunchGroup, sessions, |s| s.launch_group_id);
    let keypairs = keys(wanted, Relation::ExtensionLimits, sessions, |s| Some(s.keypair_id));
    let ids = keys(wanted, Relation::Transitions, sessions, |s| Some(s.id));
    // An owner who made the change is read already (or with the owners below).
    let actors = keys(wanted, Relation::Actors, sessions, |s| s.status_actor_user_id.filter(|a| *a != s.owner_id));
    let (owners, projects, resource_groups, images, launch_groups, extension_limits, transitions, actors) = tokio::try_join!(
        each(owners, |k| async move { relations::users(db, &k).await }),
        each(projects, |k| async move { relations::projects(db, &k).await }),
        each(groups, |k| async move { relations::resource_groups(db, &k).await }),
        each(images, |k| async move { relations::images(db, &k).await }),
        each(launch_groups, |k| async move { relations::launch_groups(db, &k).await }),
        each(keypairs, |k| async move { expiry::limits(db, &k).await }),
        each(ids, |k| async move { relations::transitions(db, &k).await }),
        each(actors, |k| async move { relations::users(db, &k).await }),
    )?;
    let (mut resource_groups, mut images) = (resource_groups, images);
    resource_groups.extend(known_groups);
    images.extend(known_images);
    Ok(Loaded { owners, projects, resource_groups, images, launch_groups, extension_limits, transitions, actors })
}

/// `name` when `catalog` does not hold it (it is to be read); otherwise none, and what it
/// holds is added to `found`.
fn known_in<M: Clone>(
    catalog: Option<&HashMap<String, M>>,
    name: &str,
    found: &mut HashMap<String, M>,
) -> Option<String> {
    match catalog.and_then(|c| c.get(name)) {
        Some(m) => {
            if !found.contains_key(name) {
                found.insert(name.to_owned(), m.clone());
            }
            None
        }
        None => Some(name.to_owned()),
    }
}

/// What a page already read of its sessions' relations.
#[derive(Clone, Copy, Debug, Default)]
pub struct Known<'a> {
    pub owners: &'a [&'a user::Model],
    pub project: Option<&'a project::Model>,
    /// Where the images and resource groups as last read are kept
    /// ([`Credentials::catalog`]): only those it does not hold are read.
    pub catalog: Option<&'a Credentials>,
}
