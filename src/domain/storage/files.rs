//! A folder's files, for the transports that list, upload, download, delete, make and move
//! them (`/folders/{id}/files/…`).
//!
//! Authorized as the folder is seen ([`open`]): a folder the caller may not see is
//! NOT_FOUND, writing one they may only read is FORBIDDEN. Every path is checked ([`path`]:
//! no `..`, NUL, control characters or over-long names) and resolved inside the folder from
//! a descriptor of its top with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, and the
//! last name is never followed either: a symbolic link a session made in its folder (to
//! `/etc`, to another folder) is listed, moved or deleted as a link, never followed.
//!
//! What a write past the folder's quota does is its volume's: ENOSPC from the kernel,
//! whoever writes ([`super::volume`]), QUOTA_EXCEEDED here. An upload goes to an unnamed
//! file (`O_TMPFILE`) and takes its name only once whole: a refused upload (or a crash)
//! leaves nothing of itself, and the folder keeps what it held. What the API makes is the
//! sessions' uid's, as sessions run.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{self, AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use sea_orm::ConnectionTrait;
use uuid::Uuid;

use super::folders::{self, Access, Folder};
use crate::domain::directory::auth::Viewer;
use crate::domain::{DomainError, DomainResult};

/// The longest path in a folder (bytes), its deepest nesting, and the longest name.
pub const MAX_PATH_BYTES: usize = 4096;
const MAX_DEPTH: usize = 64;
const MAX_NAME_BYTES: usize = 255;

/// The most entries a listing gives; a directory with more says it was cut.
pub const MAX_LISTED: usize = 10_000;

/// The prefix of the name an upload has for a moment, between being linked and renamed:
/// no path may name one.
const UPLOADING: &str = ".sessiond-upload-";

/// A folder opened for its files: the caller's view of it and a descriptor of its top.
pub struct Opened {
    pub folder: Folder,
    root: OwnedFd,
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    /// A symbolic link: never followed.
    Link,
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Directory => "directory",
            Kind::Link => "link",
            Kind::Other => "other",
        }
    }
}

/// One entry of a directory.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    /// Bytes of a file; 0 for anything else.
    pub size: u64,
    pub modified: i64,
}

/// A directory's entries by name; `truncated` when it had more than [`MAX_LISTED`].
#[derive(Clone, Debug)]
pub struct Listing {
    pub entries: Vec<Entry>,
    pub truncated: bool,
}

fn bad(code: &str, message: impl Into<String>) -> DomainError {
    DomainError::bad_input(code, "path".to_owned(), message)
}

/// `text` as the names of a path inside a folder (empty: its top), or why not.
pub fn path(text: &str) -> DomainResult<Vec<String>> {
    if text.len() > MAX_PATH_BYTES {
        return Err(bad("INVALID_PATH", format!("a path has at most {MAX_PATH_BYTES} bytes")));
    }
    if text.chars().any(|c| c.is_control() || crate::domain::error::is_bidi_control(c)) {
        return Err(bad("INVALID_PATH", "a path has no control characters"));
    }
    let names: Vec<String> = text.split('/').filter(|n| !n.is_empty()).map(str::to_owned).collect();
    if names.iter().any(|n| n == "." || n == "..") {
        return Err(bad("INVALID_PATH", "a path has no `.` or `..`: it stays inside the folder"));
    }
    if names.iter().any(|n| n.starts_with(UPLOADING)) {
        return Err(bad("INVALID_PATH", format!("names starting with `{UPLOADING}` are sessiond's own")));
    }
    if names.iter().any(|n| n.len() > MAX_NAME_BYTES) {
        return Err(bad("INVALID_PATH", format!("a name has at most {MAX_NAME_BYTES} bytes")));
    }
    if names.len() > MAX_DEPTH {
        return Err(bad("INVALID_PATH", format!("a path is at most {MAX_DEPTH} directories deep")));
    }
    Ok(names)
}

/// What an error of the file system means to the caller.
fn refused(e: Errno) -> DomainError {
    match e {
        Errno::NOENT | Errno::NOTDIR => DomainError::NotFound("file"),
        Errno::LOOP | Errno::XDEV => bad("SYMBOLIC_LINK", "a symbolic link in a folder is never followed"),
        Errno::NOSPC | Errno::DQUOT | Errno::FBIG => DomainError::QuotaExceeded("the folder's quota is used up".into()),
        Errno::INVAL => bad("INVALID_PATH", "not something this can be done to (a directory into itself?)"),
        Errno::EXIST | Errno::NOTEMPTY => bad("EXISTS", "something of that name is there"),
        Errno::ISDIR => bad("IS_DIRECTORY", "a directory, not a file"),
        Errno::NAMETOOLONG => bad("INVALID_PATH", "a name too long"),
        Errno::ROFS | Errno::ACCESS | Errno::PERM => DomainError::Forbidden("the folder may not be changed".into()),
        other => DomainError::invariant(format!("a folder's file: {other}")),
    }
}

impl From<Errno> for DomainError {
    fn from(e: Errno) -> Self {
        refused(e)
    }
}

/// Folder `id`, for reading its files (or writing them: `write`), as the viewer may.
pub async fn open(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid, write: bool) -> DomainResult<Opened> {
    let folder = folders::visible(db, viewer, id).await?;
    if write && folder.access != Access::ReadWrite {
        return Err(DomainError::Forbidden("you may only read this folder".into()));
    }
    let dir = folders::directory(db, &folder.row).await?;
    let root = blocking(move || {
        super::volume::mount(&dir).map_err(|e| DomainError::invariant(format!("mounting a folder: {e}")))?;
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let root = fs::open(&dir, flags, Mode::empty())?;
        // An image's directory with nothing mounted on it (mode 0, root's) is never written:
        // what landed there would be outside the quota, and hidden once it is mounted.
        if fs::fstat(&root)?.st_mode & 0o777 == 0 {
            return Err(DomainError::invariant(format!("folder {} is not mounted", dir.display())));
        }
        Ok(root)
    })
    .await?;
    Ok(Opened { folder, root })
}

/// Hands a file or directory the server made (as root) to the uid sessions run as, with
/// `mode` whatever the umask: what an upload or the API makes is the sessions' to use.
fn for_sessions(fd: &OwnedFd, mode: u32) -> DomainResult<()> {
    if crate::domain::runtime::local::sandbox::is_root() {
        let nobody = crate::domain::runtime::local::sandbox::NOBODY;
        std::os::unix::fs::fchown(fd, Some(nobody), Some(nobody))
            .map_err(|e| DomainError::invariant(format!("handing a file to the sessions' uid: {e}")))?;
    }
    Ok(fs::fchmod(fd, Mode::from_raw_mode(mode))?)
}

/// `f` on the blocking pool.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> DomainResult<T> + Send + 'static) -> DomainResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| DomainError::invariant(format!("a folder's files: {e}")))?
}

/// Directory `names` under `root`, never through a symbolic link.
fn dir_at(root: BorrowedFd<'_>, names: &[String]) -> Result<OwnedFd, Errno> {
    let path: PathBuf = if names.is_empty() { PathBuf::from(".") } else { names.iter().collect() };
    fs::openat2(
        root,
        &path,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
}

/// The directory holding the last of `names`, and that name; the top has none.
fn parent_of(root: BorrowedFd<'_>, names: &[String]) -> DomainResult<(OwnedFd, String)> {
    let Some((last, parents)) = names.split_last() else {
        return Err(bad("INVALID_PATH", "the folder itself, not something in it"));
    };
    Ok((dir_at(root, parents)?, last.clone()))
}

fn kind_of(mode: u32) -> Kind {
    match fs::FileType::from_raw_mode(mode) {
        fs::FileType::RegularFile => Kind::File,
        fs::FileType::Directory => Kind::Directory,
        fs::FileType::Symlink => Kind::Link,
        _ => Kind::Other,
    }
}

impl Opened {
    /// The entries of directory `names` (not an upload's hidden file), by name.
    pub fn list(&self, names: &[String]) -> DomainResult<Listing> {
        let dir = dir_at(self.root.as_fd(), names)?;
        let mut entries = Vec::new();
        let mut truncated = false;
        let mut reader = fs::Dir::read_from(&dir)?;
        while let Some(e) = reader.read() {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." || name.starts_with(UPLOADING) {
                continue;
            }
            if entries.len() == MAX_LISTED {
                truncated = true;
                break;
            }
            let Ok(st) = fs::statat(&dir, e.file_name(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
            let kind = kind_of(st.st_mode);
            let size = if kind == Kind::File { u64::try_from(st.st_size).unwrap_or(0) } else { 0 };
            entries.push(Entry { name, kind, size, modified: st.st_mtime });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Listing { entries, truncated })
    }

    /// What `names` is, never following a link.
    pub fn kind(&self, names: &[String]) -> DomainResult<Kind> {
        if names.is_empty() {
            return Ok(Kind::Directory);
        }
        let (dir, name) = parent_of(self.root.as_fd(), names)?;
        Ok(kind_of(fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?.st_mode))
    }

    /// File `names` for reading, and its length.
    pub fn read(&self, names: &[String]) -> DomainResult<(std::fs::File, u64)> {
        let (dir, name) = parent_of(self.root.as_fd(), names)?;
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = fs::openat(&dir, name.as_str(), flags, Mode::empty())?;
        let st = fs::fstat(&fd)?;
        if kind_of(st.st_mode) != Kind::File {
            return Err(bad("NOT_A_FILE", "only a file is downloaded"));
        }
        Ok((std::fs::File::from(fd), u64::try_from(st.st_size).unwrap_or(0)))
    }

    /// A new upload to file `names` (its directory must exist): an unnamed file of the
    /// folder's file system (`O_TMPFILE`: nothing of it is seen, nor left after a crash),
    /// written, then named by [`Upload::finish`].
    pub fn upload(&self, names: &[String]) -> DomainResult<Upload> {
        let (dir, name) = parent_of(self.root.as_fd(), names)?;
        if let Ok(st) = fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            && kind_of(st.st_mode) != Kind::File
        {
            return Err(bad("EXISTS", "something of that name is there, not a file"));
        }
        let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        let fd = fs::openat(&dir, ".", flags, Mode::from_raw_mode(0o660))?;
        for_sessions(&fd, 0o660)?;
        let file = std::fs::File::from(fd.try_clone().map_err(|e| DomainError::invariant(format!("an upload: {e}")))?);
        let quota = u64::try_from(self.folder.row.quota_bytes).unwrap_or(0);
        Ok(Upload { dir, name, unnamed: fd, file: Some(file), written: 0, quota })
    }

    /// Whether a body of `length` bytes (when told) may be uploaded at all: not one larger
    /// than the whole quota.
    pub fn accepts(&self, length: Option<u64>) -> DomainResult<()> {
        match length {
            Some(n) if n > u64::try_from(self.folder.row.quota_bytes).unwrap_or(0) => {
                Err(DomainError::QuotaExceeded("the upload is larger than the folder's quota".into()))
            }
            _ => Ok(()),
        }
    }

    /// Makes directory `names` (its parent must exist).
    pub fn make_directory(&self, names: &[String]) -> DomainResult<()> {
        let (dir, name) = parent_of(self.root.as_fd(), names)?;
        fs::mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o770))?;
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        for_sessions(&fs::openat(&dir, name.as_str(), flags, Mode::empty())?, 0o770)
    }

    /// Moves `from` to `to` (whose directory must exist; nothing of that name there).
    pub fn rename(&self, from: &[String], to: &[String]) -> DomainResult<()> {
        if to.starts_with(from) {
            return Err(bad("INVALID_PATH", "a directory does not move into itself"));
        }
        let (from_dir, from_name) = parent_of(self.root.as_fd(), from)?;
        let (to_dir, to_name) = parent_of(self.root.as_fd(), to)?;
        fs::statat(&from_dir, from_name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(fs::renameat_with(&from_dir, from_name.as_str(), &to_dir, to_name.as_str(), fs::RenameFlags::NOREPLACE)?)
    }

    /// Deletes `names`: a file or link, or a directory with everything in it (links
    /// removed, never followed).
    pub fn remove(&self, names: &[String]) -> DomainResult<()> {
        let (dir, name) = parent_of(self.root.as_fd(), names)?;
        remove_at(&dir, &name, 0)
    }
}

/// Removes `name` of `dir`, and what it holds, at most [`MAX_DEPTH`] deep below a path.
fn remove_at(dir: &OwnedFd, name: &str, depth: usize) -> DomainResult<()> {
    let st = fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if kind_of(st.st_mode) != Kind::Directory {
        return Ok(fs::unlinkat(dir, name, AtFlags::empty())?);
    }
    if depth > 4 * MAX_DEPTH {
        return Err(bad("TOO_DEEP", "a directory nested too deep to delete here"));
    }
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let inner = fs::openat(dir, name, flags, Mode::empty())?;
    loop {
        // Read a batch of names, then remove them (not while reading the directory).
        let mut names = Vec::new();
        let mut reader = fs::Dir::read_from(&inner)?;
        while let Some(e) = reader.read() {
            let n = e?.file_name().to_string_lossy().into_owned();
            if n != "." && n != ".." {
                names.push(n);
            }
            if names.len() == 1024 {
                break;
            }
        }
        if names.is_empty() {
            break;
        }
        for n in names {
            remove_at(&inner, &n, depth + 1)?;
        }
    }
    Ok(fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// A file being uploaded: unnamed until whole.
pub struct Upload {
    dir: OwnedFd,
    name: String,
    /// The unnamed file, kept open to name it.
    unnamed: OwnedFd,
    file: Option<std::fs::File>,
    written: u64,
    quota: u64,
}

impl Upload {
    /// Its file, to write (once).
    pub fn file(&mut self) -> Option<std::fs::File> {
        self.file.take()
    }

    /// Counts `n` more bytes written: past the folder's whole quota is QUOTA_EXCEEDED even
    /// where no file system holds it (a plain directory).
    pub fn wrote(&mut self, n: u64) -> DomainResult<u64> {
        self.written += n;
        if self.written > self.quota {
            return Err(DomainError::QuotaExceeded("the upload is larger than the folder's quota".into()));
        }
        Ok(self.written)
    }

    /// Names the whole upload (replacing a file of that name); whether it made a new file.
    pub fn finish(self) -> DomainResult<bool> {
        let replaced = fs::statat(&self.dir, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok();
        // Linked under a name of sessiond's own (no path may name one), then renamed: a
        // name is only ever a whole file.
        let hidden = format!("{UPLOADING}{}", Uuid::new_v4());
        let unnamed = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&self.unnamed));
        fs::linkat(fs::CWD, unnamed.as_str(), &self.dir, hidden.as_str(), AtFlags::SYMLINK_FOLLOW)?;
        if let Err(e) = fs::renameat(&self.dir, hidden.as_str(), &self.dir, self.name.as_str()) {
            fs::unlinkat(&self.dir, hidden.as_str(), AtFlags::empty()).ok();
            return Err(e.into());
        }
        Ok(!replaced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_stays_inside_its_folder() {
        assert_eq!(path("a/b//c/").expect("fine"), ["a", "b", "c"]);
        assert!(path("").expect("the top").is_empty());
        for bad in
            ["../x", "a/../../x", "./a", "a\u{0}b", "a\nb", &"x".repeat(256), &"a/".repeat(65), ".sessiond-upload-x"]
        {
            assert!(path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_link_is_never_followed() {
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("secret"), "s").expect("a file outside");
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("etc")).expect("a link");
        std::fs::create_dir(dir.path().join("d")).expect("a directory");
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("d/host")).expect("a link");
        let root = fs::open(dir.path(), OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).expect("root");
        let folder = Opened { folder: testing_folder(), root };
        let names = |p: &str| path(p).expect("a path");
        assert!(folder.list(&names("etc")).is_err(), "not listed through");
        assert!(folder.read(&names("etc/secret")).is_err(), "not read through");
        assert!(folder.upload(&names("etc/new")).is_err(), "not written through");
        assert!(folder.read(&names("d/host")).is_err(), "the last name is not followed either");
        let listed = folder.list(&names("")).expect("the top");
        let kinds: Vec<(&str, Kind)> = listed.entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(kinds, [("d", Kind::Directory), ("etc", Kind::Link)]);
        folder.remove(&names("etc")).expect("the link removed");
        assert!(outside.path().join("secret").exists(), "and nothing it named");
        folder.remove(&names("d")).expect("a directory with a link in it");
        assert!(outside.path().join("secret").exists() && !outside.path().join("new").exists());
    }

    fn testing_folder() -> Folder {
        Folder {
            row: entity::folder::Model {
                id: Uuid::nil(),
                storage: "s".into(),
                project_id: Uuid::nil(),
                name: "f".into(),
                scope: "USER".into(),
                owner_id: Uuid::nil(),
                namespace: "user".into(),
                quota_bytes: 1 << 20,
                created_at: chrono::Utc::now(),
            },
            scope: folders::Scope::User,
            access: Access::ReadWrite,
            manages: true,
        }
    }
}
