//! Images as OCI references, pulled from a registry into a content-addressed store on the
//! machine that runs the session, unpacked once, shared read-only by every session of the
//! same digest.
//!
//! - [`registry`]: the registries a site declares (`[registries.NAME]`), their credentials
//!   (read from files, never stored), and which registry a reference names.
//! - [`pull`]: the OCI distribution API, spoken by `oci-client`: a manifest (an index picks
//!   this machine's platform), the config, the layers, verified while they stream, with
//!   progress.
//! - [`store`]: the store's layout, its locks (one puller per blob and per image, across
//!   processes), and the unpacking of a root from its layers.
//! - [`unpack`]: one layer applied to a root, safely.
//! - [`import`]: images from a file (an OCI layout, a `docker save` archive), for a site
//!   without a registry.

pub mod import;
pub mod pull;
pub mod registry;
pub mod store;
pub mod unpack;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How far a pull is: bytes of the image's blobs (config and layers, compressed) fetched or
/// found in the store, and layers fetched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub layers_done: u32,
    pub layers_total: u32,
}

impl Progress {
    /// The share of the bytes done, in whole percent; `None` before the total is known.
    pub fn percent(&self) -> Option<u8> {
        (self.bytes_done.min(self.bytes_total) * 100)
            .checked_div(self.bytes_total)
            .map(|p| u8::try_from(p).unwrap_or(100))
    }
}

/// Why a pull failed, in the registry's own words where it gave any. Never holds a
/// credential: the registry's answers and the reference are all it quotes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum PullError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("no manifest for this platform ({platform}): {reference}")]
    NoPlatform { platform: String, reference: String },
    #[error("digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch { expected: String, actual: String },
    #[error("disk full: {0}")]
    DiskFull(String),
    #[error("registry unreachable: {0}")]
    Unreachable(String),
    #[error("image too large: {0}")]
    TooLarge(String),
    #[error("invalid image: {0}")]
    Invalid(String),
}

impl PullError {
    /// The public code of the failure, as the session's history records it.
    pub fn code(&self) -> &'static str {
        match self {
            PullError::NotFound(_) => "NOT_FOUND",
            PullError::Unauthorized(_) => "UNAUTHORIZED",
            PullError::NoPlatform { .. } => "NO_PLATFORM",
            PullError::DigestMismatch { .. } => "DIGEST_MISMATCH",
            PullError::DiskFull(_) => "DISK_FULL",
            PullError::Unreachable(_) => "UNREACHABLE",
            PullError::TooLarge(_) => "TOO_LARGE",
            PullError::Invalid(_) => "INVALID_IMAGE",
        }
    }

    /// A failure of the machine's disk, or of reading what it wrote.
    pub(crate) fn io(what: &str, e: &std::io::Error) -> Self {
        if e.raw_os_error() == Some(28) {
            // ENOSPC
            PullError::DiskFull(format!("{what}: {e}"))
        } else {
            PullError::Invalid(format!("{what}: {e}"))
        }
    }
}

/// What an image's config says about running it (the parts sessiond uses).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `Env`, in order, as `NAME=value` splits.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub working_dir: Option<String>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    /// Recorded and not honoured: sessions stay unprivileged.
    #[serde(default)]
    pub user: Option<String>,
    /// Kept for the apps.
    #[serde(default)]
    pub exposed_ports: Vec<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl ImageConfig {
    /// Reads the parts of an OCI (or Docker) image config sessiond uses.
    pub fn parse(config: &[u8]) -> Result<Self, PullError> {
        let parsed: oci_client::config::ConfigFile =
            serde_json::from_slice(config).map_err(|e| PullError::Invalid(format!("the image's config: {e}")))?;
        let Some(c) = parsed.config else {
            return Ok(Self::default());
        };
        let env = c
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => (kv, String::new()),
            })
            .collect();
        Ok(Self {
            env,
            working_dir: c.working_dir.filter(|w| !w.is_empty()),
            entrypoint: c.entrypoint.unwrap_or_default(),
            cmd: c.cmd.unwrap_or_default(),
            user: c.user.filter(|u| !u.is_empty()),
            exposed_ports: c.exposed_ports.map(|p| p.into_iter().collect()).unwrap_or_default(),
            labels: c.labels.map(|l| l.into_iter().collect()).unwrap_or_default(),
        })
    }
}

/// This machine's platform, in the words of an image index (`GOOS`/`GOARCH`).
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!("linux/{arch}")
}
