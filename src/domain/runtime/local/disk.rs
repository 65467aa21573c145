//! What a session's files take on disk, for the work directory's limit: the files of its
//! tree, and the files its processes still hold open after deleting them (they take their
//! space until closed, and no walk of the tree finds them).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// How often the session's files are measured at most: every second, or ten times
/// the last measurement's length if that is longer (a huge tree is measured less often).
pub const DISK_EVERY: Duration = Duration::from_secs(1);
/// Entries a measurement walks at most: past them the directory counts as over its limit
/// (a tree of hundreds of thousands of empty files is no better than a full disk).
const DISK_MAX_ENTRIES: u64 = 200_000;
/// Directories deep a measurement goes at most (one descriptor open per level); deeper
/// counts as over the limit.
const DISK_MAX_DEPTH: usize = 128;

/// The bytes the files under `dir` take on disk; `None` past [`DISK_MAX_ENTRIES`] or
/// [`DISK_MAX_DEPTH`]. Walked by descriptors, each directory opened relative to its parent
/// and never through a symbolic link: a session swapping a directory for a link cannot
/// make this walk anything outside its own tree.
fn tree(dir: &Path) -> Option<u64> {
    use nix::dir::Dir;
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::{Mode, SFlag, fstatat};
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let names = |d: &mut Dir| -> Vec<std::ffi::CString> {
        d.iter()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect()
    };
    let mut root = Dir::open(dir, flags, Mode::empty()).ok()?;
    let first = names(&mut root);
    let mut stack = vec![(root, first)];
    let (mut bytes, mut entries) = (0u64, 0u64);
    loop {
        let depth = stack.len();
        let Some((d, pending)) = stack.last_mut() else { break };
        let Some(name) = pending.pop() else {
            stack.pop();
            continue;
        };
        entries += 1;
        if entries > DISK_MAX_ENTRIES {
            return None;
        }
        let Ok(st) = fstatat(&*d, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else { continue };
        bytes += u64::try_from(st.st_blocks).unwrap_or(0) * 512;
        if st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFDIR.bits() {
            if depth >= DISK_MAX_DEPTH {
                return None;
            }
            if let Ok(mut sub) = Dir::openat(&*d, name.as_c_str(), flags, Mode::empty()) {
                let inside = names(&mut sub);
                stack.push((sub, inside));
            }
        }
    }
    Some(bytes)
}

/// The bytes the session's files take: those under `dir` ([`tree`]) and those on the same
/// file system that `pids` hold open with no name left ([`held_deleted`]); `None` when
/// either is past its bounds.
pub fn used(dir: &Path, pids: &[u32]) -> Option<u64> {
    let device = std::fs::symlink_metadata(dir).ok()?.dev();
    Some(tree(dir)? + held_deleted(pids, device)?)
}

/// The bytes of the files on `device` that `pids` hold open and that no directory names
/// any more (deleted while open, or made with `O_TMPFILE`), each file counted once however
/// many descriptors hold it. `None` past [`DISK_MAX_ENTRIES`] descriptors.
pub fn held_deleted(pids: &[u32], device: u64) -> Option<u64> {
    let mut seen: HashSet<u64> = HashSet::new();
    let (mut bytes, mut descriptors) = (0u64, 0u64);
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in fds.flatten() {
            descriptors += 1;
            if descriptors > DISK_MAX_ENTRIES {
                return None;
            }
            // The link names what the descriptor holds; only a file it names as deleted
            // is looked at further (sockets, pipes and named files are not).
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            if !target.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") {
                continue;
            }
            // Through the descriptor: the open file itself, not a path.
            let Ok(meta) = std::fs::metadata(fd.path()) else { continue };
            if meta.dev() == device && meta.nlink() == 0 && meta.is_file() && seen.insert(meta.ino()) {
                bytes += meta.blocks() * 512;
            }
        }
    }
    Some(bytes)
}
