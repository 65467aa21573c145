//! Images from a file, for a site without a registry (`sessiond images import FILE`): an
//! OCI image layout (a directory or its tar, as `skopeo copy … oci-archive:` or `docker
//! save` since Docker 25 write it) or a `docker save` archive of the older kind
//! (`manifest.json` naming each layer's `layer.tar`). A tar may be gzip or zstd
//! compressed.
//!
//! The file is read once, as a stream: each of its files is written into the store as a
//! blob while its digest is computed (a layout's blob must match its name), so memory
//! stays flat whatever the layer size. Then each image is unpacked as a pulled one is,
//! and the references the file names it by (and any given) are remembered: a session of
//! an image whose reference is one of them runs it without asking a registry that cannot
//! be reached ([`super::pull`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path};

use oci_client::Reference;
use oci_client::manifest::{ImageIndexEntry, OciDescriptor, OciImageIndex, OciImageManifest};
use serde::Deserialize;

use super::pull::Options;
use super::store::{Parts, Store, Unpacked, decompress};
use super::{PullError, platform};

/// The small files of an archive that say what it holds, read whole (at most this many
/// bytes each).
const INDEX_FILES: [&str; 3] = ["index.json", "manifest.json", "oci-layout"];
const MOST_INDEX_BYTES: u64 = 4 << 20;

/// Annotations naming an image in an OCI layout's index: a whole reference (containerd's
/// and Docker's), or the layout's own name for it (often a tag alone).
const NAME_ANNOTATIONS: [&str; 2] = ["io.containerd.image.name", "org.opencontainers.image.ref.name"];

/// An image imported: unpacked here, and the references it is known by now.
#[derive(Clone, Debug)]
pub struct Imported {
    pub image: Unpacked,
    pub references: Vec<String>,
}

/// What an archive held, once read: its index files, and each of its other files as the
/// blob it became (by its path in the archive).
#[derive(Default)]
struct Held {
    index: HashMap<String, Vec<u8>>,
    files: HashMap<String, (String, u64)>,
    links: Vec<(String, String)>,
}

/// Imports the images of `file` into `store`, each also known as `names` (whole references,
/// `HOST[:PORT]/REPOSITORY:TAG`, as a session's image resolves; only for a file of one
/// image). Images not for this machine's platform are left out.
pub fn import(store: &Store, file: &Path, names: &[String], options: &Options) -> Result<Vec<Imported>, PullError> {
    let mut names: Vec<String> = names.iter().map(|n| whole(n)).collect::<Result<_, _>>()?;
    let mut budget = options.limit;
    let read =
        if file.is_dir() { read_layout_dir(store, file, &mut budget)? } else { read_tar(store, file, &mut budget)? };
    let found = if read.index.contains_key("index.json") {
        layout_images(store, &read)?
    } else if read.index.contains_key("manifest.json") {
        docker_images(store, &read, &mut budget)?
    } else {
        return Err(PullError::Invalid(format!(
            "{} is neither an OCI image layout (no index.json) nor a docker save archive (no manifest.json)",
            file.display()
        )));
    };
    if found.is_empty() {
        return Err(PullError::NoPlatform { platform: platform(), reference: file.display().to_string() });
    }
    if !names.is_empty() && found.len() > 1 {
        return Err(PullError::Invalid(format!(
            "{} holds {} images: a name given applies to one image only",
            file.display(),
            found.len()
        )));
    }
    let mut imported = Vec::new();
    for (mut parts, mut references) in found {
        references.append(&mut names);
        references.sort();
        references.dedup();
        if let Some(first) = references.first() {
            parts.reference = first.clone();
        } else {
            parts.reference = format!("imported from {}", file.file_name().unwrap_or_default().to_string_lossy());
        }
        let image = store.unpack(&parts, options.owner, options.limit)?;
        for r in &references {
            store.remember(r, &parts.digest)?;
        }
        store.touch(&parts.digest)?;
        imported.push(Imported { image, references });
    }
    // The blobs the file held that no image here needs (other platforms', its manifests).
    let needed: std::collections::HashSet<String> =
        store.list().into_iter().flat_map(|i| i.record.layers.into_iter().chain([i.record.config_blob])).collect();
    for (digest, _) in read.files.values() {
        if !needed.contains(digest)
            && let (Ok(_lock), Ok(path)) = (store.lock(digest), store.blob(digest))
        {
            fs::remove_file(path).ok();
        }
    }
    Ok(imported)
}

/// A reference as a session's image resolves it (`busybox:1.36` is
/// `docker.io/library/busybox:1.36`).
fn whole(name: &str) -> Result<String, PullError> {
    name.parse::<Reference>()
        .map(|r| r.whole())
        .map_err(|e| PullError::Invalid(format!("the name {name:?} is no image reference: {e}")))
}

/// A path of an archive as a relative path without `.`: `None` for one that leaves the
/// archive.
fn archive_path(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?.to_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// The digest a layout's blob path names (`blobs/sha256/<hex>`), which its bytes must have.
fn named_digest(path: &str) -> Option<String> {
    let hex = path.strip_prefix("blobs/sha256/")?;
    let digest = format!("sha256:{hex}");
    Store::hex(&digest).is_ok().then_some(digest)
}

/// One file of the archive into what was read: an index file kept whole, anything else a
/// blob.
fn take_file(
    store: &Store,
    read: &mut Held,
    path: String,
    from: &mut dyn Read,
    budget: &mut u64,
) -> Result<(), PullError> {
    if INDEX_FILES.contains(&path.as_str()) {
        let mut bytes = Vec::new();
        from.take(MOST_INDEX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| PullError::io("reading the archive", &e))?;
        if bytes.len() as u64 > MOST_INDEX_BYTES {
            return Err(PullError::Invalid(format!("{path} is larger than {MOST_INDEX_BYTES} bytes")));
        }
        read.index.insert(path, bytes);
    } else {
        let blob = store.ingest(from, named_digest(&path).as_deref(), budget)?;
        read.files.insert(path, blob);
    }
    Ok(())
}

/// A tar (plain, gzip or zstd) read once.
fn read_tar(store: &Store, file: &Path, budget: &mut u64) -> Result<Held, PullError> {
    let opened = File::open(file).map_err(|e| PullError::io(&format!("opening {}", file.display()), &e))?;
    let mut reader = BufReader::new(opened);
    reader.fill_buf().map_err(|e| PullError::io("reading the archive", &e))?;
    let mut archive = tar::Archive::new(decompress("", reader)?);
    let mut read = Held::default();
    let entries = archive.entries().map_err(|e| PullError::io("reading the archive", &e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| PullError::io("reading the archive", &e))?;
        let path = entry.path().map_err(|e| PullError::io("reading the archive", &e))?.into_owned();
        let Some(path) = archive_path(&path) else { continue };
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                take_file(store, &mut read, path, &mut entry, budget)?;
            }
            kind @ (tar::EntryType::Symlink | tar::EntryType::Link) => {
                let Ok(Some(target)) = entry.link_name() else { continue };
                // A symbolic link is relative to its directory, a hard link to the archive.
                let target = match kind {
                    tar::EntryType::Symlink => Path::new(&path).parent().unwrap_or(Path::new("")).join(target),
                    _ => target.into_owned(),
                };
                if let Some(target) = archive_path(&target) {
                    read.links.push((path, target));
                }
            }
            _ => {}
        }
    }
    // Links (a layer `docker save` wrote once for two images) name the blob of their target.
    for (path, target) in std::mem::take(&mut read.links) {
        if let Some(blob) = read.files.get(&target).cloned() {
            read.files.insert(path, blob);
        }
    }
    Ok(read)
}

/// An OCI layout directory: its index and its blobs.
fn read_layout_dir(store: &Store, dir: &Path, budget: &mut u64) -> Result<Held, PullError> {
    let mut read = Held::default();
    for name in INDEX_FILES {
        if let Ok(mut f) = File::open(dir.join(name)) {
            take_file(store, &mut read, name.to_owned(), &mut f, budget)?;
        }
    }
    let blobs = dir.join("blobs/sha256");
    let entries = fs::read_dir(&blobs).map_err(|e| PullError::io(&format!("reading {}", blobs.display()), &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PullError::io("reading the layout", &e))?;
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = format!("blobs/sha256/{}", entry.file_name().to_string_lossy());
        let mut f = File::open(entry.path()).map_err(|e| PullError::io("reading the layout", &e))?;
        take_file(store, &mut read, path, &mut f, budget)?;
    }
    Ok(read)
}

/// The bytes of a blob the archive held, by digest.
fn blob_bytes(store: &Store, read: &Held, digest: &str) -> Result<Vec<u8>, PullError> {
    held(read, digest)?;
    let mut bytes = Vec::new();
    File::open(store.blob(digest)?)
        .and_then(|f| f.take(MOST_INDEX_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| PullError::io("reading a manifest", &e))?;
    Ok(bytes)
}

/// Whether an index entry is for this machine (an entry without a platform is for any).
fn for_this_platform(entry: &ImageIndexEntry) -> bool {
    entry.platform.as_ref().is_none_or(|p| format!("{}/{}", p.os, p.architecture) == platform())
}

/// The images of an OCI layout, with the references its index names them by.
fn layout_images(store: &Store, read: &Held) -> Result<Vec<(Parts, Vec<String>)>, PullError> {
    let index: OciImageIndex = serde_json::from_slice(&read.index["index.json"])
        .map_err(|e| PullError::Invalid(format!("the layout's index.json: {e}")))?;
    let mut found: BTreeMap<String, (Parts, Vec<String>)> = BTreeMap::new();
    for entry in index.manifests.iter().filter(|e| for_this_platform(e)) {
        let references: Vec<String> = NAME_ANNOTATIONS
            .iter()
            .filter_map(|a| entry.annotations.as_ref()?.get(*a))
            // A name alone (a tag) says no repository: only a whole reference is kept.
            .filter(|n| n.contains('/') || n.contains(':') && !n.starts_with(':'))
            .filter_map(|n| whole(n).ok())
            .collect();
        let mut digest = entry.digest.clone();
        let mut bytes = blob_bytes(store, read, &digest)?;
        // An index of its own (a multi-platform image): this machine's manifest.
        if let Ok(nested) = serde_json::from_slice::<OciImageIndex>(&bytes)
            && !nested.manifests.is_empty()
        {
            let Some(mine) = nested.manifests.iter().find(|e| for_this_platform(e) && e.platform.is_some()) else {
                continue;
            };
            digest = mine.digest.clone();
            bytes = blob_bytes(store, read, &digest)?;
        }
        let manifest: OciImageManifest =
            serde_json::from_slice(&bytes).map_err(|e| PullError::Invalid(format!("manifest {digest}: {e}")))?;
        let config = blob_bytes(store, read, &manifest.config.digest)?;
        for layer in &manifest.layers {
            held(read, &layer.digest)?;
        }
        let parts = Parts::of(digest.clone(), String::new(), &manifest, &config)?;
        let slot = found.entry(digest).or_insert_with(|| (parts, Vec::new()));
        slot.1.extend(references);
    }
    Ok(found.into_values().collect())
}

/// Fails unless the archive held blob `digest`.
fn held(read: &Held, digest: &str) -> Result<(), PullError> {
    if read.files.values().any(|(d, _)| d == digest) {
        Ok(())
    } else {
        Err(PullError::Invalid(format!("the archive lacks blob {digest}")))
    }
}

/// One image of a `docker save` archive's `manifest.json`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Saved {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// The images of a `docker save` archive, with their tags. The archive keeps no manifest:
/// one is made of the config and layers (Docker's schema 2) and stored, its digest the
/// image's.
fn docker_images(store: &Store, read: &Held, budget: &mut u64) -> Result<Vec<(Parts, Vec<String>)>, PullError> {
    let saved: Vec<Saved> = serde_json::from_slice(&read.index["manifest.json"])
        .map_err(|e| PullError::Invalid(format!("the archive's manifest.json: {e}")))?;
    let mut found = Vec::new();
    for image in saved {
        let file = |path: &str| {
            let path = archive_path(Path::new(path)).unwrap_or_default();
            read.files.get(&path).cloned().ok_or_else(|| PullError::Invalid(format!("the archive lacks {path}")))
        };
        let (config_digest, config_size) = file(&image.config)?;
        let config = blob_bytes(store, read, &config_digest)?;
        let parsed: serde_json::Value =
            serde_json::from_slice(&config).map_err(|e| PullError::Invalid(format!("the image's config: {e}")))?;
        let arch = parsed["architecture"].as_str().unwrap_or_default();
        if !arch.is_empty() && format!("{}/{arch}", parsed["os"].as_str().unwrap_or("linux")) != platform() {
            continue;
        }
        let descriptor = |media_type: &str, (digest, size): (String, u64)| OciDescriptor {
            media_type: media_type.to_owned(),
            digest,
            size: i64::try_from(size).unwrap_or(i64::MAX),
            urls: None,
            annotations: None,
        };
        let layers = image
            .layers
            .iter()
            .map(|l| Ok(descriptor("application/vnd.docker.image.rootfs.diff.tar", file(l)?)))
            .collect::<Result<Vec<_>, PullError>>()?;
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some("application/vnd.docker.distribution.manifest.v2+json".to_owned()),
            config: descriptor("application/vnd.docker.container.image.v1+json", (config_digest, config_size)),
            layers,
            subject: None,
            artifact_type: None,
            annotations: None,
        };
        let bytes = serde_json::to_vec(&manifest).map_err(|e| PullError::Invalid(format!("a manifest: {e}")))?;
        let (digest, _) = store.ingest(&mut bytes.as_slice(), None, budget)?;
        let references = image.repo_tags.unwrap_or_default().iter().filter_map(|t| whole(t).ok()).collect();
        found.push((Parts::of(digest, String::new(), &manifest, &config)?, references));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_paths_stay_inside() {
        assert_eq!(archive_path(Path::new("./blobs/sha256/ab")).as_deref(), Some("blobs/sha256/ab"));
        assert_eq!(archive_path(Path::new("a/../b.json")).as_deref(), Some("b.json"));
        assert_eq!(archive_path(Path::new("../etc/passwd")), None);
        assert_eq!(archive_path(Path::new("/etc/passwd")), None);
    }

    #[test]
    fn names_are_whole_references() {
        assert_eq!(whole("busybox:1.36").expect("a name"), "docker.io/library/busybox:1.36");
        assert_eq!(whole("127.0.0.1:5000/ml/x:1").expect("a name"), "127.0.0.1:5000/ml/x:1");
        assert!(whole("UPPER:1").is_err());
    }

    #[test]
    fn a_layout_blob_is_named_by_its_digest() {
        let hex = "0".repeat(64);
        assert_eq!(named_digest(&format!("blobs/sha256/{hex}")), Some(format!("sha256:{hex}")));
        assert_eq!(named_digest("blobs/sha256/xyz"), None);
        assert_eq!(named_digest("abc/layer.tar"), None);
    }
}
