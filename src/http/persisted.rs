//! Automatic persisted queries, Apollo's protocol (`extensions.persistedQuery {version: 1,
//! sha256Hash}`), as Apollo Client's `PersistedQueryLink` and urql's persisted exchange send
//! them: a request with the hash alone runs the document sent before with that hash; one
//! this server has not kept is answered `PERSISTED_QUERY_NOT_FOUND`, and the client sends
//! the document with its hash, which is checked and kept. Kept per server process, at most
//! [`CAPACITY`] documents of at most [`MAX_BYTES`] each, the least recently used going
//! first: a replica that has not seen a document answers NOT_FOUND, and the client falls
//! back.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// Documents kept, and the longest kept.
pub const CAPACITY: usize = 1024;
pub const MAX_BYTES: usize = 64 * 1024;

/// The code and message of a request the protocol refuses.
pub struct Refused {
    pub code: &'static str,
    pub message: &'static str,
    /// An error of the request (400), not a missing document (a GraphQL error the client
    /// reads to fall back).
    pub bad_request: bool,
}

pub struct Persisted {
    kept: Mutex<lru::LruCache<String, Arc<str>>>,
}

impl Default for Persisted {
    fn default() -> Self {
        let capacity = NonZeroUsize::new(CAPACITY).unwrap_or(NonZeroUsize::MIN);
        Self { kept: Mutex::new(lru::LruCache::new(capacity)) }
    }
}

impl Persisted {
    /// `request` with its document: the one its hash names when it came without one.
    pub fn resolve(&self, mut request: async_graphql::Request) -> Result<async_graphql::Request, Refused> {
        let Some(persisted) = request.extensions.get("persistedQuery") else { return Ok(request) };
        let persisted = serde_json::to_value(persisted).unwrap_or_default();
        let version = persisted.get("version").and_then(serde_json::Value::as_i64);
        let hash = persisted.get("sha256Hash").and_then(serde_json::Value::as_str).map(str::to_ascii_lowercase);
        let (Some(1), Some(hash)) = (version, hash) else {
            return Err(Refused {
                code: "PERSISTED_QUERY_NOT_SUPPORTED",
                message: "persisted queries are version 1 with a sha256Hash",
                bad_request: true,
            });
        };
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if request.query.trim().is_empty() {
            let Some(query) = kept.get(&hash) else {
                return Err(Refused {
                    code: "PERSISTED_QUERY_NOT_FOUND",
                    message: "PersistedQueryNotFound",
                    bad_request: false,
                });
            };
            request.query = query.to_string();
            return Ok(request);
        }
        if crate::domain::directory::secrets::hex(&Sha256::digest(request.query.as_bytes())) != hash {
            return Err(Refused {
                code: "BAD_USER_INPUT",
                message: "the persisted query's sha256Hash is not the SHA-256 of its query",
                bad_request: true,
            });
        }
        if request.query.len() <= MAX_BYTES {
            kept.put(hash, Arc::from(request.query.as_str()));
        }
        Ok(request)
    }
}
