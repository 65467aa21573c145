//! Folders: directories sessiond makes under a declared storage (each named by its id: a
//! path never comes from a user), for data that outlives sessions.
//!
//! - A USER folder is its owner's alone: anyone else, an administrator too, finds nothing.
//! - A PROJECT folder is made by an administrator of the project's domain. Every member
//!   reads it; an administrator grants a member writing too (`folder_access`).
//! - A folder you may not see looks exactly like one that does not exist (`NOT_FOUND`);
//!   one you see but may not change is `FORBIDDEN`.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, TransactionTrait,
};
use uuid::Uuid;

use entity::{folder, folder_access};

use super::Storage;
use crate::domain::directory::auth::Viewer;
use crate::domain::{DomainError, DomainResult, sessions::visibility};

/// The most folders one user makes in a project.
pub const MAX_FOLDERS_PER_USER: u64 = 100;

/// Whose a folder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    User,
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "USER",
            Scope::Project => "PROJECT",
        }
    }

    pub fn stored(text: &str) -> DomainResult<Self> {
        match text {
            "USER" => Ok(Scope::User),
            "PROJECT" => Ok(Scope::Project),
            other => Err(DomainError::invariant(format!("a folder's scope {other:?}"))),
        }
    }
}

/// What the viewer may do with a folder's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// A folder, with the viewer's access to it and whether the viewer may manage it (rename,
/// delete, grant).
#[derive(Clone, Debug)]
pub struct Folder {
    pub row: folder::Model,
    pub scope: Scope,
    pub access: Access,
    pub manages: bool,
}

/// Whether `name` may name a folder: 1 to 64 letters, digits, `-`, `_` and `.`, not
/// starting with `.` (it is a directory's name in a session, under `$HOME`).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// `name` as a folder's name, or INVALID_NAME.
fn named(name: &str) -> DomainResult<()> {
    if valid_name(name) {
        return Ok(());
    }
    Err(DomainError::bad_input(
        "INVALID_NAME",
        "name".to_owned(),
        "a folder's name has 1 to 64 letters, digits, `-`, `_` and `.`, and does not start with `.`",
    ))
}

/// What a folder is made with.
#[derive(Clone, Debug)]
pub struct NewFolder {
    pub project_id: Uuid,
    pub name: String,
    pub scope: Scope,
    /// None: the storage's quota.
    pub quota_bytes: Option<i64>,
    /// None: the first storage (by name) open to the project.
    pub storage: Option<String>,
}

/// The declared storage, by name, and the project's `DOMAIN/NAME`.
pub(super) async fn storages(db: &impl ConnectionTrait) -> DomainResult<Vec<(String, Storage)>> {
    let rows = entity::storage::Entity::find().order_by_asc(entity::storage::Column::Name).all(db).await?;
    rows.into_iter()
        .map(|r| {
            serde_json::from_value(r.settings)
                .map(|s| (r.name.clone(), s))
                .map_err(|e| DomainError::invariant(format!("storage {}: {e}", r.name)))
        })
        .collect()
}

async fn project_path(db: &impl ConnectionTrait, project: &entity::project::Model) -> DomainResult<String> {
    let domain = entity::domain::Entity::find_by_id(project.domain_id).one(db).await?;
    let domain = domain.ok_or_else(|| DomainError::invariant(format!("project {}: no domain", project.id)))?;
    Ok(format!("{}/{}", domain.name, project.name))
}

/// The directory of folder `row` on this machine.
pub async fn directory(db: &impl ConnectionTrait, row: &folder::Model) -> DomainResult<std::path::PathBuf> {
    let all = storages(db).await?;
    let (_, storage) = all
        .iter()
        .find(|(name, _)| *name == row.storage)
        .ok_or_else(|| DomainError::invariant(format!("the storage {} is no longer declared", row.storage)))?;
    Ok(std::path::Path::new(&storage.path).join(row.id.to_string()))
}

/// What folder `f` holds, as its volume counts it; `None` where that is not measured
/// ([`super::volume::usage`]).
pub async fn usage(db: &impl ConnectionTrait, f: &Folder) -> DomainResult<Option<super::volume::Usage>> {
    let dir = directory(db, &f.row).await?;
    tokio::task::spawn_blocking(move || super::volume::usage(&dir))
        .await
        .map_err(|e| DomainError::invariant(format!("reading a folder's use: {e}")))?
        .map_err(|e| DomainError::invariant(format!("reading a folder's use: {e}")))
}

/// Makes a folder for `viewer`: a USER one in a project they are a member of, a PROJECT one
/// in a project they administer; its directory is made with it.
pub async fn create(
    db: &sea_orm::DatabaseConnection,
    viewer: &Viewer,
    new: &NewFolder,
    now: DateTime<Utc>,
) -> DomainResult<Folder> {
    let mut access = visibility::project_access(db, viewer, new.project_id).await?;
    match new.scope {
        Scope::User => access.require_member(db, viewer, "a USER folder is made in your own project").await?,
        Scope::Project if !viewer.administers_domain(access.project.domain_id) => {
            return Err(DomainError::Forbidden("a PROJECT folder is made by an administrator of the project".into()));
        }
        Scope::Project => {}
    }
    named(&new.name)?;
    let project = project_path(db, &access.project).await?;
    let all = storages(db).await?;
    let open: Vec<&(String, Storage)> = all.iter().filter(|(_, s)| s.open_to(&project)).collect();
    let (storage_name, storage) = match &new.storage {
        Some(wanted) => open.iter().find(|(name, _)| name == wanted).copied().ok_or_else(|| {
            DomainError::bad_input(
                "UNKNOWN_STORAGE",
                "storage".to_owned(),
                format!("no storage {wanted} is open to this project"),
            )
        })?,
        None => open.first().copied().ok_or_else(|| {
            DomainError::bad_input("NO_STORAGE", None, "no storage is open to this project (`[storage.NAME]` of apply)")
        })?,
    };
    let quota_bytes = new.quota_bytes.unwrap_or(storage.quota_bytes);
    if !(super::volume::MIN_QUOTA_BYTES..=storage.quota_bytes).contains(&quota_bytes) {
        return Err(DomainError::bad_input(
            "INVALID_QUOTA",
            "quotaBytes".to_owned(),
            format!(
                "a folder's quota is {} to {} bytes on storage {storage_name}",
                super::volume::MIN_QUOTA_BYTES,
                storage.quota_bytes
            ),
        ));
    }
    let namespace = match new.scope {
        Scope::User => format!("user:{}", viewer.user_id),
        Scope::Project => "project".to_owned(),
    };
    let txn = db.begin().await?;
    let made = folder::Entity::find()
        .filter(folder::Column::ProjectId.eq(new.project_id))
        .filter(folder::Column::OwnerId.eq(viewer.user_id))
        .count(&txn)
        .await?;
    if made >= MAX_FOLDERS_PER_USER {
        return Err(DomainError::bad_input(
            "LIMIT_EXCEEDED",
            None,
            format!("you have {MAX_FOLDERS_PER_USER} folders in this project already"),
        ));
    }
    let row = folder::ActiveModel {
        id: Set(Uuid::now_v7()),
        storage: Set(storage_name.clone()),
        project_id: Set(new.project_id),
        name: Set(new.name.clone()),
        scope: Set(new.scope.as_str().to_owned()),
        owner_id: Set(viewer.user_id),
        namespace: Set(namespace),
        quota_bytes: Set(quota_bytes),
        created_at: Set(now),
    }
    .insert(&txn)
    .await
    .map_err(|e| exists_or(e, &new.name))?;
    // Its volume before the commit: a folder without one is never seen.
    let dir = std::path::Path::new(&storage.path).join(row.id.to_string());
    let quota = u64::try_from(quota_bytes).unwrap_or(0);
    let at = dir.clone();
    tokio::task::spawn_blocking(move || super::volume::make(&at, quota))
        .await
        .map_err(|e| DomainError::invariant(format!("making a folder's volume: {e}")))?
        .map_err(|e| DomainError::invariant(format!("cannot make the folder's volume on {storage_name}: {e}")))?;
    if let Err(e) = txn.commit().await {
        tokio::task::spawn_blocking(move || super::volume::remove(&dir)).await.ok();
        return Err(e.into());
    }
    Ok(Folder { row, scope: new.scope, access: Access::ReadWrite, manages: true })
}

/// What folders belong to: the storage they are made on, a user, a project.
#[derive(Clone, Debug)]
pub enum Holder {
    Storage(String),
    User(Uuid),
    Project(Uuid),
}

/// How many folders `holder` has: what holds any cannot go (nor a storage move).
pub async fn held_by(db: &impl ConnectionTrait, holder: Holder) -> Result<u64, sea_orm::DbErr> {
    let of = match holder {
        Holder::Storage(name) => folder::Column::Storage.eq(name),
        Holder::User(id) => folder::Column::OwnerId.eq(id),
        Holder::Project(id) => folder::Column::ProjectId.eq(id),
    };
    folder::Entity::find().filter(of).count(db).await
}

/// The viewer's access to a folder of scope `scope`, and whether they manage it, if they
/// see it at all: a USER folder its owner's alone; a PROJECT folder an administrator's to
/// manage, a member's to read (and write, as granted). Both through a project the viewer
/// sees.
fn view(scope: Scope, own: bool, admin: bool, member: bool, writable: bool) -> Option<(Access, bool)> {
    match scope {
        Scope::User => own.then_some((Access::ReadWrite, true)),
        Scope::Project if admin => Some((Access::ReadWrite, true)),
        Scope::Project if member => Some((if writable { Access::ReadWrite } else { Access::ReadOnly }, false)),
        Scope::Project => None,
    }
}

/// The viewer's view of `row`, if they may see it at all ([`view`]).
async fn seen_by(db: &impl ConnectionTrait, viewer: &Viewer, row: folder::Model) -> DomainResult<Option<Folder>> {
    let scope = Scope::stored(&row.scope)?;
    let Ok(mut project) = visibility::project_access(db, viewer, row.project_id).await else { return Ok(None) };
    let admin = viewer.administers_domain(project.project.domain_id);
    let member = scope == Scope::Project && !admin && project.is_member(db, viewer).await?;
    let writable = member
        && folder_access::Entity::find_by_id((row.id, viewer.user_id)).one(db).await?.is_some_and(|g| g.writable);
    let own = row.owner_id == viewer.user_id;
    Ok(view(scope, own, admin, member, writable).map(|(access, manages)| Folder { row, scope, access, manages }))
}

/// The folders of project `project_id` the viewer sees, by name: their own USER folders and
/// the project's. A project they may not see is `NOT_FOUND`.
pub async fn list(db: &impl ConnectionTrait, viewer: &Viewer, project_id: Uuid) -> DomainResult<Vec<Folder>> {
    let mut project = visibility::project_access(db, viewer, project_id).await?;
    let admin = viewer.administers_domain(project.project.domain_id);
    let member = admin || project.is_member(db, viewer).await?;
    let mut mine = Condition::any().add(
        Condition::all()
            .add(folder::Column::Scope.eq(Scope::User.as_str()))
            .add(folder::Column::OwnerId.eq(viewer.user_id)),
    );
    if member {
        mine = mine.add(folder::Column::Scope.eq(Scope::Project.as_str()));
    }
    let rows = folder::Entity::find()
        .filter(folder::Column::ProjectId.eq(project_id))
        .filter(mine)
        .order_by_asc(folder::Column::Name)
        .order_by_asc(folder::Column::Id)
        .all(db)
        .await?;
    let writable: std::collections::HashSet<Uuid> = folder_access::Entity::find()
        .filter(folder_access::Column::UserId.eq(viewer.user_id))
        .filter(folder_access::Column::Writable.eq(true))
        .filter(folder_access::Column::FolderId.is_in(rows.iter().map(|r| r.id).collect::<Vec<_>>()))
        .all(db)
        .await?
        .into_iter()
        .map(|g| g.folder_id)
        .collect();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let scope = Scope::stored(&row.scope)?;
        let (own, granted) = (row.owner_id == viewer.user_id, writable.contains(&row.id));
        if let Some((access, manages)) = view(scope, own, admin, member, granted) {
            out.push(Folder { row, scope, access, manages });
        }
    }
    Ok(out)
}

/// Folder `id` as the viewer sees it; `NOT_FOUND` when they may not see it.
pub async fn visible(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<Folder> {
    let row = folder::Entity::find_by_id(id).one(db).await?.ok_or(DomainError::NotFound("folder"))?;
    seen_by(db, viewer, row).await?.ok_or(DomainError::NotFound("folder"))
}

/// Folder `id`, if the viewer manages it (its owner; a PROJECT folder's administrator).
async fn managed(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<Folder> {
    let f = visible(db, viewer, id).await?;
    if !f.manages {
        return Err(DomainError::Forbidden("only an administrator of the project changes a PROJECT folder".into()));
    }
    Ok(f)
}

/// Renames folder `id`.
pub async fn rename(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid, name: &str) -> DomainResult<Folder> {
    let mut f = managed(db, viewer, id).await?;
    named(name)?;
    let mut active: folder::ActiveModel = f.row.clone().into();
    active.name = Set(name.to_owned());
    f.row = active.update(db).await.map_err(|e| exists_or(e, name))?;
    Ok(f)
}

/// A name taken (the unique index of the project's names decides, two at once too) is
/// FOLDER_EXISTS.
fn exists_or(e: sea_orm::DbErr, name: &str) -> DomainError {
    if matches!(e.sql_err(), Some(sea_orm::SqlErr::UniqueConstraintViolation(_))) {
        DomainError::bad_input("FOLDER_EXISTS", "name".to_owned(), format!("a folder {name} exists"))
    } else {
        e.into()
    }
}

/// Deletes folder `id`, its files with it; refused while a live session mounts it.
pub async fn delete(db: &sea_orm::DatabaseConnection, viewer: &Viewer, id: Uuid) -> DomainResult<()> {
    let f = managed(db, viewer, id).await?;
    let dir = directory(db, &f.row).await?;
    let txn = crate::domain::begin_write(db).await?;
    // The row first (PostgreSQL: a launch mounting it holds it until it commits), then who
    // mounts it.
    folder::Entity::find_by_id(id).lock_exclusive().one(&txn).await?.ok_or(DomainError::NotFound("folder"))?;
    if !super::mounts::mounted_by(&txn, id, 1).await?.is_empty() {
        return Err(DomainError::bad_input(
            "FOLDER_MOUNTED",
            None,
            "a live session mounts this folder: it is deleted once no session that mounts it is left",
        ));
    }
    entity::session_mount::Entity::delete_many()
        .filter(entity::session_mount::Column::FolderId.eq(id))
        .exec(&txn)
        .await?;
    folder_access::Entity::delete_many().filter(folder_access::Column::FolderId.eq(id)).exec(&txn).await?;
    folder::Entity::delete_by_id(id).exec(&txn).await?;
    txn.commit().await?;
    // Its files after the commit: a folder is never half there.
    let removed = tokio::task::spawn_blocking(move || super::volume::remove(&dir).map_err(|e| (dir, e))).await;
    if let Ok(Err((dir, e))) = removed
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("removing the files of folder {id} ({}) failed: {e}", dir.display());
    }
    Ok(())
}

/// Grants member `user_id` of a PROJECT folder's project writing too (`writable`), or
/// reading only.
pub async fn set_access(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    id: Uuid,
    user_id: Uuid,
    writable: bool,
) -> DomainResult<Folder> {
    let f = managed(db, viewer, id).await?;
    if f.scope != Scope::Project {
        return Err(DomainError::bad_input("NOT_SHARED", None, "a USER folder is its owner's alone"));
    }
    let member = entity::project_member::Entity::find_by_id((f.row.project_id, user_id)).one(db).await?;
    if member.is_none() {
        return Err(DomainError::NotFound("user"));
    }
    let grant = folder_access::ActiveModel { folder_id: Set(id), user_id: Set(user_id), writable: Set(writable) };
    folder_access::Entity::insert(grant)
        .on_conflict(
            sea_orm::sea_query::OnConflict::columns([folder_access::Column::FolderId, folder_access::Column::UserId])
                .update_column(folder_access::Column::Writable)
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folders_name_is_a_directorys_and_no_more() {
        assert!(valid_name("data") && valid_name("model-v1.2_final"));
        for bad in ["", ".", "..", ".hidden", "a/b", "a b", "x\u{0}", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
