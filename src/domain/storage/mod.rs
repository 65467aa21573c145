//! Storage a site declares for data that outlives a session (`[storage.NAME]` of `sessiond
//! apply`): a directory of this machine (for a Slurm group's sessions, one every node sees
//! too) under which sessiond makes its folders, each a directory it names itself (a path
//! never comes from a user); the quota a folder gets unless its creator asks for less; and
//! which projects may use it.

pub mod files;
pub mod folders;
pub mod mounts;
pub mod volume;

use serde::{Deserialize, Serialize};

/// A folder's quota unless the storage says otherwise.
pub const DEFAULT_QUOTA_BYTES: i64 = 10 << 30;

/// One declared storage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// The directory its folders are made in (absolute).
    pub path: String,
    /// A new folder's quota, in bytes.
    pub quota_bytes: i64,
    /// The projects (`DOMAIN/NAME`) whose users may make folders here; none: every project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projects: Option<Vec<String>>,
}

impl Storage {
    /// Whether project `project` (`DOMAIN/NAME`) may use it.
    pub fn open_to(&self, project: &str) -> bool {
        self.projects.as_ref().is_none_or(|p| p.iter().any(|name| name == project))
    }
}

/// Whether `name` may name a storage: lower-case letters, digits, `-` and `_`, 1 to 64.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_is_open_to_every_project_or_to_those_it_names() {
        let every = Storage { path: "/data".into(), quota_bytes: DEFAULT_QUOTA_BYTES, projects: None };
        assert!(every.open_to("default/default"));
        let some = Storage { projects: Some(vec!["lab/vision".into()]), ..every };
        assert!(some.open_to("lab/vision") && !some.open_to("default/default"));
        assert!(valid_name("scratch_1") && !valid_name("Scratch") && !valid_name("a/b") && !valid_name(""));
    }
}
