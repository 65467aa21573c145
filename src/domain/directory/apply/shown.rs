//! How a change is told in the plan: what differs, in the operator's units (memory in GiB,
//! an absent limit as unlimited), and the values stored for lists of names.

use std::collections::BTreeSet;

use serde_json::Value;

use super::ApplyError;
use crate::domain::model::SessionType;
use crate::domain::model::slots::{MEM, ResourceSlots};

pub(super) fn type_names(types: &[SessionType]) -> Vec<String> {
    types.iter().map(|t| t.as_str().to_owned()).collect()
}

/// Settings stored as a JSON object (an engine's, a registry's), as `key value` words.
pub(super) fn settings_shown(v: &Value) -> Vec<String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k} {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
        .collect()
}

pub(super) fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
}

pub(super) fn diff<T: PartialEq + std::fmt::Display>(details: &mut Vec<String>, label: &str, old: &T, new: &T) {
    if old != new {
        details.push(format!("{label}: {old} → {new}"));
    }
}

pub(super) fn diff_opt<T: PartialEq + std::fmt::Display>(
    details: &mut Vec<String>,
    label: &str,
    old: &Option<T>,
    new: &Option<T>,
) {
    let show = |v: &Option<T>| v.as_ref().map_or_else(|| "none".to_owned(), |n| n.to_string());
    if old != new {
        details.push(format!("{label}: {} → {}", show(old), show(new)));
    }
}

pub(super) fn diff_list(details: &mut Vec<String>, label: &str, old: &[String], new: &[String]) {
    if old != new {
        details.push(format!("{label}: [{}] → [{}]", old.join(", "), new.join(", ")));
    }
}

pub(super) fn slots_diff(
    details: &mut Vec<String>,
    label: &str,
    stored: &Value,
    new: &ResourceSlots,
) -> Result<(), ApplyError> {
    let old = ResourceSlots::from_json(stored)?;
    if &old == new {
        return Ok(());
    }
    let names: BTreeSet<&str> = old.slot_names().chain(new.slot_names()).collect();
    let changed: Vec<String> = names
        .into_iter()
        .filter(|s| old.limit(s) != new.limit(s))
        .map(|s| format!("{s} {} → {}", amount(s, old.limit(s)), amount(s, new.limit(s))))
        .collect();
    details.push(format!("{label}: {}", changed.join(", ")));
    Ok(())
}

pub(super) fn limits_shown(limits: &ResourceSlots) -> Vec<String> {
    slots_shown("limits", limits)
}

pub(super) fn slots_shown(label: &str, slots: &ResourceSlots) -> Vec<String> {
    if slots.iter().next().is_none() {
        return Vec::new();
    }
    let shown: Vec<String> = slots.iter().map(|(s, v)| format!("{s} {}", amount(s, Some(v)))).collect();
    vec![format!("{label}: {}", shown.join(", "))]
}

/// An amount as an operator reads it: memory in GiB or MiB when whole, absent as unlimited.
pub(super) fn amount(slot: &str, v: Option<f64>) -> String {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;
    match v {
        None => "unlimited".to_owned(),
        Some(b) if slot == MEM && b >= GIB && (b / GIB).fract() == 0.0 => format!("{} GiB", b / GIB),
        Some(b) if slot == MEM && b >= MIB && (b / MIB).fract() == 0.0 => format!("{} MiB", b / MIB),
        Some(n) => format!("{n}"),
    }
}
