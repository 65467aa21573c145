//! A layer applied to a root directory, as a container runtime applies it, and safely:
//! every path is resolved inside the root (`openat2` with `RESOLVE_IN_ROOT`), so neither a
//! `..` nor a symlink, absolute or relative, of this layer or an earlier one can make an
//! entry land outside it.
//!
//! - Whiteouts: `.wh.NAME` removes `NAME` of the layers below; `.wh..wh..opq` empties its
//!   directory of what the layers below put there. Neither touches what this layer adds.
//! - Symlinks are kept as they are (inside the sandbox the root is `/`); an entry below a
//!   link that points nowhere in the root replaces the link with a directory. Hard links
//!   must name a file already in the root.
//! - Device nodes are skipped (counted); FIFOs are kept.
//! - Modes keep their permission bits without setuid and setgid; the owner may always read
//!   a file and open a directory (the sandbox's user owns everything: the server's own
//!   user, or `owner` when the server runs as root).
//! - Every byte written counts against a budget: a layer that expands past it stops with
//!   [`LayerError::TooLarge`] (the caller removes the half-made root).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{self as fs, AtFlags, FileType, Mode, OFlags, ResolveFlags, Timestamps};
use rustix::io::Errno;

/// The prefix of a whiteout entry's name.
const WHITEOUT: &str = ".wh.";
/// The name of an opaque directory's marker.
const OPAQUE: &str = ".wh..wh..opq";

/// What applying a layer did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub entries: u64,
    /// Bytes of file content written.
    pub bytes: u64,
    /// Device nodes left out.
    pub devices_skipped: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("the layer is not a valid tar archive: {0}")]
    Invalid(String),
    #[error("the image is larger than the space allowed for it ({limit} bytes unpacked)")]
    TooLarge { limit: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<Errno> for LayerError {
    fn from(e: Errno) -> Self {
        LayerError::Io(e.into())
    }
}

/// Who owns what is unpacked, when the server runs as root (else the server's own user).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Applies one uncompressed layer (a tar stream) to `root`, writing at most `budget` bytes
/// of content (decreased by what is written).
pub fn apply_layer(
    root: &Path,
    layer: impl Read,
    owner: Option<Owner>,
    budget: &mut u64,
) -> Result<Applied, LayerError> {
    let root_fd = fs::open(root, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut archive = tar::Archive::new(layer);
    let mut applied = Applied::default();
    // What this layer has put in place: whiteouts hide only what the layers below put there.
    let mut written: HashSet<PathBuf> = HashSet::new();
    for entry in archive.entries().map_err(|e| LayerError::Invalid(e.to_string()))? {
        let mut entry = entry.map_err(|e| LayerError::Invalid(e.to_string()))?;
        let path = clean(&entry.path().map_err(|e| LayerError::Invalid(e.to_string()))?)?;
        let (Some(name), parent) = (path.file_name().map(OsStr::to_owned), path.parent().unwrap_or(Path::new("")))
        else {
            continue; // the root itself
        };
        applied.entries += 1;
        let name_str = name.to_string_lossy();
        if name_str == OPAQUE {
            if let Some(dir) = open_dir(root_fd.as_fd(), parent, false)? {
                clear_below(dir.as_fd(), parent, &written)?;
            }
            continue;
        }
        if let Some(hidden) = name_str.strip_prefix(WHITEOUT) {
            let hidden_path = parent.join(hidden);
            if !written.contains(&hidden_path)
                && let Some(dir) = open_dir(root_fd.as_fd(), parent, false)?
            {
                remove_at(dir.as_fd(), OsStr::new(hidden))?;
            }
            continue;
        }
        let kind = entry.header().entry_type();
        if kind.is_character_special() || kind.is_block_special() {
            applied.devices_skipped += 1;
            continue;
        }
        if !(kind.is_file()
            || kind.is_contiguous()
            || kind.is_dir()
            || kind.is_symlink()
            || kind.is_hard_link()
            || kind.is_fifo())
        {
            continue; // PAX and GNU headers (the tar reader applies them), anything unknown
        }
        let dir = open_dir(root_fd.as_fd(), parent, true)?.expect("created");
        let mode = entry.header().mode().map_err(|e| LayerError::Invalid(e.to_string()))?;
        let mtime = entry.header().mtime().unwrap_or(0) as i64;
        let existing = fs::statat(dir.as_fd(), name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let existing_dir = existing.is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory);
        if existing.is_some() && !(kind.is_dir() && existing_dir) {
            remove_at(dir.as_fd(), &name)?;
        }
        if kind.is_dir() {
            if !existing_dir {
                fs::mkdirat(dir.as_fd(), name.as_os_str(), Mode::from_raw_mode(0o700))?;
            }
            fs::chmodat(dir.as_fd(), name.as_os_str(), dir_mode(mode), AtFlags::empty())?;
            chown(dir.as_fd(), &name, owner)?;
        } else if kind.is_symlink() {
            let target = entry
                .link_name_bytes()
                .ok_or_else(|| LayerError::Invalid(format!("symlink {} without a target", path.display())))?;
            fs::symlinkat(OsStr::from_bytes(&target), dir.as_fd(), name.as_os_str())?;
            chown(dir.as_fd(), &name, owner)?;
        } else if kind.is_hard_link() {
            let target = entry
                .link_name()
                .map_err(|e| LayerError::Invalid(e.to_string()))?
                .ok_or_else(|| LayerError::Invalid(format!("hard link {} without a target", path.display())))?;
            let target = clean(&target)?;
            let (Some(target_name), target_parent) = (target.file_name(), target.parent().unwrap_or(Path::new("")))
            else {
                return Err(LayerError::Invalid(format!("hard link {} to the root", path.display())));
            };
            let target_dir = open_dir(root_fd.as_fd(), target_parent, false)?.ok_or_else(|| {
                LayerError::Invalid(format!("hard link {} to {}, not in the image", path.display(), target.display()))
            })?;
            fs::linkat(target_dir.as_fd(), target_name, dir.as_fd(), name.as_os_str(), AtFlags::empty()).map_err(
                |e| match e {
                    Errno::NOENT => LayerError::Invalid(format!(
                        "hard link {} to {}, not in the image",
                        path.display(),
                        target.display()
                    )),
                    e => e.into(),
                },
            )?;
        } else if kind.is_fifo() {
            fs::mknodat(dir.as_fd(), name.as_os_str(), FileType::Fifo, file_mode(mode), 0)?;
            chown(dir.as_fd(), &name, owner)?;
        } else {
            let size = entry.header().size().unwrap_or(0);
            if size > *budget {
                return Err(LayerError::TooLarge { limit: *budget });
            }
            let fd = fs::openat(
                dir.as_fd(),
                name.as_os_str(),
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            let mut file = File::from(fd);
            let copied = io::copy(&mut (&mut entry).take(size), &mut file)?;
            *budget -= copied;
            applied.bytes += copied;
            fs::fchmod(file.as_fd(), file_mode(mode))?;
            if let Some(o) = owner {
                fs::fchown(file.as_fd(), Some(uid(o.uid)), Some(gid(o.gid)))?;
            }
            let at = fs::Timespec { tv_sec: mtime, tv_nsec: 0 };
            fs::futimens(file.as_fd(), &Timestamps { last_access: at, last_modification: at })?;
        }
        written.insert(path);
    }
    Ok(applied)
}

/// Makes `path` (relative to `root`) a real directory, each of its parents too: whatever
/// else is there (a file, a symlink anywhere) is replaced. For the places a sandbox mounts
/// over, so that no link of the image decides where a mount lands.
pub fn mount_point(root: &Path, path: &Path) -> Result<(), LayerError> {
    let mut dir = fs::open(root, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    for c in clean(path)?.components() {
        let name = c.as_os_str();
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        dir = match fs::openat(dir.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(_) => {
                remove_at(dir.as_fd(), name)?;
                fs::mkdirat(dir.as_fd(), name, Mode::from_raw_mode(0o755))?;
                fs::openat(dir.as_fd(), name, flags, Mode::empty())?
            }
        };
    }
    Ok(())
}

/// Whether `path` is a directory of `root`, resolved inside it.
pub fn is_dir_in_root(root: &Path, path: &str) -> bool {
    let Ok(root_fd) = fs::open(root, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) else {
        return false;
    };
    in_root(root_fd.as_fd(), Path::new(path)).is_ok()
}

/// A layer's path made relative, `.` dropped; `..` refused (no image needs it, and it is
/// how an archive tries to write outside).
fn clean(path: &Path) -> Result<PathBuf, LayerError> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(LayerError::Invalid(format!("{} leaves the image's root", path.display())));
            }
        }
    }
    Ok(out)
}

fn in_root(root: BorrowedFd<'_>, path: &Path) -> Result<OwnedFd, Errno> {
    let path: &Path = if path.as_os_str().is_empty() { Path::new(".") } else { path };
    fs::openat2(
        root,
        path,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
}

/// The directory `path` of the root, resolved inside it; made (with its parents) when
/// `create`, replacing what is not a directory; `None` when missing and not `create`.
fn open_dir(root: BorrowedFd<'_>, path: &Path, create: bool) -> Result<Option<OwnedFd>, LayerError> {
    match in_root(root, path) {
        Ok(fd) => return Ok(Some(fd)),
        Err(Errno::NOENT | Errno::NOTDIR) if create => {}
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let mut dir = in_root(root, Path::new(""))?;
    let mut so_far = PathBuf::new();
    for c in path.components() {
        so_far.push(c);
        dir = match in_root(root, &so_far) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR) => {
                let name = c.as_os_str();
                if fs::statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                    // A file, or a symlink to nowhere, where the layer has a directory.
                    remove_at(dir.as_fd(), name)?;
                }
                fs::mkdirat(dir.as_fd(), name, Mode::from_raw_mode(0o755))?;
                in_root(root, &so_far)?
            }
            Err(e) => return Err(e.into()),
        };
    }
    Ok(Some(dir))
}

/// Removes `name` of `dir`, whatever it is, a directory with everything in it.
pub(crate) fn remove_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<(), LayerError> {
    let Ok(stat) = fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(());
    };
    if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
        // Our own directories are always u+rwx; one made otherwise gets it back first.
        fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty()).ok();
        let sub = fs::openat(
            dir,
            name,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        for child in children(sub.as_fd())? {
            remove_at(sub.as_fd(), &child)?;
        }
        fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    } else {
        fs::unlinkat(dir, name, AtFlags::empty())?;
    }
    Ok(())
}

/// The names in `dir`, without `.` and `..`.
fn children(dir: BorrowedFd<'_>) -> Result<Vec<std::ffi::OsString>, LayerError> {
    let mut names = Vec::new();
    for entry in fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_owned());
        }
    }
    Ok(names)
}

/// An opaque directory: removes what the layers below put in `dir` (at `path` in the root),
/// keeping what this layer wrote there (and the directories on the way to it).
fn clear_below(dir: BorrowedFd<'_>, path: &Path, written: &HashSet<PathBuf>) -> Result<(), LayerError> {
    for child in children(dir)? {
        let child_path = path.join(&child);
        let keep = written.iter().any(|w| w.starts_with(&child_path));
        if !keep {
            remove_at(dir, &child)?;
        }
    }
    Ok(())
}

fn chown(dir: BorrowedFd<'_>, name: &OsStr, owner: Option<Owner>) -> Result<(), LayerError> {
    if let Some(o) = owner {
        fs::chownat(dir, name, Some(uid(o.uid)), Some(gid(o.gid)), AtFlags::SYMLINK_NOFOLLOW)?;
    }
    Ok(())
}

fn uid(raw: u32) -> fs::Uid {
    fs::Uid::from_raw(raw)
}

fn gid(raw: u32) -> fs::Gid {
    fs::Gid::from_raw(raw)
}

/// A file's permission bits, without setuid, setgid or sticky; its owner may read it.
fn file_mode(mode: u32) -> Mode {
    Mode::from_raw_mode((mode & 0o777) | 0o400)
}

/// A directory's permission bits and sticky bit, without setuid and setgid; its owner may
/// list, enter and fill it.
fn dir_mode(mode: u32) -> Mode {
    Mode::from_raw_mode((mode & 0o1777) | 0o700)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    enum E<'a> {
        File(&'a str, &'a [u8], u32),
        Dir(&'a str),
        Symlink(&'a str, &'a str),
        Link(&'a str, &'a str),
        Device(&'a str),
    }

    fn layer(entries: &[E]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in entries {
            let mut h = tar::Header::new_gnu();
            h.set_mtime(1_700_000_000);
            match e {
                E::File(path, data, mode) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(data.len() as u64);
                    h.set_mode(*mode);
                    // Written as it is (the builder refuses `..`, as a crafted archive would not).
                    let name = &mut h.as_old_mut().name;
                    name.fill(0);
                    name[..path.len()].copy_from_slice(path.as_bytes());
                    h.set_cksum();
                    b.append(&h, *data).expect("done");
                }
                E::Dir(path) => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(0o755);
                    h.set_size(0);
                    b.append_data(&mut h, path, &[][..]).expect("done");
                }
                E::Symlink(path, target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    h.set_mode(0o777);
                    b.append_link(&mut h, path, target).expect("done");
                }
                E::Link(path, target) => {
                    h.set_entry_type(tar::EntryType::Link);
                    h.set_size(0);
                    h.set_mode(0o644);
                    b.append_link(&mut h, path, target).expect("done");
                }
                E::Device(path) => {
                    h.set_entry_type(tar::EntryType::Char);
                    h.set_size(0);
                    h.set_mode(0o666);
                    h.set_device_major(1).expect("done");
                    h.set_device_minor(3).expect("done");
                    b.append_data(&mut h, path, &[][..]).expect("done");
                }
            }
        }
        b.into_inner().expect("done")
    }

    fn apply(root: &Path, entries: &[E]) -> Result<Applied, LayerError> {
        let mut budget = u64::MAX;
        apply_layer(root, &layer(entries)[..], None, &mut budget)
    }

    #[test]
    fn layers_stack_and_whiteouts_hide_what_is_below() {
        let dir = tempfile::tempdir().expect("done");
        let root = dir.path();
        apply(
            root,
            &[
                E::Dir("etc"),
                E::File("etc/os-release", b"base", 0o644),
                E::File("etc/gone", b"x", 0o644),
                E::Dir("opt/tool"),
                E::File("opt/tool/old", b"old", 0o644),
                E::File("opt/tool/kept-not", b"old", 0o644),
            ],
        )
        .expect("done");
        apply(
            root,
            &[
                E::File("etc/os-release", b"top", 0o644),
                E::File("etc/.wh.gone", b"", 0o644),
                E::File("opt/tool/new", b"new", 0o644),
                E::File("opt/tool/.wh..wh..opq", b"", 0o644),
                E::File("etc/.wh.os-release", b"", 0o644),
            ],
        )
        .expect("done");
        assert_eq!(
            std::fs::read(root.join("etc/os-release")).expect("done"),
            b"top",
            "a whiteout of this layer's own file hides nothing"
        );
        assert!(!root.join("etc/gone").exists());
        assert_eq!(
            std::fs::read(root.join("opt/tool/new")).expect("done"),
            b"new",
            "the opaque directory keeps this layer's files"
        );
        assert!(!root.join("opt/tool/old").exists() && !root.join("opt/tool/kept-not").exists());
    }

    #[test]
    fn nothing_lands_outside_the_root() {
        let outside = tempfile::tempdir().expect("done");
        let dir = tempfile::tempdir().expect("done");
        let root = dir.path().join("root");
        std::fs::create_dir(&root).expect("done");
        let outside_path = outside.path().to_str().expect("done").to_owned();
        apply(
            &root,
            &[
                E::Dir("inside"),
                E::Symlink("abs", "/inside"),
                E::Symlink("out", &outside_path),
                E::Symlink("rel", "../../../../../../.."),
                E::File("abs/through-absolute", b"x", 0o644),
                E::File("rel/through-relative", b"x", 0o644),
                E::File("out/through-dangling", b"x", 0o644),
            ],
        )
        .expect("done");
        assert_eq!(std::fs::read_dir(outside.path()).expect("done").count(), 0, "nothing written outside");
        // What followed a link landed where the link points in the root.
        assert!(root.join("inside/through-absolute").is_file());
        assert!(root.join("through-relative").is_file());
        assert_eq!(
            std::fs::read_link(root.join("abs")).expect("done"),
            Path::new("/inside"),
            "the link itself is kept"
        );
        // A link to nowhere in the root became the directory the layer needs.
        assert!(root.join("out/through-dangling").is_file());
        let err = apply(&root, &[E::File("../escape", b"x", 0o644)]).expect_err("refused");
        assert!(matches!(err, LayerError::Invalid(_)), "{err}");
        assert!(!dir.path().join("escape").exists());
        // A hard link to a file outside names a path in the root instead, and there is none.
        let err = apply(&root, &[E::Link("passwd", "abs/../../../../etc/passwd")]).expect_err("refused");
        assert!(matches!(err, LayerError::Invalid(_)), "{err}");
    }

    #[test]
    fn modes_lose_setuid_and_devices_are_skipped() {
        let dir = tempfile::tempdir().expect("done");
        let root = dir.path();
        let applied = apply(
            root,
            &[
                E::File("bin/su", b"#!", 0o4755),
                E::File("bin/group", b"#!", 0o2711),
                E::File("secret", b"s", 0o000),
                E::Device("dev/null"),
                E::Link("bin/su-again", "bin/su"),
            ],
        )
        .expect("done");
        let mode = |p: &str| std::fs::symlink_metadata(root.join(p)).expect("done").permissions().mode() & 0o7777;
        assert_eq!(mode("bin/su"), 0o755);
        assert_eq!(mode("bin/group"), 0o711 | 0o400);
        assert_eq!(mode("secret"), 0o400);
        assert_eq!(applied.devices_skipped, 1);
        assert!(!root.join("dev/null").exists());
        let (a, b) = (
            std::fs::metadata(root.join("bin/su")).expect("done"),
            std::fs::metadata(root.join("bin/su-again")).expect("done"),
        );
        assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "a hard link is the same file");
    }

    #[test]
    fn a_file_replaces_a_directory_and_back() {
        let dir = tempfile::tempdir().expect("done");
        let root = dir.path();
        apply(root, &[E::Dir("a/b"), E::File("a/b/c", b"c", 0o644), E::File("f", b"f", 0o644)]).expect("done");
        apply(root, &[E::File("a", b"now a file", 0o644), E::File("f/inside", b"f is a directory now", 0o644)])
            .expect("done");
        assert_eq!(std::fs::read(root.join("a")).expect("done"), b"now a file");
        assert!(root.join("f/inside").is_file());
    }

    #[test]
    fn a_layer_past_its_budget_stops() {
        let dir = tempfile::tempdir().expect("done");
        let mut budget = 10;
        let big = vec![7u8; 11];
        let err = apply_layer(dir.path(), &layer(&[E::File("big", &big, 0o644)])[..], None, &mut budget)
            .expect_err("refused");
        assert!(matches!(err, LayerError::TooLarge { limit: 10 }), "{err}");
        let mut budget = 11;
        apply_layer(dir.path(), &layer(&[E::File("big", &big, 0o644)])[..], None, &mut budget).expect("done");
        assert_eq!(budget, 0);
    }
}
