//! A pull: the OCI distribution API through `oci-client` (OCI and Docker schema-2 manifests
//! and indexes, basic and bearer auth), into the [`Store`], with progress.
//!
//! An image already unpacked here is not fetched again: a digest reference, or a tag this
//! machine pulled before (unless `refresh` asks for the tag's newest), needs no registry
//! at all. Otherwise the manifest comes first (an index picks this machine's platform),
//! then the config, then each layer not yet in the store, streamed to disk while its
//! digest is computed (a blob is kept only when it matches, and never grows past the size
//! its manifest gives), then the root is unpacked once. Each blob and each root has a lock
//! shared with every process of the machine, so concurrent pulls of one image fetch each
//! blob once. A registry that cannot be reached is tried again with backoff.

use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;

use super::registry::Target;
use super::store::{Parts, Store, Unpacked};
use super::unpack::Owner;
use super::{Progress, PullError, platform};

/// How a pull behaves.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whom the unpacked files belong to (the server runs as root), else the server's user.
    pub owner: Option<Owner>,
    /// Most bytes an image may take, compressed or unpacked.
    pub limit: u64,
    /// Attempts at an unreachable registry, the first wait between them doubling.
    pub attempts: u32,
    pub backoff: Duration,
    /// Asks the registry what a tag names now, even when the machine has pulled it before
    /// (which serves only when the registry cannot be reached).
    pub refresh: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { owner: None, limit: 50 << 30, attempts: 4, backoff: Duration::from_millis(500), refresh: false }
    }
}

impl Options {
    /// How this machine's store is written, within `limit` bytes: the files belong to the
    /// sandbox's user when the process runs as root (the server, a job's supervisor, the
    /// `images` commands alike).
    pub fn on_this_machine(limit: u64) -> Self {
        use crate::domain::runtime::local::sandbox;
        Self {
            owner: sandbox::is_root().then_some(Owner { uid: sandbox::NOBODY, gid: sandbox::NOBODY }),
            limit,
            ..Self::default()
        }
    }
}

/// What a pull gives: the unpacked image, and whether the registry was asked at all.
#[derive(Clone, Debug)]
pub struct Pulled {
    pub image: Unpacked,
    pub fetched: bool,
}

/// The image of `target`, pulled into `store` unless it is there; `report` hears the
/// progress (at every chunk: the caller decides how often to pass it on).
pub async fn pull(
    store: &Store,
    target: &Target,
    options: &Options,
    report: &mut dyn FnMut(Progress),
) -> Result<Pulled, PullError> {
    let reference = target.parsed()?;
    let known = match reference.digest() {
        Some(digest) => Some(digest.to_owned()),
        None if options.refresh => None,
        None => store.resolved(&target.reference),
    };
    if let Some(image) = known.and_then(|d| store.unpacked(&d)) {
        store.touch(&image.record.digest)?;
        return Ok(Pulled { image, fetched: false });
    }
    let registry = target.registry.clone().unwrap_or_default();
    let auth = if target.registry.is_some() { registry.auth()? } else { RegistryAuth::Anonymous };
    let protocol = if registry.plain_http() {
        ClientProtocol::HttpsExcept(vec![reference.registry().to_owned()])
    } else {
        ClientProtocol::Https
    };
    let client = Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    });
    let fetch = Fetch { store, client: &client, reference: &reference, options };
    // What this machine pulled (or imported) as this tag before, if anything: it serves
    // when the registry cannot be reached, at once (an air-gapped site runs on, without
    // waiting out the retries).
    let before = match reference.digest() {
        None => store.resolved(&target.reference).and_then(|d| store.unpacked(&d)),
        Some(_) => None,
    };
    let attempts = if before.is_some() { 1 } else { options.attempts };
    let (manifest, digest) = match fetch.retrying(attempts, || client.pull_image_manifest(&reference, &auth)).await {
        Ok(answer) => answer,
        Err(e) => {
            let failed = classify(&e, &target.reference);
            if let (PullError::Unreachable(_), Some(image)) = (&failed, before) {
                store.touch(&image.record.digest)?;
                return Ok(Pulled { image, fetched: false });
            }
            return Err(failed);
        }
    };
    Store::hex(&digest)?;
    if let Some(image) = store.unpacked(&digest) {
        store.remember(&target.reference, &digest)?;
        store.touch(&digest)?;
        return Ok(Pulled { image, fetched: false });
    }
    let size = |d: &OciDescriptor| u64::try_from(d.size).unwrap_or(0);
    let compressed: u64 = manifest.layers.iter().map(size).sum();
    if compressed > options.limit {
        return Err(PullError::TooLarge(format!(
            "{} has {compressed} bytes of layers, more than the image cache's limit of {} bytes",
            target.reference, options.limit
        )));
    }
    let mut progress = Progress {
        bytes_done: 0,
        bytes_total: compressed + size(&manifest.config),
        layers_done: 0,
        layers_total: manifest.layers.len() as u32,
    };
    report(progress);
    fetch.blob(&manifest.config, &mut progress, report).await?;
    let config_bytes = std::fs::read(store.blob(&manifest.config.digest)?)
        .map_err(|e| PullError::io("reading the image's config", &e))?;
    let parts = Parts::of(digest.clone(), target.reference.clone(), &manifest, &config_bytes)?;
    for layer in &manifest.layers {
        fetch.blob(layer, &mut progress, report).await?;
        progress.layers_done += 1;
        report(progress);
    }
    let (unpacking, owner, limit) = (store.clone(), options.owner, options.limit);
    let image = tokio::task::spawn_blocking(move || unpacking.unpack(&parts, owner, limit))
        .await
        .map_err(|e| PullError::Invalid(format!("unpacking stopped: {e}")))??;
    store.remember(&target.reference, &digest)?;
    store.touch(&digest)?;
    Ok(Pulled { image, fetched: true })
}

struct Fetch<'a> {
    store: &'a Store,
    client: &'a Client,
    reference: &'a Reference,
    options: &'a Options,
}

impl Fetch<'_> {
    /// `attempt` again (`attempts` in all) while the registry is unreachable, waiting longer
    /// each time.
    async fn retrying<T, F, Fut>(&self, attempts: u32, mut attempt: F) -> Result<T, OciDistributionError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, OciDistributionError>>,
    {
        let mut wait = self.options.backoff;
        for _ in 1..attempts.max(1) {
            match attempt().await {
                Err(e) if retryable(&e) => {
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                other => return other,
            }
        }
        attempt().await
    }

    /// One blob into the store, unless it is there; one fetch at a time per blob on this
    /// machine (a second waits, then finds it).
    async fn blob(
        &self,
        desc: &OciDescriptor,
        progress: &mut Progress,
        report: &mut dyn FnMut(Progress),
    ) -> Result<(), PullError> {
        let size = u64::try_from(desc.size)
            .map_err(|_| PullError::Invalid(format!("blob {} has a negative size", desc.digest)))?;
        let (store, digest) = (self.store.clone(), desc.digest.clone());
        let _lock = tokio::task::spawn_blocking(move || store.lock(&digest))
            .await
            .map_err(|e| PullError::Invalid(format!("waiting for a blob: {e}")))??;
        if self.store.has_blob(&desc.digest) {
            progress.bytes_done += size;
            report(*progress);
            return Ok(());
        }
        let before = progress.bytes_done;
        let mut wait = self.options.backoff;
        let mut attempts = self.options.attempts.max(1);
        loop {
            attempts -= 1;
            match self.stream(desc, size, progress, report).await {
                Err(PullError::Unreachable(_)) if attempts > 0 => {
                    progress.bytes_done = before;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                other => return other,
            }
        }
    }

    async fn stream(
        &self,
        desc: &OciDescriptor,
        size: u64,
        progress: &mut Progress,
        report: &mut dyn FnMut(Progress),
    ) -> Result<(), PullError> {
        let partial = self.store.partial(&desc.digest)?;
        let written = async {
            let mut stream = self
                .client
                .pull_blob_stream(self.reference, desc)
                .await
                .map_err(|e| classify(&e, &self.reference.whole()))?;
            let mut file = tokio::fs::File::create(&partial).await.map_err(|e| PullError::io("writing a blob", &e))?;
            let mut hash = Sha256::new();
            let mut received = 0_u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| stream_error(&e, &desc.digest))?;
                received += chunk.len() as u64;
                if received > size {
                    return Err(PullError::DigestMismatch {
                        expected: desc.digest.clone(),
                        actual: format!("more than the {size} bytes the manifest gives"),
                    });
                }
                hash.update(&chunk);
                file.write_all(&chunk).await.map_err(|e| PullError::io("writing a blob", &e))?;
                progress.bytes_done += chunk.len() as u64;
                report(*progress);
            }
            file.flush().await.map_err(|e| PullError::io("writing a blob", &e))?;
            let actual = format!("sha256:{}", crate::domain::directory::secrets::hex(&hash.finalize()));
            if actual != desc.digest {
                return Err(PullError::DigestMismatch { expected: desc.digest.clone(), actual });
            }
            self.store.commit_blob(&partial, &desc.digest)
        }
        .await;
        if written.is_err() {
            std::fs::remove_file(&partial).ok();
        }
        written
    }
}

/// The failures [`classify`] calls unreachable: worth another attempt.
fn retryable(e: &OciDistributionError) -> bool {
    matches!(classify(e, ""), PullError::Unreachable(_))
}

/// A failure of the blob's stream: the digest check of `oci-client`, or the connection.
fn stream_error(e: &std::io::Error, digest: &str) -> PullError {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<DigestError>()) {
        Some(DigestError::VerificationError { expected, actual }) => {
            PullError::DigestMismatch { expected: expected.clone(), actual: actual.clone() }
        }
        _ => PullError::Unreachable(format!("while fetching {digest}: {}", chain(e))),
    }
}

/// An error and its causes, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// What a registry's failure means to the user, in its own words.
fn classify(e: &OciDistributionError, reference: &str) -> PullError {
    use OciDistributionError as E;
    let about = |words: String| if reference.is_empty() { words } else { format!("{words} ({reference})") };
    match e {
        E::RegistryError { envelope, .. } => {
            let words = envelope.errors.iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("; ");
            let code = envelope.errors.first().map(|e| &e.code);
            match code {
                Some(OciErrorCode::Unauthorized | OciErrorCode::Denied) => PullError::Unauthorized(about(words)),
                Some(OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::BlobUnknown) => {
                    PullError::NotFound(about(words))
                }
                _ => PullError::Invalid(about(words)),
            }
        }
        E::UnauthorizedError { .. } => PullError::Unauthorized(about("authentication required".into())),
        E::AuthenticationFailure(words) => PullError::Unauthorized(about(words.clone())),
        E::ServerError { code, message, .. } => match code {
            401 | 403 => PullError::Unauthorized(about(message.clone())),
            404 => PullError::NotFound(about(message.clone())),
            500.. => PullError::Unreachable(about(format!("the registry answered {code}: {message}"))),
            _ => PullError::Invalid(about(message.clone())),
        },
        E::ImageManifestNotFoundError(words) if words.contains("platform") => {
            PullError::NoPlatform { platform: platform(), reference: reference.to_owned() }
        }
        E::ImageManifestNotFoundError(words) => PullError::NotFound(about(words.clone())),
        E::DigestError(DigestError::VerificationError { expected, actual }) => {
            PullError::DigestMismatch { expected: expected.clone(), actual: actual.clone() }
        }
        E::RequestError(e) => PullError::Unreachable(about(chain(e))),
        E::IoError(e) => PullError::io("the registry's answer", e),
        other => PullError::Invalid(about(other.to_string())),
    }
}
