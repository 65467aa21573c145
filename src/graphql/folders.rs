//! Folders of data that outlive sessions: `folders`, `createFolder`, `renameFolder`,
//! `deleteFolder`, `setFolderAccess` ([`crate::domain::storage::folders`]).

use async_graphql::{Context, Enum, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::domain::DomainError;
use crate::domain::storage::folders::{self, Access, NewFolder, Scope};
use crate::domain::storage::mounts;

use super::context::{db, loaders, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, decode_uuid, encode, project_uuid};
use super::limits::AGGREGATE_COST;
use super::loaders::UserId;
use super::people::User;
use super::scalars::BigInt;

/// Whose a folder is.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
#[graphql(name = "FolderScope")]
pub enum FolderScope {
    /// Its owner's alone.
    User,
    /// The project's: made by an administrator; every member reads it, and writes it as
    /// granted.
    Project,
}

/// What the caller may do with a folder's files.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum FolderAccess {
    /// Reading only: a member of a PROJECT folder's project not granted writing.
    ReadOnly,
    /// Reading and writing: a USER folder's owner, an administrator of a PROJECT folder's
    /// project, or a member granted writing.
    ReadWrite,
}

/// A directory of data that outlives sessions, under a declared storage.
pub struct Folder(pub folders::Folder);

/// A directory of data that outlives sessions, under a declared storage; sessions mount it.
#[Object]
impl Folder {
    /// The folder's global id (opaque), as `MountInput.folder` and the folder mutations take
    /// it.
    pub async fn id(&self) -> ID {
        encode(NodeKind::Folder, self.0.row.id)
    }
    /// Unique among the project's folders (a USER folder: among its owner's).
    async fn name(&self) -> &str {
        &self.0.row.name
    }
    /// Whose it is: its owner's alone (USER), or the project's (PROJECT).
    async fn scope(&self) -> FolderScope {
        match self.0.scope {
            Scope::User => FolderScope::User,
            Scope::Project => FolderScope::Project,
        }
    }
    /// Its owner (USER), or the administrator who made it (PROJECT).
    async fn owner(&self, ctx: &Context<'_>) -> ApiResult<Option<User>> {
        let found = loaders(ctx)?.load_one(UserId(self.0.row.owner_id)).await?;
        Ok(found.map(User::try_from).transpose()?)
    }
    /// The declared storage it is made on.
    async fn storage(&self) -> &str {
        &self.0.row.storage
    }
    /// The most bytes it may hold, where quotas hold (see `usage`).
    async fn quota_bytes(&self) -> BigInt {
        BigInt(self.0.row.quota_bytes)
    }
    /// What it holds now, as its file system counts it (no walk of its files); null where
    /// folders are plain directories (a server not running as root), whose use is not
    /// measured and whose quota does not hold.
    async fn usage(&self, ctx: &Context<'_>) -> ApiResult<Option<FolderUsage>> {
        let used = folders::usage(db(ctx)?, &self.0).await?;
        Ok(used.map(|u| FolderUsage {
            bytes: BigInt(i64::try_from(u.bytes).unwrap_or(i64::MAX)),
            files: BigInt(i64::try_from(u.files).unwrap_or(i64::MAX)),
        }))
    }
    /// The caller's.
    async fn access(&self) -> FolderAccess {
        match self.0.access {
            Access::ReadOnly => FolderAccess::ReadOnly,
            Access::ReadWrite => FolderAccess::ReadWrite,
        }
    }
    /// Whether the caller may rename, delete and grant it.
    async fn manageable(&self) -> bool {
        self.0.manages
    }
    /// When it was made (RFC 3339, UTC).
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.row.created_at
    }
    /// The live sessions that mount it, those the caller sees, oldest first (at most 100).
    /// It is not deleted while any session mounts it.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn mounted_by(&self, ctx: &Context<'_>) -> ApiResult<Vec<super::session::Session>> {
        let found = mounts::mounted_by(db(ctx)?, self.0.row.id, mounts::MOST_MOUNTERS).await?;
        super::session::visible(ctx, found)
    }
}

/// What a folder holds.
#[derive(SimpleObject)]
pub struct FolderUsage {
    /// Bytes its files take (its file system's blocks in use).
    pub bytes: BigInt,
    /// Files and directories in it.
    pub files: BigInt,
}

/// A folder bound into a session's sandbox.
pub struct SessionMount(pub mounts::Mount);

/// A folder bound into a session's sandbox.
#[Object]
impl SessionMount {
    /// Where the session sees it: under its home directory, `$HOME`.
    async fn path(&self) -> String {
        self.0.target()
    }
    /// Whether the session may only read it.
    async fn read_only(&self) -> bool {
        self.0.read_only
    }
    /// The folder, if the caller sees it (and it still exists).
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn folder(&self, ctx: &Context<'_>) -> ApiResult<Option<Folder>> {
        seen(ctx, Some(self.0.folder)).await
    }
}

/// A folder a template's launches mount.
pub struct TemplateMount(pub mounts::MountRequest);

/// A folder a template's launches mount.
#[Object]
impl TemplateMount {
    /// Under the session's home directory, `$HOME`; null: the folder's name.
    async fn path(&self) -> Option<&str> {
        self.0.path.as_deref()
    }
    /// Whether its sessions may only read it.
    async fn read_only(&self) -> bool {
        self.0.read_only
    }
    /// The folder, if the caller sees it (and it still exists).
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn folder(&self, ctx: &Context<'_>) -> ApiResult<Option<Folder>> {
        seen(ctx, self.0.folder).await
    }
}

/// Folder `id` if the caller sees it.
async fn seen(ctx: &Context<'_>, id: Option<uuid::Uuid>) -> ApiResult<Option<Folder>> {
    let Some(id) = id else { return Ok(None) };
    match folders::visible(db(ctx)?, viewer(ctx)?, id).await {
        Ok(f) => Ok(Some(Folder(f))),
        Err(DomainError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A folder changed.
#[derive(SimpleObject)]
pub struct FolderPayload {
    /// The folder as it now is.
    pub folder: Folder,
}

#[derive(Default)]
pub struct FolderQuery;

#[Object]
impl FolderQuery {
    /// The folders of a project the caller sees, by name: their own USER folders and the
    /// project's. A project the caller may not open is NOT_FOUND.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn folders(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The project whose folders to list.")] project_id: ID,
    ) -> ApiResult<Vec<Folder>> {
        let project = project_uuid(&project_id)?;
        Ok(folders::list(db(ctx)?, viewer(ctx)?, project).await?.into_iter().map(Folder).collect())
    }
}

#[derive(Default)]
pub struct FolderMutation;

fn folder_uuid(id: &ID) -> Result<uuid::Uuid, DomainError> {
    decode_uuid(id, NodeKind::Folder).ok_or(DomainError::NotFound("folder"))
}

#[Object]
impl FolderMutation {
    /// Makes a folder in a project: a USER folder for a member, a PROJECT one for an
    /// administrator of the project (FORBIDDEN otherwise). `quotaBytes` at most the
    /// storage's (its default); `storage` the first one open to the project unless named.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn create_folder(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The project it belongs to.")] project_id: ID,
        #[graphql(desc = "1 to 64 letters, digits, `-`, `_` and `.`, not starting with `.`; unique (FOLDER_EXISTS).")]
        name: String,
        #[graphql(desc = "USER: the caller's own (for a member); PROJECT: the project's (for an administrator).")]
        scope: FolderScope,
        #[graphql(desc = "The most bytes it may hold: a whole number from 1 MiB to the storage's quota, the default.")]
        quota_bytes: Option<f64>,
        #[graphql(desc = "A declared storage open to the project; default: the first storage open to it, by name.")]
        storage: Option<String>,
    ) -> ApiResult<FolderPayload> {
        let quota_bytes = match quota_bytes {
            Some(q) if !(q.is_finite() && q >= 1.0 && q.fract() == 0.0 && q <= 1e18) => {
                return Err(DomainError::bad_input(
                    "INVALID_QUOTA",
                    "quotaBytes".to_owned(),
                    "a whole number of bytes",
                )
                .into());
            }
            other => other.map(|q| q as i64),
        };
        let new = NewFolder {
            project_id: project_uuid(&project_id)?,
            name,
            scope: match scope {
                FolderScope::User => Scope::User,
                FolderScope::Project => Scope::Project,
            },
            quota_bytes,
            storage,
        };
        let made = folders::create(db(ctx)?, viewer(ctx)?, &new, crate::domain::model::clock::now()).await?;
        Ok(FolderPayload { folder: Folder(made) })
    }

    /// Renames a folder the caller manages (FORBIDDEN for a member of a PROJECT folder's
    /// project; NOT_FOUND for one they do not see).
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn rename_folder(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The folder.")] id: ID,
        #[graphql(desc = "Its new name, under `createFolder`'s rules; FOLDER_EXISTS when taken.")] name: String,
    ) -> ApiResult<FolderPayload> {
        let renamed = folders::rename(db(ctx)?, viewer(ctx)?, folder_uuid(&id)?, &name).await?;
        Ok(FolderPayload { folder: Folder(renamed) })
    }

    /// Deletes a folder the caller manages, and its files. The id of the deleted folder.
    #[graphql(complexity = "AGGREGATE_COST")]
    async fn delete_folder(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The folder; refused (FOLDER_MOUNTED) while a live session mounts it.")] id: ID,
    ) -> ApiResult<ID> {
        folders::delete(db(ctx)?, viewer(ctx)?, folder_uuid(&id)?).await?;
        Ok(id)
    }

    /// Grants a member of a PROJECT folder's project writing too, or reading only: for an
    /// administrator of the project. Someone not a member is NOT_FOUND.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn set_folder_access(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A PROJECT folder the caller manages (NOT_SHARED for a USER folder).")] id: ID,
        #[graphql(desc = "A member of the folder's project.")] user_id: ID,
        #[graphql(desc = "READ_WRITE lets them write; READ_ONLY leaves them reading only.")] access: FolderAccess,
    ) -> ApiResult<FolderPayload> {
        let user = decode_uuid(&user_id, NodeKind::User).ok_or(DomainError::NotFound("user"))?;
        let writable = access == FolderAccess::ReadWrite;
        let folder = folders::set_access(db(ctx)?, viewer(ctx)?, folder_uuid(&id)?, user, writable).await?;
        Ok(FolderPayload { folder: Folder(folder) })
    }
}
