//! The image store of one machine, under the runtime directory:
//!
//! ```text
//! <runtime dir>/oci/blobs/sha256/<hex>        verified blobs: configs and layers, as fetched
//!                   roots/<hex>/rootfs/       an image's unpacked root (manifest digest)
//!                   roots/<hex>/image.json    its record: reference, config, sizes
//!                   roots/<hex>/used          touched by every session that runs it; each
//!                                             holds a shared flock on it while it runs
//!                   refs/<escaped reference>  the manifest digest a reference was pulled as
//!                   locks/<hex>               flock: one fetch of a blob, one unpack of a root
//!                   tmp/                      partial blobs and roots, renamed into place
//! ```
//!
//! Everything appears by a rename of a complete, verified file or directory, so a crash
//! leaves only `tmp/` behind (emptied when the store opens), never a half blob or root.

use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::unpack::{self, LayerError, Owner};
use super::{ImageConfig, PullError};

/// The directories a session's sandbox mounts over in an image's root.
const MOUNT_POINTS: [&str; 4] = ["proc", "dev", "tmp", "home/work"];

#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// A layer as the manifest names it, with its config's `diff_id` (the uncompressed tar's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    pub digest: String,
    pub media_type: String,
    pub diff_id: Option<String>,
    pub size: u64,
}

/// What an image is made of, as its manifest and config say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts {
    /// The manifest's digest.
    pub digest: String,
    /// The reference it is pulled (or imported) as.
    pub reference: String,
    pub config: ImageConfig,
    /// The config's blob.
    pub config_blob: String,
    pub layers: Vec<Layer>,
}

impl Parts {
    /// An image's parts as its manifest (of digest `digest`) and its config's bytes say.
    pub fn of(
        digest: String,
        reference: String,
        manifest: &oci_client::manifest::OciImageManifest,
        config: &[u8],
    ) -> Result<Self, PullError> {
        let diff_ids = diff_ids(config);
        if !diff_ids.is_empty() && diff_ids.len() != manifest.layers.len() {
            return Err(PullError::Invalid(format!(
                "the config lists {} layers, the manifest {}",
                diff_ids.len(),
                manifest.layers.len()
            )));
        }
        let layers = manifest
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| Layer {
                digest: l.digest.clone(),
                media_type: l.media_type.clone(),
                diff_id: diff_ids.get(i).cloned(),
                size: u64::try_from(l.size).unwrap_or(0),
            })
            .collect();
        Ok(Self {
            digest,
            reference,
            config: ImageConfig::parse(config)?,
            config_blob: manifest.config.digest.clone(),
            layers,
        })
    }
}

/// The config's `rootfs.diff_ids`, in layer order.
fn diff_ids(config: &[u8]) -> Vec<String> {
    serde_json::from_slice::<serde_json::Value>(config)
        .ok()
        .and_then(|c| {
            c["rootfs"]["diff_ids"]
                .as_array()
                .map(|ids| ids.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect())
        })
        .unwrap_or_default()
}

/// What the store knows of an unpacked image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The manifest's digest.
    pub digest: String,
    /// The reference it was first pulled as.
    pub reference: String,
    pub config: ImageConfig,
    /// The config's blob.
    #[serde(default)]
    pub config_blob: String,
    pub layers: Vec<String>,
    /// Bytes of its blobs (compressed) and of its unpacked files.
    pub compressed: u64,
    pub unpacked: u64,
}

/// An unpacked image on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unpacked {
    pub record: Record,
    pub root: PathBuf,
    /// When a session last started with it.
    pub used: Option<SystemTime>,
}

impl Store {
    /// The store under `runtime_dir`, made if missing.
    pub fn open(runtime_dir: &Path) -> io::Result<Self> {
        let dir = runtime_dir.join("oci");
        for sub in ["blobs/sha256", "roots", "refs", "locks", "tmp"] {
            fs::create_dir_all(dir.join(sub))?;
        }
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes what no pull is writing any more (at the server's start): a partial file is
    /// named after its lock, which a live pull holds.
    pub fn clean(&self) {
        let Ok(entries) = fs::read_dir(self.dir.join("tmp")) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let hex = name.split('.').next().unwrap_or_default().trim_start_matches("root-");
            let Ok(lock) = self.lock_file(hex) else { continue };
            if lock.try_lock().is_ok() {
                remove_any(&entry.path());
            }
        }
    }

    /// The hex of a `sha256:` digest, checked: the only names the store makes files of.
    pub fn hex(digest: &str) -> Result<&str, PullError> {
        match digest.strip_prefix("sha256:") {
            Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => {
                Ok(hex)
            }
            _ => Err(PullError::Invalid(format!("unsupported digest {digest:?} (sha256 only)"))),
        }
    }

    pub fn blob(&self, digest: &str) -> Result<PathBuf, PullError> {
        Ok(self.dir.join("blobs/sha256").join(Self::hex(digest)?))
    }

    pub fn has_blob(&self, digest: &str) -> bool {
        self.blob(digest).is_ok_and(|p| p.is_file())
    }

    fn lock_file(&self, hex: &str) -> io::Result<File> {
        File::options().create(true).truncate(false).write(true).open(self.dir.join("locks").join(hex))
    }

    /// Holds the lock of `digest` (blocking) until the file returned is dropped.
    pub fn lock(&self, digest: &str) -> Result<File, PullError> {
        let file = self.lock_file(Self::hex(digest)?).map_err(|e| PullError::io("the store's lock", &e))?;
        file.lock().map_err(|e| PullError::io("the store's lock", &e))?;
        Ok(file)
    }

    /// A new partial file for `digest`, in `tmp/`.
    pub fn partial(&self, digest: &str) -> Result<PathBuf, PullError> {
        Ok(self.dir.join("tmp").join(format!("{}.{}.part", Self::hex(digest)?, std::process::id())))
    }

    /// Moves a complete, verified partial file into place.
    pub fn commit_blob(&self, partial: &Path, digest: &str) -> Result<(), PullError> {
        fs::rename(partial, self.blob(digest)?).map_err(|e| PullError::io("storing a blob", &e))
    }

    /// Streams `from` into the store as a blob whose digest is computed as it goes (and
    /// must be `expected` where the source names one), taking at most `budget` bytes from
    /// it. Returns the digest and the size. The partial file is named after a lock of its
    /// own, held while it is written, so [`Self::clean`] leaves it alone.
    pub fn ingest(
        &self,
        from: &mut dyn Read,
        expected: Option<&str>,
        budget: &mut u64,
    ) -> Result<(String, u64), PullError> {
        let token = crate::domain::directory::secrets::hex(&rand::random::<[u8; 32]>());
        let lock = self.lock_file(&token).map_err(|e| PullError::io("the store's lock", &e))?;
        lock.lock().map_err(|e| PullError::io("the store's lock", &e))?;
        let partial = self.dir.join("tmp").join(format!("{token}.{}.part", std::process::id()));
        let written = (|| {
            let mut file = File::create(&partial).map_err(|e| PullError::io("writing a blob", &e))?;
            let mut hashing = Hashing::new(from.take(budget.saturating_add(1)));
            let size = io::copy(&mut hashing, &mut file).map_err(|e| PullError::io("writing a blob", &e))?;
            if size > *budget {
                return Err(PullError::TooLarge(format!("more bytes than the image cache's limit of {}", *budget)));
            }
            let digest = hashing.digest();
            if let Some(expected) = expected
                && expected != digest
            {
                return Err(PullError::DigestMismatch { expected: expected.to_owned(), actual: digest });
            }
            let _blob = self.lock(&digest)?;
            if self.has_blob(&digest) {
                fs::remove_file(&partial).ok();
            } else {
                self.commit_blob(&partial, &digest)?;
            }
            *budget -= size;
            Ok((digest, size))
        })();
        if written.is_err() {
            fs::remove_file(&partial).ok();
        }
        fs::remove_file(self.dir.join("locks").join(&token)).ok();
        written
    }

    pub fn root(&self, digest: &str) -> Result<PathBuf, PullError> {
        Ok(self.dir.join("roots").join(Self::hex(digest)?))
    }

    /// The unpacked image of `digest`, if it is here.
    pub fn unpacked(&self, digest: &str) -> Option<Unpacked> {
        let dir = self.root(digest).ok()?;
        let record: Record = serde_json::from_slice(&fs::read(dir.join("image.json")).ok()?).ok()?;
        let used = fs::metadata(dir.join("used")).and_then(|m| m.modified()).ok();
        Some(Unpacked { record, root: dir.join("rootfs"), used })
    }

    /// Marks `digest` as used now (least recently used goes first).
    pub fn touch(&self, digest: &str) -> Result<(), PullError> {
        let path = self.root(digest)?.join("used");
        File::create(&path).map(drop).map_err(|e| PullError::io("marking an image used", &e))
    }

    /// Holds `digest`'s image as in use until the file returned is dropped (a shared lock:
    /// any number of sessions; [`Self::evict`] and [`Self::prune`] leave it).
    pub fn hold(&self, digest: &str) -> Result<File, PullError> {
        let path = self.root(digest)?.join("used");
        let file = File::create(&path).map_err(|e| PullError::io("marking an image used", &e))?;
        file.lock_shared().map_err(|e| PullError::io("marking an image used", &e))?;
        Ok(file)
    }

    /// Whether a session runs `digest`'s image now.
    pub fn in_use(&self, digest: &str) -> bool {
        let Ok(dir) = self.root(digest) else { return false };
        let Ok(used) = File::options().read(true).open(dir.join("used")) else { return false };
        used.try_lock().is_err()
    }

    /// Bytes the store holds: every blob, and every root's unpacked files.
    pub fn size(&self) -> u64 {
        let blobs: u64 = fs::read_dir(self.dir.join("blobs/sha256"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        blobs + self.list().iter().map(|i| i.record.unpacked).sum::<u64>()
    }

    /// Removes the images no session runs, least recently used first, until the store
    /// holds at most `limit` bytes (all of them with `limit` 0), with the blobs no image
    /// left needs. An image in use is never removed. Returns the digests removed.
    pub fn evict(&self, limit: u64) -> Vec<String> {
        let mut images = self.list();
        images.sort_by_key(|i| i.used);
        let mut size = self.size();
        let mut removed = Vec::new();
        for image in images {
            if size <= limit && limit > 0 {
                break;
            }
            let digest = image.record.digest.clone();
            // A session holding it keeps it; an unpack of it in progress holds its lock.
            let Ok(unpacking) = self.lock_file(Self::hex(&digest).unwrap_or_default()) else { continue };
            if unpacking.try_lock().is_err() {
                continue;
            }
            let used = File::options().create(true).truncate(false).write(true).open(image.root.with_file_name("used"));
            let Ok(used) = used else { continue };
            if used.try_lock().is_err() {
                continue;
            }
            let Ok(dir) = self.root(&digest) else { continue };
            let gone = self.dir.join("tmp").join(format!(
                "gone-{}.{}",
                Self::hex(&digest).unwrap_or_default(),
                std::process::id()
            ));
            if fs::rename(&dir, &gone).is_err() {
                continue;
            }
            remove_any(&gone);
            size = size.saturating_sub(image.record.unpacked);
            removed.push(digest);
        }
        // Blobs of no image left, and references to images gone.
        let needed: std::collections::HashSet<String> =
            self.list().into_iter().flat_map(|i| i.record.layers.into_iter().chain([i.record.config_blob])).collect();
        if !removed.is_empty() {
            for entry in fs::read_dir(self.dir.join("blobs/sha256")).into_iter().flatten().flatten() {
                let digest = format!("sha256:{}", entry.file_name().to_string_lossy());
                if !needed.contains(&digest) {
                    // A pull in progress holds its blob's lock: a blob it just fetched stays.
                    let Ok(lock) = self.lock_file(entry.file_name().to_str().unwrap_or_default()) else { continue };
                    if lock.try_lock().is_ok() {
                        fs::remove_file(entry.path()).ok();
                    }
                }
            }
            for entry in fs::read_dir(self.dir.join("refs")).into_iter().flatten().flatten() {
                let to = fs::read_to_string(entry.path()).unwrap_or_default();
                if removed.iter().any(|d| *d == to.trim()) {
                    fs::remove_file(entry.path()).ok();
                }
            }
        }
        removed
    }

    /// The manifest digest `reference` was last pulled as here.
    pub fn resolved(&self, reference: &str) -> Option<String> {
        fs::read_to_string(self.dir.join("refs").join(escape(reference))).ok().map(|s| s.trim().to_owned())
    }

    pub fn remember(&self, reference: &str, digest: &str) -> Result<(), PullError> {
        let tmp = self.dir.join("refs").join(format!(".{}.{}", escape(reference), std::process::id()));
        fs::write(&tmp, digest)
            .and_then(|()| fs::rename(&tmp, self.dir.join("refs").join(escape(reference))))
            .map_err(|e| PullError::io("remembering a reference", &e))
    }

    /// Every unpacked image here.
    pub fn list(&self) -> Vec<Unpacked> {
        let Ok(entries) = fs::read_dir(self.dir.join("roots")) else { return Vec::new() };
        let mut all: Vec<Unpacked> = entries
            .flatten()
            .filter_map(|e| self.unpacked(&format!("sha256:{}", e.file_name().to_string_lossy())))
            .collect();
        all.sort_by(|a, b| a.record.digest.cmp(&b.record.digest));
        all
    }

    /// Unpacks the image of manifest `digest` from its layers (all in the store) into its
    /// root, once: a second caller waits for the first and finds it done. Each layer's
    /// uncompressed bytes must match its `diff_id`; the root may hold at most `limit` bytes.
    pub fn unpack(&self, parts: &Parts, owner: Option<Owner>, limit: u64) -> Result<Unpacked, PullError> {
        let digest = parts.digest.as_str();
        let _lock = self.lock(digest)?;
        if let Some(done) = self.unpacked(digest) {
            return Ok(done);
        }
        let tmp = self.dir.join("tmp").join(format!("root-{}.{}", Self::hex(digest)?, std::process::id()));
        remove_any(&tmp);
        if let Err(e) = self.unpack_into(&tmp, parts, owner, limit) {
            remove_any(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, self.root(digest)?).map_err(|e| {
            remove_any(&tmp);
            PullError::io("storing an unpacked image", &e)
        })?;
        self.unpacked(digest).ok_or_else(|| PullError::Invalid("the unpacked image vanished".into()))
    }

    fn unpack_into(&self, tmp: &Path, parts: &Parts, owner: Option<Owner>, limit: u64) -> Result<(), PullError> {
        let (reference, layers) = (&parts.reference, &parts.layers);
        let rootfs = tmp.join("rootfs");
        fs::create_dir_all(&rootfs).map_err(|e| PullError::io("making a root", &e))?;
        let mut budget = limit;
        for layer in layers {
            let file = File::open(self.blob(&layer.digest)?).map_err(|e| PullError::io("reading a layer", &e))?;
            let mut reader = Hashing::new(decompress(&layer.media_type, BufReader::new(file))?);
            unpack::apply_layer(&rootfs, &mut reader, owner, &mut budget).map_err(|e| match e {
                LayerError::TooLarge { .. } => PullError::TooLarge(format!(
                    "{reference} unpacks to more than the image cache's limit of {limit} bytes"
                )),
                LayerError::Invalid(why) => PullError::Invalid(format!("layer {}: {why}", layer.digest)),
                LayerError::Io(e) => PullError::io(&format!("unpacking layer {}", layer.digest), &e),
            })?;
            // The tar's end padding, and whatever follows, counts for the digest.
            io::copy(&mut reader, &mut io::sink()).map_err(|e| PullError::io("reading a layer", &e))?;
            let actual = reader.digest();
            if let Some(expected) = &layer.diff_id
                && *expected != actual
            {
                return Err(PullError::DigestMismatch { expected: expected.clone(), actual });
            }
        }
        // Where the sandbox mounts: real directories, whatever the image put there.
        for at in MOUNT_POINTS {
            unpack::mount_point(&rootfs, Path::new(at)).map_err(|e| match e {
                LayerError::Io(e) => PullError::io("making the sandbox's mount points", &e),
                other => PullError::Invalid(other.to_string()),
            })?;
        }
        if let Some(o) = owner {
            std::os::unix::fs::chown(&rootfs, Some(o.uid), Some(o.gid))
                .map_err(|e| PullError::io("a root's owner", &e))?;
        }
        let record = Record {
            digest: parts.digest.clone(),
            reference: reference.clone(),
            config: parts.config.clone(),
            config_blob: parts.config_blob.clone(),
            layers: layers.iter().map(|l| l.digest.clone()).collect(),
            compressed: layers.iter().map(|l| l.size).sum(),
            unpacked: limit - budget,
        };
        let json = serde_json::to_vec_pretty(&record).expect("a record serialises");
        fs::write(tmp.join("image.json"), json).map_err(|e| PullError::io("writing an image's record", &e))?;
        Ok(())
    }
}

/// A name (an image's, a reference) as one file name: anything but letters, digits, `.` and
/// `-` escaped.
pub(crate) fn escape(reference: &str) -> String {
    reference
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' => char::from(b).to_string(),
            b => format!("_{b:02x}"),
        })
        .collect()
}

fn remove_any(path: &Path) {
    let Some(parent) = path.parent() else { return };
    let Some(name) = path.file_name() else { return };
    if let Ok(dir) = File::open(parent) {
        unpack::remove_at(std::os::fd::AsFd::as_fd(&dir), name).ok();
    }
}

/// A layer's bytes uncompressed, by its media type (`+gzip`, `+zstd`, Docker's
/// `.tar.gzip`), or by its first bytes when the type says nothing.
pub fn decompress<'a>(media_type: &str, mut from: impl io::BufRead + 'a) -> Result<Box<dyn Read + 'a>, PullError> {
    let head = from.fill_buf().map_err(|e| PullError::io("reading a layer", &e))?;
    let gzip = media_type.ends_with("gzip") || head.starts_with(&[0x1f, 0x8b]);
    let zstd = media_type.ends_with("zstd") || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    Ok(if gzip {
        Box::new(flate2::bufread::MultiGzDecoder::new(from))
    } else if zstd {
        Box::new(zstd::stream::read::Decoder::with_buffer(from).map_err(|e| PullError::io("a zstd layer", &e))?)
    } else {
        Box::new(from)
    })
}

/// A reader that hashes what passes through it.
pub struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Hashing<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, hash: Sha256::new() }
    }

    /// `sha256:<hex>` of everything read so far.
    pub fn digest(&self) -> String {
        format!("sha256:{}", crate::domain::directory::secrets::hex(&self.hash.clone().finalize()))
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}
