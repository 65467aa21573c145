//! A folder's volume: what holds its files, and its quota.
//!
//! Where the server is root (and e2fsprogs is there), a folder is a sparse ext4 image of
//! its quota (`<storage path>/<id>.ext4`) loop-mounted at its directory (`<storage
//! path>/<id>`): a write past the quota fails with ENOSPC, whoever writes (a session, an
//! upload), and its use is `statvfs` of the mount, current and without a walk of its files.
//! The directory under the mount is root's, mode 0 (nothing lands there while it is not
//! mounted), and a sandbox binds a folder only once it is mounted ([`ready`]). The kernels
//! this was built on have no quota support (`CONFIG_QUOTA`), so no project quotas; this
//! needs none.
//!
//! Elsewhere (an unprivileged server) a folder is a plain directory: no quota holds for
//! what sessions write, and its use is not measured ([`usage`] is `None`).
//!
//! An image is mounted when it is first used after a restart ([`mount`]: binding it,
//! uploading, reading its use) and unmounted when the folder is deleted ([`remove`]).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::domain::runtime::local::sandbox::{NOBODY, is_root};

/// The smallest quota: an ext4 image smaller than this holds next to nothing.
pub const MIN_QUOTA_BYTES: i64 = 1 << 20;

/// Bytes of the image per inode: 131 072 files per GiB.
const BYTES_PER_INODE: &str = "8192";

/// What a folder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub files: u64,
}

/// The image behind folder directory `dir`.
fn image_of(dir: &Path) -> PathBuf {
    dir.with_extension("ext4")
}

/// Whether folders made now are images: the server is root and can make and mount them.
pub fn images_here() -> bool {
    is_root() && ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"].iter().any(|p| Path::new(p).exists())
}

fn run(program: &str, args: &[&std::ffi::OsStr]) -> io::Result<()> {
    let out = Command::new(program).args(args).stdin(std::process::Stdio::null()).output()?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    Err(io::Error::other(format!("{program} failed ({}): {why}", out.status)))
}

/// Makes the volume of a new folder at `dir` holding at most `quota` bytes: an image,
/// mounted, where [`images_here`]; else a directory. Its top is the sessions' uid's (as
/// sessions run), mode 0770.
pub fn make(dir: &Path, quota: u64) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if !images_here() {
        std::fs::DirBuilder::new().mode(0o770).create(dir)?;
        if is_root() {
            std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY))?;
        }
        return Ok(());
    }
    std::fs::DirBuilder::new().mode(0o000).create(dir)?;
    let image = image_of(dir);
    let made = (|| {
        // The file system's own blocks (journal, inode tables) come on top of the quota:
        // sized once at the quota, then grown by what they took, so that about the quota
        // is free to the folder.
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&image)?;
        file.set_len(quota)?;
        let owner = format!("root_owner={NOBODY}:{NOBODY},lazy_itable_init=1,lazy_journal_init=1");
        let mut args: Vec<&std::ffi::OsStr> =
            ["-q", "-F", "-m", "0", "-i", BYTES_PER_INODE, "-E", &owner].map(std::ffi::OsStr::new).to_vec();
        args.push(image.as_os_str());
        run("mkfs.ext4", &args)?;
        let overhead = quota.saturating_sub(free_of_image(&image)?);
        file.set_len(quota + overhead)?;
        run("resize2fs", &[std::ffi::OsStr::new("-f"), image.as_os_str()])?;
        drop(file);
        mount(dir)?;
        // Its own top: the sessions' uid's, without the `lost+found` a fresh ext4 has (its
        // checker makes one again when it needs it).
        std::fs::remove_dir(dir.join("lost+found")).ok();
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o770))
    })();
    if made.is_err() {
        unmount(dir).ok();
        std::fs::remove_file(&image).ok();
        std::fs::remove_dir(dir).ok();
    }
    made
}

/// What `dumpe2fs -h` says is free in an unmounted image, in bytes.
fn free_of_image(image: &Path) -> io::Result<u64> {
    let out = Command::new("dumpe2fs").arg("-h").arg(image).stderr(std::process::Stdio::null()).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok())
    };
    match (field("Free blocks:"), field("Block size:")) {
        (Some(free), Some(size)) => Ok(free * size),
        _ => Err(io::Error::other("dumpe2fs said nothing of the image's free blocks")),
    }
}

/// Whether `dir` is a mount point (another device than its parent's).
fn mounted(dir: &Path) -> io::Result<bool> {
    let parent = dir.parent().ok_or_else(|| io::Error::other("a folder's directory has a parent"))?;
    Ok(std::fs::metadata(dir)?.dev() != std::fs::metadata(parent)?.dev())
}

/// Whether the folder at `dir` is an image (else a directory).
pub fn is_image(dir: &Path) -> bool {
    image_of(dir).exists()
}

/// Held while an image is mounted, unmounted or removed: two at once (a session's start and
/// an upload after a restart) would mount it twice.
static MOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn held() -> std::sync::MutexGuard<'static, ()> {
    MOUNTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Mounts the folder's image at `dir` unless it is mounted (or is no image).
pub fn mount(dir: &Path) -> io::Result<()> {
    let _held = held();
    if !is_image(dir) || mounted(dir)? {
        return Ok(());
    }
    let image = image_of(dir);
    let args = [std::ffi::OsStr::new("-o"), "loop,nosuid,nodev".as_ref(), image.as_os_str(), dir.as_os_str()];
    run("mount", &args)
}

fn unmount(dir: &Path) -> io::Result<()> {
    if !mounted(dir)? {
        return Ok(());
    }
    // Lazily if something still holds it open: gone from the tree at once, its loop device
    // freed once the last file closes.
    run("umount", &[dir.as_os_str()]).or_else(|_| run("umount", &[std::ffi::OsStr::new("-l"), dir.as_os_str()]))
}

/// Whether a sandbox may bind the folder at `dir`: a directory, mounted when it is an image
/// (on a machine that does not see the mount, its files are not there).
pub fn ready(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("the folder's directory {} is not there", dir.display()));
    }
    let unmounted = std::fs::metadata(dir).map_err(|e| e.to_string())?.mode() & 0o777 == 0;
    if unmounted || is_image(dir) && !mounted(dir).map_err(|e| e.to_string())? {
        return Err(format!("the folder {} is not mounted on this machine", dir.display()));
    }
    Ok(())
}

/// Removes the folder at `dir` with its files: its image unmounted and deleted, or its
/// directory (a symbolic link inside is removed, never followed).
pub fn remove(dir: &Path) -> io::Result<()> {
    let _held = held();
    if is_image(dir) {
        // Renamed first: nothing mounts it again meanwhile.
        let gone = dir.with_extension("ext4.removed");
        std::fs::rename(image_of(dir), &gone)?;
        if dir.exists() {
            while mounted(dir)? {
                unmount(dir)?;
            }
            std::fs::remove_dir(dir)?;
        }
        return std::fs::remove_file(gone);
    }
    std::fs::remove_dir_all(dir)
}

/// What the folder at `dir` holds, as its file system counts it (mounted first); `None`
/// for a plain directory, whose use is not measured.
pub fn usage(dir: &Path) -> io::Result<Option<Usage>> {
    if !is_image(dir) {
        return Ok(None);
    }
    mount(dir)?;
    let s = rustix::fs::statvfs(dir).map_err(io::Error::from)?;
    // ext4 keeps its first ten inodes (the root's among them) for itself.
    let reserved = 10;
    Ok(Some(Usage {
        bytes: (s.f_blocks - s.f_bfree) * s.f_frsize,
        files: (s.f_files - s.f_ffree).saturating_sub(reserved),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_holds_its_quota_and_no_more() {
        if !images_here() {
            let required = std::env::var("SESSIOND_REQUIRE_QUOTAS").is_ok_and(|v| v == "1");
            assert!(!required, "quotas are required (SESSIOND_REQUIRE_QUOTAS=1) but folders here are directories");
            return; // an unprivileged run: folders are directories
        }
        let storage = tempfile::tempdir().expect("tempdir");
        let dir = storage.path().join("f");
        // Unmounted whatever happens: no mount outlives the test.
        struct Unmount(PathBuf);
        impl Drop for Unmount {
            fn drop(&mut self) {
                remove(&self.0).ok();
            }
        }
        let _unmount = Unmount(dir.clone());
        make(&dir, 4 << 20).expect("made");
        assert!(mounted(&dir).expect("stat") && ready(&dir).is_ok());
        let before = usage(&dir).expect("usage").expect("measured");
        assert_eq!(before.files, 0, "{before:?}");
        let e = {
            use std::io::Write;
            let mut f = std::fs::File::create(dir.join("big")).expect("a file");
            let chunk = vec![7u8; 64 << 10];
            (0..96).try_for_each(|_| f.write_all(&chunk)).and_then(|()| f.sync_all()).expect_err("past the quota")
        };
        assert_eq!(e.raw_os_error(), Some(28), "ENOSPC: {e}");
        let kept = std::fs::metadata(dir.join("big")).expect("what fit").len();
        assert!(kept > 3 << 20 && kept <= 4 << 20, "about the quota fit: {kept}");
        let after = usage(&dir).expect("usage").expect("measured");
        assert_eq!(after.files, 1);
        assert!(after.bytes >= kept, "{after:?}");
        unmount(&dir).expect("unmounted");
        assert!(ready(&dir).is_err(), "not bound while not mounted");
        mount(&dir).expect("mounted again");
        assert_eq!(std::fs::metadata(dir.join("big")).expect("still there").len(), kept);
        remove(&dir).expect("removed");
        assert!(!dir.exists() && !image_of(&dir).exists());
    }
}
