//! An OCI registry for the tests: Debian's `docker-registry` (distribution 2.8) on a free
//! loopback port, with htpasswd auth, its storage in a temporary directory, started once
//! per test process as PostgreSQL is; a watchdog stops it and removes the directory when
//! the process exits. Without the binary a test that needs it is skipped with a NOTICE,
//! unless `SESSIOND_REQUIRE_REGISTRY=1` (set by `.ci/run`) makes that a failure.
//!
//! The tests build their own images: layers tarred here, pushed through the registry's API
//! (a blob upload, then the manifest), as any client pushes.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

pub const USER: &str = "pusher";
pub const PASSWORD: &str = "registry-test-password";

pub struct Registry {
    /// `127.0.0.1:PORT`
    pub host: String,
    /// The registry's storage and its request log.
    pub dir: PathBuf,
}

static REGISTRY: OnceLock<Result<Registry, String>> = OnceLock::new();

/// The shared registry, or `None` (skipped, with a NOTICE) when it cannot start here.
pub fn registry() -> Option<&'static Registry> {
    super::required::part(REGISTRY.get_or_init(start), "the registry", "SESSIOND_REQUIRE_REGISTRY")
}

fn start() -> Result<Registry, String> {
    let binary = ["/usr/bin/docker-registry"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or("no /usr/bin/docker-registry (Debian's docker-registry package)")?;
    let dir = tempfile::Builder::new()
        .prefix("sessiond-registry-")
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?
        .keep();
    let hash = bcrypt::hash(PASSWORD, 4).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("htpasswd"), format!("{USER}:{hash}\n")).map_err(|e| e.to_string())?;
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port();
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n\
             storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n  secret: sessiond-tests\n\
             auth:\n  htpasswd:\n    realm: sessiond-tests\n    path: {htpasswd}\n",
            data = dir.join("data").display(),
            htpasswd = dir.join("htpasswd").display(),
        );
        std::fs::write(dir.join("config.yml"), config).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("log")).map_err(|e| e.to_string())?;
        let child = Command::new(binary)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{binary}: {e}"))?;
        spawn_watchdog(child.id(), &dir);
        let host = format!("127.0.0.1:{port}");
        for _ in 0..100 {
            if std::net::TcpStream::connect(&host).is_ok() {
                return Ok(Registry { host, dir });
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        last = format!(
            "docker-registry did not listen on {host}: {}",
            std::fs::read_to_string(dir.join("log")).unwrap_or_default()
        );
    }
    Err(last)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port()
}

/// Stops the registry and removes its directory once this process is gone.
fn spawn_watchdog(registry: u32, dir: &std::path::Path) {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; kill {registry} 2>/dev/null; sleep 0.2; kill -9 {registry} 2>/dev/null; rm -rf '{dir}'",
        pid = std::process::id(),
        dir = dir.display(),
    );
    let _ = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// One file, directory or link of a layer.
pub enum Entry<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
}

/// A layer's uncompressed tar.
pub fn tar(entries: &[Entry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(1_700_000_000);
        match e {
            Entry::File(path, data, mode) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
                h.set_mode(*mode);
                b.append_data(&mut h, path, *data).expect("a file");
            }
            Entry::Dir(path) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, path, &[][..]).expect("a directory");
            }
            Entry::Symlink(path, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, path, target).expect("a link");
            }
        }
    }
    b.into_inner().expect("a tar")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Zstd,
    None,
}

/// A layer as pushed: its bytes and media type.
pub fn compress(tar: &[u8], how: Compression) -> (Vec<u8>, &'static str) {
    use std::io::Write;
    match how {
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(tar).expect("gzip");
            (e.finish().expect("gzip"), "application/vnd.oci.image.layer.v1.tar+gzip")
        }
        Compression::Zstd => (zstd::encode_all(tar, 3).expect("zstd"), "application/vnd.oci.image.layer.v1.tar+zstd"),
        Compression::None => (tar.to_vec(), "application/vnd.oci.image.layer.v1.tar"),
    }
}

/// What a push made.
#[derive(Clone, Debug)]
pub struct Pushed {
    pub manifest: String,
    pub config: String,
    pub layers: Vec<String>,
    /// Bytes of the config and the layers, as pushed.
    pub bytes: u64,
}

impl Registry {
    fn client() -> reqwest::Client {
        reqwest::Client::new()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host)
    }

    /// Stores a blob in `repo`, returns its digest.
    pub async fn push_blob(&self, repo: &str, bytes: &[u8]) -> String {
        let digest = digest(bytes);
        let c = Self::client();
        let start = c
            .post(self.url(&format!("/v2/{repo}/blobs/uploads/")))
            .basic_auth(USER, Some(PASSWORD))
            .send()
            .await
            .expect("an upload starts");
        assert!(start.status().is_success(), "upload: {}", start.status());
        let location = start.headers()["location"].to_str().expect("a location").to_owned();
        let location = if location.starts_with("http") { location } else { self.url(&location) };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = c
            .put(format!("{location}{sep}digest={digest}"))
            .basic_auth(USER, Some(PASSWORD))
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .expect("a blob is stored");
        assert!(put.status().is_success(), "blob: {} {}", put.status(), put.text().await.unwrap_or_default());
        digest
    }

    /// Stores a manifest (or index) under `reference` (a tag or its digest).
    pub async fn push_manifest(&self, repo: &str, reference: &str, media_type: &str, body: &[u8]) -> String {
        let put = Self::client()
            .put(self.url(&format!("/v2/{repo}/manifests/{reference}")))
            .basic_auth(USER, Some(PASSWORD))
            .header("content-type", media_type)
            .body(body.to_vec())
            .send()
            .await
            .expect("a manifest is stored");
        assert!(put.status().is_success(), "manifest: {} {}", put.status(), put.text().await.unwrap_or_default());
        digest(body)
    }

    /// An image of `layers` (uncompressed tars) with `config` (the config's `config`
    /// object: `Env`, `WorkingDir`, …), for `architecture`, pushed as `repo:tag`.
    pub async fn push_image(
        &self,
        repo: &str,
        tag: &str,
        layers: &[Vec<u8>],
        how: Compression,
        config: Value,
        architecture: &str,
    ) -> Pushed {
        let mut descriptors = Vec::new();
        let mut digests = Vec::new();
        let mut diff_ids = Vec::new();
        let mut bytes = 0;
        for tar in layers {
            let (blob, media_type) = compress(tar, how);
            let d = self.push_blob(repo, &blob).await;
            bytes += blob.len() as u64;
            descriptors.push(json!({"mediaType": media_type, "digest": d, "size": blob.len()}));
            digests.push(d);
            diff_ids.push(digest(tar));
        }
        let config = serde_json::to_vec(&json!({
            "architecture": architecture,
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }))
        .expect("a config");
        let config_digest = self.push_blob(repo, &config).await;
        bytes += config.len() as u64;
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
            "layers": descriptors,
        }))
        .expect("a manifest");
        let manifest = self.push_manifest(repo, tag, "application/vnd.oci.image.manifest.v1+json", &manifest).await;
        Pushed { manifest, config: config_digest, layers: digests, bytes }
    }

    /// How many times the registry served `digest` (its request log).
    pub fn blob_gets(&self, digest: &str) -> usize {
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        log.lines().filter(|l| l.contains("\"GET /v2/") && l.contains(&format!("/blobs/{digest} "))).count()
    }

    /// The file the registry keeps `digest`'s bytes in.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir.join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

/// A TCP proxy to `host` on a free loopback port that passes at most `bytes_per_second`
/// towards the client: a slow registry, for a pull that takes a few seconds. It runs as
/// long as the test process.
pub async fn throttled(host: &str, bytes_per_second: u64) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a proxy port");
    let address = listener.local_addr().expect("its address").to_string();
    let upstream = host.to_owned();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let up = tokio::spawn(async move { tokio::io::copy(&mut client_read, &mut server_write).await });
                // Downstream in slices of a tenth of a second's bytes.
                let slice = usize::try_from(bytes_per_second / 10).unwrap_or(1).max(1);
                let mut buf = vec![0u8; slice];
                while let Ok(n) = server_read.read(&mut buf).await {
                    if n == 0 || client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                up.abort();
            });
        }
    });
    address
}

/// A site's static token the token gateway takes as it is (`token_file`).
pub const STATIC_TOKEN: &str = "static-test-token";

/// The registry behind bearer-token auth, as Docker Hub's, Harbor's and GitLab's are.
pub struct Gateway {
    /// `127.0.0.1:PORT`
    pub host: String,
    /// Tokens its token service issued.
    pub issued: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// [`Gateway`]: `/v2/…` answers 401 with a `Bearer` challenge naming its token service
/// (`/token`) unless the request carries a token the service issued, or [`STATIC_TOKEN`];
/// the service issues one for the test user's basic credentials, and refuses others.
/// Behind it, the registry, asked with basic auth; answers stream through. It runs as long
/// as the test process.
pub async fn token_gateway(registry: &Registry) -> Gateway {
    use axum::body::Body;
    use axum::http::{HeaderValue, Request, Response, StatusCode, header};
    use base64::Engine as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a gateway port");
    let host = listener.local_addr().expect("its address").to_string();
    let issued = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (upstream, realm, tokens) = (registry.host.clone(), format!("http://{host}/token"), issued.clone());
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}")));
    let handler = move |req: Request<Body>| {
        let (upstream, realm, tokens, basic) = (upstream.clone(), realm.clone(), tokens.clone(), basic.clone());
        async move {
            let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let path = req.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
            let status = |code: StatusCode| Response::builder().status(code);
            if req.uri().path() == "/token" {
                if given != basic {
                    return status(StatusCode::UNAUTHORIZED).body(Body::from("{}")).expect("a response");
                }
                let token = format!("issued-{}", uuid::Uuid::new_v4());
                tokens.lock().expect("tokens").push(token.clone());
                let body = json!({"token": token, "access_token": token, "expires_in": 300}).to_string();
                return status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(body))
                    .expect("a response");
            }
            let bearer = given.strip_prefix("Bearer ").unwrap_or("");
            let known = bearer == STATIC_TOKEN || tokens.lock().expect("tokens").iter().any(|t| t == bearer);
            if !known {
                let challenge = format!("Bearer realm=\"{realm}\",service=\"sessiond-tests\"");
                let body = json!({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]});
                return status(StatusCode::UNAUTHORIZED)
                    .header(header::WWW_AUTHENTICATE, HeaderValue::from_str(&challenge).expect("a header"))
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(body.to_string()))
                    .expect("a response");
            }
            let mut ask = reqwest::Client::new()
                .request(req.method().clone(), format!("http://{upstream}{path}"))
                .basic_auth(USER, Some(PASSWORD));
            if let Some(accept) = req.headers().get(header::ACCEPT) {
                ask = ask.header(header::ACCEPT, accept.clone());
            }
            let Ok(answer) = ask.send().await else {
                return status(StatusCode::BAD_GATEWAY).body(Body::empty()).expect("a response");
            };
            let mut out = status(answer.status());
            for name in
                [header::CONTENT_TYPE, header::CONTENT_LENGTH, header::HeaderName::from_static("docker-content-digest")]
            {
                if let Some(v) = answer.headers().get(&name) {
                    out = out.header(name, v.clone());
                }
            }
            out.body(Body::from_stream(answer.bytes_stream())).expect("a response")
        }
    };
    let app = axum::Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    Gateway { host, issued }
}
