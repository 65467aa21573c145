//! How this server reaches the apps of a session that runs as a Slurm job, as Open OnDemand
//! reaches compute nodes: the job's supervisor on the node (`sessiond supervise`) listens on
//! a port of the node (its **relay**) and, for the server alone, makes each connection to
//! an app's port on the session's own loopback (with the node's own dialer,
//! [`crate::domain::runtime::local::dial`]: the sandbox keeps no network) and relays its
//! bytes.
//!
//! The relay serves the server alone: the server writes a secret of the session's into its
//! spec (readable by the jobs' user alone), and every connection proves it both ways before
//! a byte of an app passes:
//!
//! 1. the relay greets with a nonce of its own: `sessiond-relay 1 <nonce>`;
//! 2. the server answers `<port> <its nonce> <mac>`, the MAC (HMAC-SHA256 under the secret)
//!    of both nonces and the port;
//! 3. the relay checks it (anything else: the connection closes with nothing said), that
//!    the port is one of the session's apps', and connects; it answers `ok <mac>`, its own
//!    MAC of both nonces, which the server checks in turn (nothing answering on that port
//!    but the session's own relay is trusted), or `refused` when nothing listens there.
//!
//! A relay guessed by another user of the cluster gives nothing: without the secret no
//! answer passes, and an answer seen on the wire is good for its nonce alone. Where it
//! listens (`relay.json`, `{ host, port }`) is in the session's directory on the shared
//! directory: the engine's `relay_bind`, else every address of the node, reached by its
//! hostname.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use uuid::Uuid;

use crate::domain::runtime::local::dial::Dialer;
use crate::domain::runtime::local::files::{self, Process, SessionDir};

/// What the relay greets with, before its nonce.
const GREETING: &str = "sessiond-relay 1";
/// The file of the session's directory that says where its relay listens.
pub const ADDRESS_FILE: &str = "relay.json";
/// How long a connection may take to prove itself (and the server to connect).
const HANDSHAKE: Duration = Duration::from_secs(10);
/// The longest line of the handshake.
const LINE_MAX: usize = 256;

/// A session's relay, as its spec gives it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Relay {
    /// The secret both sides prove (hex), the session's alone.
    pub secret: String,
    /// The address it listens on; none: every address of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// The ports of the session's apps: no other is relayed.
    pub ports: Vec<u16>,
}

impl Relay {
    /// A relay with a new secret for apps on `ports`, listening on `bind`.
    pub fn new(bind: Option<String>, ports: Vec<u16>) -> Self {
        Self { secret: crate::domain::directory::secrets::hex(&rand::random::<[u8; 32]>()), bind, ports }
    }
}

/// Where a relay listens, as it writes it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Address {
    pub host: String,
    pub port: u16,
}

/// The MAC of a handshake's `words` under `secret`.
fn mac(secret: &str, words: &[&str]) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(words.join("\n").as_bytes());
    mac
}

fn encoded(mac: hmac::Hmac<sha2::Sha256>) -> String {
    use base64::Engine;
    use hmac::Mac;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// Whether `tag` is the MAC of `words` under `secret` (compared in constant time).
fn verified(secret: &str, words: &[&str], tag: &str) -> bool {
    use base64::Engine;
    use hmac::Mac;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tag)
        .is_ok_and(|tag| mac(secret, words).verify_slice(&tag).is_ok())
}

fn nonce() -> String {
    crate::domain::directory::secrets::hex(&rand::random::<[u8; 16]>())
}

/// One line of the handshake, without its newline; read a byte at a time, so nothing of
/// what follows it is taken.
async fn line(from: &mut (impl AsyncRead + Unpin)) -> std::io::Result<String> {
    let mut out = Vec::new();
    loop {
        match from.read_u8().await? {
            b'\n' => break,
            _ if out.len() >= LINE_MAX => return Err(std::io::Error::other("a handshake line too long")),
            b => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| std::io::Error::other("a handshake line not of text"))
}

// The node's side.

/// Starts the relay of the session of `sd` (its sandbox `sandbox`), on a thread of the
/// supervisor's own: it listens, writes where, and serves until the supervisor ends.
pub fn start(sd: &SessionDir, relay: &Relay, sandbox: Process) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the relay: {e}"))?;
    let bind = relay.bind.clone().unwrap_or_else(|| "0.0.0.0".to_owned());
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind((bind.as_str(), 0)))
        .map_err(|e| format!("the relay cannot listen on {bind}: {e}"))?;
    let port = listener.local_addr().map_err(|e| format!("the relay's address: {e}"))?.port();
    let unspecified = bind.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_unspecified());
    let host = if unspecified {
        nix::unistd::gethostname().map_err(|e| format!("the node's hostname: {e}"))?.to_string_lossy().into_owned()
    } else {
        bind
    };
    files::write_json(&sd.root.join(ADDRESS_FILE), &Address { host, port })
        .map_err(|e| format!("cannot write where the relay listens: {e}"))?;
    let executable = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
    let node = std::sync::Arc::new(Node {
        relay: relay.clone(),
        executable,
        sandbox,
        dialer: tokio::sync::Mutex::default(),
        proving: std::sync::Arc::new(tokio::sync::Semaphore::new(MOST_PROVING)),
    });
    std::thread::spawn(move || {
        runtime.block_on(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        // Out of descriptors, say: not a spin.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Connections yet to prove the secret are few at once: more are closed.
                let Ok(proving) = node.proving.clone().try_acquire_owned() else { continue };
                let node = node.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, &node, proving).await {
                        tracing::debug!("a relayed connection: {e}");
                    }
                });
            }
        });
    });
    Ok(())
}

/// Connections to a relay that have not proved the secret yet, at most at once.
const MOST_PROVING: usize = 32;

/// What a relay serves with: the session's relay, how to start its dialer, the dialer once
/// started (another after one fails), and the connections still proving themselves.
struct Node {
    relay: Relay,
    executable: std::path::PathBuf,
    sandbox: Process,
    dialer: tokio::sync::Mutex<Option<std::sync::Arc<Dialer>>>,
    proving: std::sync::Arc<tokio::sync::Semaphore>,
}

impl Node {
    /// A connection to `port` on the session's loopback, through its dialer (started at the
    /// first; one that has failed is replaced at the next).
    async fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        let dialer = {
            let mut held = self.dialer.lock().await;
            match &*held {
                Some(d) => d.clone(),
                None => {
                    let d =
                        std::sync::Arc::new(Dialer::start(&self.executable, self.sandbox.pid, self.sandbox.started)?);
                    *held = Some(d.clone());
                    d
                }
            }
        };
        let connected = dialer.connect(port).await;
        if connected.as_ref().is_err_and(|e| e.kind() != std::io::ErrorKind::ConnectionRefused) {
            *self.dialer.lock().await = None;
        }
        connected
    }
}

/// Serves one connection to the relay: the handshake (holding `proving` until it is
/// done), then the app's bytes both ways.
async fn serve(mut stream: TcpStream, node: &Node, proving: tokio::sync::OwnedSemaphorePermit) -> std::io::Result<()> {
    let relay = &node.relay;
    let ours = nonce();
    let handshake = async {
        stream.write_all(format!("{GREETING} {ours}\n").as_bytes()).await?;
        let asked = line(&mut stream).await?;
        let mut words = asked.split(' ');
        let (Some(port), Some(theirs), Some(tag), None) = (words.next(), words.next(), words.next(), words.next())
        else {
            return Ok(None);
        };
        if !verified(&relay.secret, &[GREETING, &ours, theirs, port], tag) {
            return Ok(None); // not the server: nothing is said
        }
        let Some(port) = port.parse::<u16>().ok().filter(|p| relay.ports.contains(p)) else {
            stream.write_all(b"refused not a port of the session's apps\n").await?;
            return Ok(None);
        };
        let app = match node.connect(port).await {
            Ok(app) => app,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                stream.write_all(b"refused\n").await?;
                return Ok(None);
            }
            Err(e) => {
                // The server is told why (it proved itself).
                let why = e.to_string().replace(['\r', '\n'], " ");
                stream.write_all(format!("failed {why}\n").as_bytes()).await?;
                return Ok(None);
            }
        };
        let proof = encoded(mac(&relay.secret, &["node", &ours, theirs]));
        stream.write_all(format!("ok {proof}\n").as_bytes()).await?;
        Ok::<_, std::io::Error>(Some(app))
    };
    let app = tokio::time::timeout(HANDSHAKE, handshake).await.map_err(|_| std::io::Error::other("too slow"))??;
    drop(proving);
    if let Some(mut app) = app {
        tokio::io::copy_bidirectional(&mut stream, &mut app).await?;
    }
    Ok(())
}

// The server's side.

/// A connection to `port` on the own loopback of session `id`, running as a job of an
/// engine whose shared directory is `output_dir`, through its relay. `ConnectionRefused`
/// when nothing listens there yet (or the relay does not yet).
pub async fn connect(output_dir: &str, id: Uuid, port: u16) -> std::io::Result<TcpStream> {
    use std::io::{Error, ErrorKind};
    let sd = super::job::session_dir(output_dir, id);
    let relay = sd
        .read_spec()
        .and_then(|s| s.relay)
        .ok_or_else(|| Error::new(ErrorKind::NotFound, "the session has no relay"))?;
    let at: Address = files::read_json(&sd.root.join(ADDRESS_FILE))
        .ok_or_else(|| Error::new(ErrorKind::ConnectionRefused, "its relay does not listen yet"))?;
    tokio::time::timeout(HANDSHAKE, async {
        let mut stream = TcpStream::connect((at.host.as_str(), at.port)).await?;
        stream.set_nodelay(true)?;
        handshake(&mut stream, &relay.secret, port).await?;
        Ok(stream)
    })
    .await
    .map_err(|_| Error::new(ErrorKind::TimedOut, "the session's relay did not answer in time"))?
}

/// The server's half of the handshake on `stream`, for `port`.
async fn handshake(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), secret: &str, port: u16) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    let greeting = line(stream).await?;
    let theirs = greeting
        .strip_prefix(GREETING)
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or_else(|| Error::other("not a session's relay"))?
        .to_owned();
    let ours = nonce();
    let port = port.to_string();
    let tag = encoded(mac(secret, &[GREETING, &theirs, &ours, &port]));
    stream.write_all(format!("{port} {ours} {tag}\n").as_bytes()).await?;
    let answer = line(stream).await?;
    match answer.split_once(' ').unwrap_or((&answer, "")) {
        ("ok", proof) if verified(secret, &["node", &theirs, &ours], proof) => Ok(()),
        ("ok", _) => Err(Error::other("the relay did not prove the session's secret")),
        ("refused", "") => Err(Error::new(ErrorKind::ConnectionRefused, "nothing listens on the app's port")),
        (_, why) => Err(Error::other(format!("the relay refused: {why}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_secret_passes_and_both_sides_prove_it() {
        let relay = Relay::new(None, vec![8000]);
        // The server's half against a relay's, over a pipe: it passes, and the relay's
        // proof is checked; another secret proves nothing.
        let (mut server, mut node) = tokio::io::duplex(1024);
        let node_side = async {
            let ours = nonce();
            node.write_all(format!("{GREETING} {ours}\n").as_bytes()).await.expect("greets");
            let asked = line(&mut node).await.expect("asked");
            let words: Vec<&str> = asked.split(' ').collect();
            assert!(verified(&relay.secret, &[GREETING, &ours, words[1], words[0]], words[2]));
            assert!(!verified("another", &[GREETING, &ours, words[1], words[0]], words[2]));
            assert!(!verified(&relay.secret, &[GREETING, &ours, words[1], "8001"], words[2]), "for that port alone");
            let proof = encoded(mac("not the secret", &["node", &ours, words[1]]));
            node.write_all(format!("ok {proof}\n").as_bytes()).await.expect("answers");
        };
        let (_, shaken) = tokio::join!(node_side, handshake(&mut server, &relay.secret, 8000));
        let refused = shaken.expect_err("a relay that does not know the secret is not trusted");
        assert!(refused.to_string().contains("did not prove"), "{refused}");
    }
}
