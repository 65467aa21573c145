//! Identifiers: stable ids of the demo and built-in records (a fresh demo database has the
//! same ids on every machine, so examples and tests can name them), and the public ids
//! every transport shows and reads.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use uuid::Uuid;

const NAMESPACE: Uuid = Uuid::from_u128(0x5e55_10d0_0000_4000_8000_5e55_10d0_0001);

/// A deterministic id for a named record, e.g. `stable_id("project", "default/research")`.
pub fn stable_id(kind: &str, name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, format!("{kind}:{name}").as_bytes())
}

/// A record's public id, as every transport shows and reads it: opaque, URL-safe base64
/// of `Kind:key` (Relay's global ids). A malformed id, or one of another kind, decodes to
/// nothing, which callers report like a missing record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    User,
    Project,
    Session,
    LaunchGroup,
    SchedulingHistoryEntry,
    SessionTemplate,
    Folder,
    UserSettings,
}

impl NodeKind {
    fn prefix(self) -> &'static str {
        match self {
            Self::User => "User",
            Self::Project => "Project",
            Self::Session => "Session",
            Self::LaunchGroup => "LaunchGroup",
            Self::SchedulingHistoryEntry => "SchedulingHistoryEntry",
            Self::SessionTemplate => "SessionTemplate",
            Self::Folder => "Folder",
            Self::UserSettings => "UserSettings",
        }
    }

    const ALL: [NodeKind; 8] = [
        Self::User,
        Self::Project,
        Self::Session,
        Self::LaunchGroup,
        Self::SchedulingHistoryEntry,
        Self::SessionTemplate,
        Self::Folder,
        Self::UserSettings,
    ];
}

pub fn encode(kind: NodeKind, key: impl std::fmt::Display) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{key}", kind.prefix()))
}

/// The kind and key of a global id.
pub fn decode(id: &str) -> Option<(NodeKind, String)> {
    let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(id.as_bytes()).ok()?).ok()?;
    let (prefix, key) = raw.split_once(':')?;
    let kind = NodeKind::ALL.into_iter().find(|k| k.prefix() == prefix)?;
    Some((kind, key.to_owned()))
}

/// The UUID of a global id of `kind`, if it is one, written exactly as [`encode`] writes it:
/// one object has one id (no other spelling of the same UUID, no padding, resolves).
pub fn decode_uuid(id: &str, kind: NodeKind) -> Option<Uuid> {
    let uuid = match decode(id)? {
        (k, key) if k == kind => Uuid::parse_str(&key).ok()?,
        _ => return None,
    };
    (encode(kind, uuid) == id).then_some(uuid)
}

/// The most ids one lookup by global id (`nodes`) takes at once.
pub const MAX_LOOKUP: usize = 100;

/// `TOO_MANY` (at `ids`) past [`MAX_LOOKUP`] ids: a lookup costs a read per id.
pub fn bounded_lookup(len: usize) -> crate::domain::DomainResult<()> {
    match crate::domain::InputProblem::too_many("ids", len, MAX_LOOKUP, "ids at once") {
        Some(p) => Err(crate::domain::DomainError::BadInput(vec![p])),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let id = Uuid::new_v4();
        let gid = encode(NodeKind::Project, id);
        assert_eq!(decode_uuid(&gid, NodeKind::Project), Some(id));
        assert_eq!(decode_uuid(&gid, NodeKind::Session), None, "another type");
        assert_eq!(decode_uuid("not base64!", NodeKind::Project), None);
        assert_eq!(decode_uuid(&URL_SAFE_NO_PAD.encode("Project:xyz"), NodeKind::Project), None);
        assert_eq!(decode(&URL_SAFE_NO_PAD.encode("Nope:1")), None);
        // Other spellings of the same object do not resolve.
        let upper = URL_SAFE_NO_PAD.encode(format!("Project:{}", id.to_string().to_uppercase()));
        assert_eq!(decode_uuid(&upper, NodeKind::Project), None);
        let simple = URL_SAFE_NO_PAD.encode(format!("Project:{}", id.simple()));
        assert_eq!(decode_uuid(&simple, NodeKind::Project), None);
        let padded = base64::engine::general_purpose::URL_SAFE.encode(format!("Project:{id}"));
        if padded != gid {
            assert_eq!(decode_uuid(&padded, NodeKind::Project), None);
        }
    }
}
