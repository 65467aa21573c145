//! The registries a site declares, and which one an image's reference names.
//!
//! ```toml
//! [registries.lab]
//! url = "https://registry.example.org"
//! username = "puller"
//! password_file = "/etc/sessiond/registry-lab.password"   # or token_file = "…"
//!
//! [registries.local]
//! url = "http://127.0.0.1:5000"
//! insecure = true                  # plain HTTP: a loopback address only
//!
//! [images."pytorch:2.5"]
//! ref = "lab/ml/pytorch:2.5"        # REGISTRY/REPOSITORY:TAG, or …@sha256:…
//! ```
//!
//! A reference's first part is a declared registry's name or a registry's host. Credentials
//! are read from their files when a pull needs them, by the process that pulls (the server
//! here, the job's supervisor on a Slurm node: there the file must be readable too); only
//! the files' paths are ever stored.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use serde::{Deserialize, Serialize};

use super::PullError;

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// `https://HOST[:PORT]`, or `http://…` with `insecure` on a loopback address.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl Registry {
    /// `HOST[:PORT]` of the registry.
    pub fn host(&self) -> Result<String, String> {
        let url = url::Url::parse(&self.url).map_err(|e| format!("url {:?}: {e}", self.url))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("url {:?}: the scheme is http or https", self.url));
        }
        if url.path() != "/" || url.query().is_some() || !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "url {:?}: a registry's address is its scheme, host and port (credentials go in username and password_file)",
                self.url
            ));
        }
        let host = url.host_str().ok_or_else(|| format!("url {:?}: no host", self.url))?;
        Ok(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        })
    }

    /// Speaks plain HTTP (declared insecure).
    pub fn plain_http(&self) -> bool {
        self.insecure
    }

    /// Checks the declaration: a URL, credentials of one kind, plain HTTP only on loopback.
    pub fn validate(&self) -> Result<(), String> {
        let host = self.host()?;
        let http = self.url.starts_with("http://");
        if http && !self.insecure {
            return Err(format!("url {:?}: plain HTTP needs insecure = true (loopback only)", self.url));
        }
        if self.insecure {
            let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h).trim_matches(['[', ']']);
            let loopback = name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                return Err(format!("insecure = true is allowed for a loopback address only, not {host}"));
            }
        }
        match (&self.username, &self.password_file, &self.token_file) {
            (None, None, None) | (Some(_), Some(_), None) | (None, None, Some(_)) => Ok(()),
            (Some(_), None, None) => Err("username needs password_file".into()),
            (None, Some(_), None) => Err("password_file needs username".into()),
            _ => Err("either username and password_file or token_file, not both".into()),
        }
    }

    /// The credentials, read from their files now.
    pub fn auth(&self) -> Result<RegistryAuth, PullError> {
        let read = |path: &PathBuf, what: &str| {
            std::fs::read_to_string(path).map(|s| s.trim_end_matches(['\n', '\r']).to_owned()).map_err(|e| {
                PullError::Unauthorized(format!(
                    "cannot read the registry's {what} file {}: {}",
                    path.display(),
                    e.kind()
                ))
            })
        };
        Ok(match (&self.username, &self.password_file, &self.token_file) {
            (Some(user), Some(password), _) => RegistryAuth::Basic(user.clone(), read(password, "password")?),
            (_, _, Some(token)) => RegistryAuth::Bearer(read(token, "token")?),
            _ => RegistryAuth::Anonymous,
        })
    }
}

/// What a pull fetches, and from where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The reference with the registry's host (`HOST[:PORT]/REPOSITORY:TAG` or `…@DIGEST`).
    pub reference: String,
    /// The declared registry it names, if any (anonymous HTTPS otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<Registry>,
    /// `reference` as it was parsed where it was resolved, carried to whoever pulls it: a
    /// supervisor is a new process each time, and parsing a reference first compiles the
    /// parser's regular expression, 37–39 ms of CPU on every warm start (BENCHMARKS.md, "The
    /// warm start, profiled").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Reference>,
}

impl Target {
    pub fn parsed(&self) -> Result<Reference, PullError> {
        if let Some(parts) = &self.parts {
            return Ok(parts.clone());
        }
        self.reference.parse().map_err(|e| PullError::Invalid(format!("reference {:?}: {e}", self.reference)))
    }

    /// The same image pinned to `digest` (a relaunch runs what its session ran).
    pub fn pinned(self, digest: &str) -> Result<Self, PullError> {
        let parts = self.parsed()?.clone_with_digest(digest.to_owned());
        Ok(Self { reference: parts.whole(), parts: Some(parts), ..self })
    }
}

/// The registry name a reference starts with: a first part that does not read as a host
/// (no `.`, no `:`, not `localhost`), before a `/`. A declared registry's name never reads
/// as a host (`apply` allows lower-case letters, digits, `-` and `_`).
pub fn named(reference: &str) -> Option<&str> {
    let (first, _) = reference.split_once('/')?;
    (!first.contains(['.', ':']) && first != "localhost").then_some(first)
}

/// The target of `reference`: its first part a declared registry's name (replaced by the
/// registry's host) or a host.
pub fn resolve(reference: &str, registries: &BTreeMap<String, Registry>) -> Result<Target, String> {
    let (full, registry) = match named(reference).and_then(|n| registries.get(n).map(|r| (n, r))) {
        Some((name, r)) => (format!("{}{}", r.host()?, &reference[name.len()..]), Some(r.clone())),
        None => (reference.to_owned(), None),
    };
    let parsed: Reference = full.parse().map_err(|e| format!("reference {reference:?}: {e}"))?;
    let registry = match registry {
        Some(r) => Some(r),
        None => registries.values().find(|r| r.host().is_ok_and(|h| h == parsed.registry())).cloned(),
    };
    Ok(Target { reference: parsed.whole(), registry, parts: Some(parsed) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(url: &str, insecure: bool) -> Registry {
        Registry { url: url.into(), insecure, ..Default::default() }
    }

    /// A target carries its reference parsed, through the spec's JSON, as parsing it again
    /// would give it; pinned, it names the digest alone.
    #[test]
    fn a_target_carries_its_reference_parsed() {
        let registries = BTreeMap::from([("lab".to_owned(), reg("http://127.0.0.1:5000", true))]);
        let digest = format!("sha256:{}", "a".repeat(64));
        for reference in
            ["lab/team/img:1".to_owned(), format!("registry.example.org/a/b@{digest}"), "lab/x:2".to_owned()]
        {
            let target = resolve(&reference, &registries).expect("resolves");
            let carried: Target = serde_json::from_str(&serde_json::to_string(&target).expect("json")).expect("back");
            let fresh: Reference = target.reference.parse().expect("parses");
            assert_eq!(carried.parsed().expect("parsed"), fresh, "{reference}");
        }
        let target = resolve("lab/team/img:1", &registries).expect("resolves");
        let digest = format!("sha256:{}", "b".repeat(64));
        let pinned = target.pinned(&digest).expect("pinned");
        assert_eq!(pinned.reference, format!("127.0.0.1:5000/team/img@{digest}"));
        assert_eq!(pinned.parsed().expect("parsed"), pinned.reference.parse::<Reference>().expect("parses"));
        // A spec written without the parts (by an older server) still pulls.
        let old = Target { parts: None, ..pinned.clone() };
        assert_eq!(old.parsed().expect("parsed"), pinned.parsed().expect("parsed"));
    }

    #[test]
    fn plain_http_only_on_loopback() {
        assert!(reg("http://127.0.0.1:5000", true).validate().is_ok());
        assert!(reg("http://localhost:5000", true).validate().is_ok());
        assert!(reg("http://[::1]:5000", true).validate().is_ok());
        assert!(reg("https://registry.example.org", false).validate().is_ok());
        assert!(reg("http://127.0.0.1:5000", false).validate().is_err(), "plain HTTP must say insecure");
        assert!(reg("http://10.0.0.5:5000", true).validate().expect_err("refused").contains("loopback"));
        assert!(reg("https://registry.example.org", true).validate().is_err());
        assert!(
            reg("https://user:pw@registry.example.org", false)
                .validate()
                .expect_err("refused")
                .contains("password_file")
        );
    }

    #[test]
    fn credentials_of_one_kind() {
        let mut r = reg("https://r.example.org", false);
        r.username = Some("u".into());
        assert_eq!(r.validate().expect_err("refused"), "username needs password_file");
        r.password_file = Some("/p".into());
        assert!(r.validate().is_ok());
        r.token_file = Some("/t".into());
        assert!(r.validate().is_err());
    }

    #[test]
    fn a_reference_names_a_registry_or_a_host() {
        let registries = BTreeMap::from([("lab".to_owned(), reg("http://127.0.0.1:5000", true))]);
        let t = resolve("lab/ml/pytorch:2.5", &registries).expect("done");
        assert_eq!(t.reference, "127.0.0.1:5000/ml/pytorch:2.5");
        assert!(t.registry.is_some());
        let t = resolve(
            "127.0.0.1:5000/base@sha256:0123456789012345678901234567890123456789012345678901234567890123",
            &registries,
        )
        .expect("done");
        assert!(t.registry.is_some(), "the host of a declared registry is that registry");
        let t = resolve("registry.example.org/x:1", &registries).expect("done");
        assert_eq!((t.reference.as_str(), t.registry), ("registry.example.org/x:1", None));
        assert!(resolve("lab/UPPER:1", &registries).is_err());
    }
}
