//! Stable identifiers of the demo and built-in records, so that a fresh demo database has
//! the same ids on every machine (examples and tests can name them).

use uuid::Uuid;

const NAMESPACE: Uuid = Uuid::from_u128(0x5e55_10d0_0000_4000_8000_5e55_10d0_0001);

/// A deterministic id for a named record, e.g. `stable_id("project", "default/research")`.
pub fn stable_id(kind: &str, name: &str) -> Uuid {
    Uuid::new_v5(&NAMESPACE, format!("{kind}:{name}").as_bytes())
}
