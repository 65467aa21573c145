//! Mounts: the folders a launch binds into its sessions' sandboxes, each at a path under
//! the session's work directory (its `$HOME`, [`HOME`]), read-write or read-only.
//!
//! - [`check`] is part of a launch's validation: the launcher must see each folder (else
//!   NOT_FOUND at `mounts[i]`, as for a folder that does not exist), it must be of the
//!   launch's project, a read-write mount needs write access, and paths stay under the
//!   work directory, once each, none inside another.
//! - A session keeps its mounts as launched (`sessions.mounts`, read by [`of`]), and the
//!   index `session_mounts` says which sessions mount a folder ([`mounted_by`]): a folder is
//!   not deleted while a live session mounts it. Both are written by the launch's
//!   transaction ([`record`]), which first holds each folder ([`hold`]) so that a delete
//!   running at the same time either sees the mount or happens before the launch (which
//!   then finds no folder).
//! - The runtimes bind [`Bind`]s: the folder's directory on the storage's path ([`binds`]).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use entity::{folder, session, session_mount};

use super::folders::{self, Access};
use crate::domain::directory::auth::Viewer;
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, InputProblem, store::rows};

/// Where mounts go: the session's work directory, as its sandbox shows it.
pub const HOME: &str = crate::domain::runtime::local::sandbox::HOME;

/// The most mounts a launch asks for unless the server says otherwise (`--max-mounts`).
pub const DEFAULT_MAX_MOUNTS: u32 = 16;

/// The longest mount path (bytes, under the work directory), and its deepest nesting.
const MAX_PATH_BYTES: usize = 1024;
const MAX_DEPTH: usize = 16;

/// A mount a launch asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountRequest {
    /// `None`: an id that names no folder.
    pub folder: Option<Uuid>,
    /// Under the work directory (relative, or absolute under it); `None`: the folder's name.
    pub path: Option<String>,
    pub read_only: bool,
}

/// A session's mount, as launched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub folder: Uuid,
    /// The folder's name at launch.
    pub name: String,
    /// Relative to the work directory, normalised (`data`, `in/train`).
    pub path: String,
    pub read_only: bool,
}

impl Mount {
    /// Where the session sees it.
    pub fn target(&self) -> String {
        format!("{HOME}/{}", self.path)
    }

    /// What a launch of it again asks for.
    pub fn request(&self) -> MountRequest {
        MountRequest { folder: Some(self.folder), path: Some(self.path.clone()), read_only: self.read_only }
    }
}

/// What a sandbox binds: a folder's directory at a path of the session's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    pub source: PathBuf,
    /// Absolute, under the work directory.
    pub target: String,
    pub read_only: bool,
}

/// `path` as a normalised path under the work directory, or what is wrong with it: relative
/// (or absolute under [`HOME`]), no `.` or `..`, no control characters, each name at most
/// 255 bytes, not the work directory itself.
pub fn under_home(path: &str) -> Result<String, String> {
    let relative = match path.strip_prefix(HOME) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ if path.starts_with('/') => return Err(format!("a mount's path is under {HOME}")),
        _ => path,
    };
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("a mount's path has at most {MAX_PATH_BYTES} bytes"));
    }
    if path.chars().any(|c| c.is_control() || crate::domain::error::is_bidi_control(c)) {
        return Err("a mount's path has no control characters".into());
    }
    let names: Vec<&str> = relative.split('/').filter(|n| !n.is_empty()).collect();
    if names.iter().any(|n| *n == "." || *n == "..") {
        return Err("a mount's path has no `.` or `..`: it stays under the work directory".into());
    }
    if names.iter().any(|n| n.len() > 255) {
        return Err("a name in a mount's path has at most 255 bytes".into());
    }
    match names.len() {
        0 => Err(format!("a mount's path is a directory under {HOME}, not {HOME} itself")),
        n if n > MAX_DEPTH => Err(format!("a mount's path is at most {MAX_DEPTH} directories deep")),
        _ => Ok(names.join("/")),
    }
}

fn problem(i: usize, code: &str, message: impl Into<String>) -> InputProblem {
    InputProblem::new(code, Some(format!("mounts[{i}]")), message)
}

/// The mounts of a launch in project `project_id` by `viewer`, checked; every problem is
/// reported, each at its `mounts[i]`.
pub async fn check(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    project_id: Uuid,
    requests: &[MountRequest],
    max: u32,
) -> DomainResult<(Vec<Mount>, Vec<InputProblem>)> {
    if let Some(p) = InputProblem::too_many("mounts", requests.len(), max as usize, "mounts") {
        return Ok((Vec::new(), vec![p]));
    }
    let mut mounts = Vec::with_capacity(requests.len());
    let mut problems = Vec::new();
    let mut folders_seen = BTreeSet::new();
    for (i, r) in requests.iter().enumerate() {
        let found = match r.folder {
            Some(id) => match folders::visible(db, viewer, id).await {
                Ok(f) => Some(f),
                Err(DomainError::NotFound(_)) => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let Some(f) = found else {
            problems.push(problem(i, "NOT_FOUND", "no such folder"));
            continue;
        };
        if f.row.project_id != project_id {
            problems.push(problem(i, "OTHER_PROJECT", format!("folder {} is another project's", f.row.name)));
            continue;
        }
        if !r.read_only && f.access != Access::ReadWrite {
            let message = format!("you may only read folder {}: mount it read-only", f.row.name);
            problems.push(problem(i, "READ_ONLY_FOLDER", message));
            continue;
        }
        if !folders_seen.insert(f.row.id) {
            problems.push(problem(i, "DUPLICATE_FOLDER", format!("folder {} is mounted twice", f.row.name)));
            continue;
        }
        match under_home(r.path.as_deref().unwrap_or(&f.row.name)) {
            Ok(path) => mounts.push((i, Mount { folder: f.row.id, name: f.row.name, path, read_only: r.read_only })),
            Err(why) => problems.push(problem(i, "INVALID_PATH", why)),
        }
    }
    for (n, (i, m)) in mounts.iter().enumerate() {
        let inside = |a: &str, b: &str| b.strip_prefix(a).is_some_and(|rest| rest.starts_with('/'));
        if let Some((_, other)) = mounts[..n].iter().find(|(_, o)| o.path == m.path) {
            problems.push(problem(
                *i,
                "DUPLICATE_PATH",
                format!("{} is the path of folder {} too", m.target(), other.name),
            ));
        } else if let Some((_, other)) =
            mounts[..n].iter().find(|(_, o)| inside(&o.path, &m.path) || inside(&m.path, &o.path))
        {
            let message =
                format!("{} and folder {}'s {} are one inside the other", m.target(), other.name, other.target());
            problems.push(problem(*i, "NESTED_PATH", message));
        }
    }
    Ok((mounts.into_iter().map(|(_, m)| m).collect(), problems))
}

/// The stored form of a session's mounts (none: `None`).
pub fn stored(mounts: &[Mount]) -> Option<Value> {
    (!mounts.is_empty()).then(|| serde_json::to_value(mounts).unwrap_or(Value::Null))
}

/// Session `s`'s mounts, as launched.
pub fn of(s: &session::Model) -> DomainResult<Vec<Mount>> {
    match &s.mounts {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| DomainError::invariant(format!("session {}: unreadable mounts: {e}", s.id))),
    }
}

/// Holds the folders a launch mounts until its transaction ends (PostgreSQL: a share lock
/// on each row, which a delete's lock waits for; SQLite's write lock holds everything):
/// NOT_FOUND at `mounts[i]` for one deleted since the launch was checked.
pub async fn hold(txn: &impl ConnectionTrait, mounts: &[Mount]) -> DomainResult<()> {
    if mounts.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = mounts.iter().map(|m| m.folder).collect();
    let there: BTreeSet<Uuid> = folder::Entity::find()
        .select_only()
        .column(folder::Column::Id)
        .filter(folder::Column::Id.is_in(ids))
        .lock_shared()
        .into_tuple::<Uuid>()
        .all(txn)
        .await?
        .into_iter()
        .collect();
    let gone: Vec<InputProblem> = mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| !there.contains(&m.folder))
        .map(|(i, _)| problem(i, "NOT_FOUND", "no such folder"))
        .collect();
    if gone.is_empty() { Ok(()) } else { Err(DomainError::BadInput(gone)) }
}

/// Indexes which of `sessions` mount which folder (in the launch's transaction).
pub async fn record(txn: &impl ConnectionTrait, sessions: &[Uuid], mounts: &[Mount]) -> DomainResult<()> {
    let rows_of = sessions.iter().flat_map(|s| {
        mounts.iter().map(move |m| session_mount::ActiveModel {
            folder_id: sea_orm::Set(m.folder),
            session_id: sea_orm::Set(*s),
        })
    });
    rows::insert_all(txn, rows_of.collect(), None).await?;
    Ok(())
}

/// The most sessions [`mounted_by`] gives.
pub const MOST_MOUNTERS: u64 = 100;

/// The live (not yet ended) sessions that mount folder `id`, oldest first: at most `most`.
pub async fn mounted_by(db: &impl ConnectionTrait, id: Uuid, most: u64) -> DomainResult<Vec<session::Model>> {
    use sea_orm::QueryOrder;
    use sea_orm::sea_query::Query;
    let mounting = Query::select()
        .column(session_mount::Column::SessionId)
        .from(session_mount::Entity)
        .and_where(session_mount::Column::FolderId.eq(id))
        .to_owned();
    let ended = SessionStatus::TERMINAL.iter().map(|s| s.as_str());
    Ok(session::Entity::find()
        .filter(session::Column::Id.in_subquery(mounting))
        .filter(session::Column::Status.is_not_in(ended))
        .order_by_asc(session::Column::Id)
        .limit(most)
        .all(db)
        .await?)
}

/// What the sandboxes of `sessions` bind, by session: each mount's folder directory on its
/// storage's path; `Err` says why a session's mounts cannot be bound (a folder or its
/// storage gone), which fails its start.
pub async fn binds(
    db: &impl ConnectionTrait,
    sessions: &[&session::Model],
) -> DomainResult<HashMap<Uuid, Result<Vec<Bind>, String>>> {
    let mut wanted: Vec<(Uuid, Vec<Mount>)> = Vec::new();
    let mut unreadable = HashMap::new();
    for s in sessions {
        match of(s) {
            Ok(mounts) if !mounts.is_empty() => wanted.push((s.id, mounts)),
            Ok(_) => {}
            // That session alone fails to start.
            Err(e) => drop(unreadable.insert(s.id, Err(e.to_string()))),
        }
    }
    if wanted.is_empty() {
        return Ok(unreadable);
    }
    let ids: BTreeSet<Uuid> = wanted.iter().flat_map(|(_, ms)| ms.iter().map(|m| m.folder)).collect();
    let rows: HashMap<Uuid, folder::Model> = folder::Entity::find()
        .filter(folder::Column::Id.is_in(ids))
        .all(db)
        .await?
        .into_iter()
        .map(|f| (f.id, f))
        .collect();
    let storages = folders::storages(db).await?;
    let directory = |m: &Mount| -> Result<PathBuf, String> {
        let f = rows.get(&m.folder).ok_or_else(|| format!("its folder {} is gone", m.name))?;
        let (_, storage) = storages
            .iter()
            .find(|(name, _)| *name == f.storage)
            .ok_or_else(|| format!("the storage {} of folder {} is no longer declared", f.storage, m.name))?;
        Ok(std::path::Path::new(&storage.path).join(f.id.to_string()))
    };
    let planned: Vec<(Uuid, Result<Vec<Bind>, String>)> = wanted
        .into_iter()
        .map(|(id, mounts)| {
            let binds = mounts
                .iter()
                .map(|m| Ok(Bind { source: directory(m)?, target: m.target(), read_only: m.read_only }))
                .collect();
            (id, binds)
        })
        .collect();
    // Each image mounted here (after a restart, the first use mounts it).
    let done = tokio::task::spawn_blocking(move || {
        planned
            .into_iter()
            .map(|(id, binds)| {
                let mounted = binds.and_then(|binds| {
                    for b in &binds {
                        super::volume::mount(&b.source).map_err(|e| format!("cannot mount a folder: {e}"))?;
                    }
                    Ok(binds)
                });
                (id, mounted)
            })
            .chain(unreadable)
            .collect()
    });
    done.await.map_err(|e| DomainError::invariant(format!("mounting folders: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_path_stays_under_the_work_directory() {
        assert_eq!(under_home("data").as_deref(), Ok("data"));
        assert_eq!(under_home(&format!("{HOME}/in//train/")).as_deref(), Ok("in/train"));
        let (home, slash, beside) = (HOME.to_owned(), format!("{HOME}/"), format!("{HOME}x/a"));
        for bad in ["", "/", &home, &slash, "/etc", &beside, "../x", "a/../../x", "a/./b", "a\u{0}b"] {
            assert!(under_home(bad).is_err(), "{bad:?}");
        }
        assert!(under_home(&"a/".repeat(17)).is_err(), "too deep");
        assert!(under_home(&"x".repeat(256)).is_err(), "a name too long");
    }
}
