//! Each section's entries read into what they declare: its keys, their defaults and the
//! references to other sections (checked once every file is read).

mod catalog;
mod engines;
mod people;

pub(super) use catalog::{read_image, read_local, read_registry, read_storage};
pub(super) use engines::{AGENT_ENGINE, read_agent, read_engine, read_group};
pub(super) use people::{read_domain, read_policy, read_project, read_user};

/// A path key's value that must be absolute: otherwise a problem at its span saying `what`.
pub(super) fn require_absolute(
    e: &mut super::reader::Entry<'_, '_, '_, '_>,
    key: &str,
    value: Option<&str>,
    what: &str,
) {
    if value.is_some_and(|v| !v.starts_with('/')) {
        let span = e.span_of(key);
        e.bad(key, span, what.to_owned());
    }
}
