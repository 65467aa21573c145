//! How an image runs where sessiond runs it itself (the local runtime, and jobs on nodes
//! that have sessiond's sandbox): for each image name, the root its sessions see,
//! environment variables, the command an interactive session runs, and an optional
//! one-time prepare step (the session is PULLING while it runs; once it succeeded on a
//! machine it is not run again). An image without one runs on the host's read-only system
//! directories with nothing prepared.
//!
//! They are declared with the image (`sessiond apply`, stored with it) or, overriding the
//! stored ones, in the `[images]` section of a file given with `--images-file`
//! ([`crate::domain::directory::apply::images_file`]):
//!
//! ```toml
//! [images."python:3.12"]
//! root = "host"                      # or a directory holding a root file system
//! command = "exec sleep infinity"    # what an interactive session runs (the default)
//! prepare = "python3 --version"      # optional
//! env = { PYTHONUNBUFFERED = "1" }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::domain::runtime::image::registry::{Registry, resolve};
use crate::domain::runtime::local::files::ImagePull;

/// What an interactive session runs when its image names nothing: it stays up until stopped.
pub const KEEP_RUNNING: &str = "exec sleep infinity";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Images {
    pub images: BTreeMap<String, LocalImage>,
    /// The registries images' refs name (`sessiond apply`).
    pub registries: BTreeMap<String, Registry>,
    /// Each image's apps, as declared with it.
    pub apps: BTreeMap<String, Vec<crate::domain::apps::AppSpec>>,
}

/// The most an image store holds unless told otherwise (`--image-cache-limit`).
pub const DEFAULT_IMAGE_CACHE_LIMIT: u64 = 50 << 30;

/// What a supervisor pulls for `image`, into the store under `runtime_dir`: nothing for an
/// image that is a root on the machine; `Err` when its ref names no declared registry.
/// `pinned`: the digest to run (a relaunch's), instead of what the reference names now.
pub fn image_pull(
    image: &LocalImage,
    pinned: Option<&str>,
    registries: &BTreeMap<String, Registry>,
    runtime_dir: &std::path::Path,
    limit: u64,
) -> Result<Option<ImagePull>, String> {
    let Some(reference) = &image.reference else { return Ok(None) };
    let mut target = resolve(reference, registries).map_err(|e| format!("the image's ref: {e}"))?;
    if let Some(digest) = pinned {
        target = target.pinned(digest).map_err(|e| format!("the image's ref: {e}"))?;
    }
    Ok(Some(ImagePull {
        target,
        store: runtime_dir.to_path_buf(),
        limit,
        declared_command: image.command.is_some(),
        refresh: pinned.is_none(),
    }))
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LocalImage {
    /// The OCI image pulled for it (`REGISTRY/REPOSITORY:TAG` or `…@sha256:…`), instead of
    /// a root on the machine.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `host` (the default) or a directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl Images {
    /// How `image` runs here.
    pub fn get(&self, image: &str) -> LocalImage {
        self.images.get(image).cloned().unwrap_or_default()
    }
}

impl LocalImage {
    /// The root directory, `None` for the host's.
    pub fn root_dir(&self) -> Option<PathBuf> {
        self.root.as_deref().filter(|r| *r != "host").map(PathBuf::from)
    }

    pub fn interactive_command(&self) -> String {
        self.command.clone().unwrap_or_else(|| KEEP_RUNNING.to_owned())
    }
}
