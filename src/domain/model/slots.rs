//! Resource slots: a map from slot name (`cpu`, `mem`, `cuda.device`, …) to an amount, and
//! all arithmetic on them. Memory is in bytes, everything else in its own unit.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::domain::DomainError;

pub const CPU: &str = "cpu";
pub const MEM: &str = "mem";

/// Amounts that differ by less than this are equal: slot amounts are fractional cores or
/// shares, summed in floating point.
pub const EPSILON: f64 = 1e-9;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceSlots(BTreeMap<String, f64>);

impl ResourceSlots {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, f64)>) -> Self {
        Self(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    /// The amount of `slot`, 0 when absent.
    pub fn get(&self, slot: &str) -> f64 {
        self.0.get(slot).copied().unwrap_or(0.0)
    }

    /// The amount of `slot` when it is present: in a limit, absent means unlimited.
    pub fn limit(&self, slot: &str) -> Option<f64> {
        self.0.get(slot).copied()
    }

    pub fn set(&mut self, slot: &str, amount: f64) {
        self.0.insert(slot.to_owned(), amount);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn slot_names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn add(&self, other: &ResourceSlots) -> ResourceSlots {
        let mut sum = self.clone();
        for (slot, amount) in other.iter() {
            *sum.0.entry(slot.to_owned()).or_insert(0.0) += amount;
        }
        sum
    }

    pub fn sub(&self, other: &ResourceSlots) -> ResourceSlots {
        let mut diff = self.clone();
        for (slot, amount) in other.iter() {
            *diff.0.entry(slot.to_owned()).or_insert(0.0) -= amount;
        }
        diff
    }

    pub fn scale(&self, factor: f64) -> ResourceSlots {
        Self(self.0.iter().map(|(k, v)| (k.clone(), v * factor)).collect())
    }

    /// Whether every slot of `self` fits in `capacity`, where a slot absent from `capacity`
    /// is unlimited when `absent_is_unlimited` (limits) and zero otherwise (agents).
    pub fn fits_in(&self, capacity: &ResourceSlots, absent_is_unlimited: bool) -> bool {
        self.0.iter().all(|(slot, amount)| match capacity.0.get(slot) {
            Some(cap) => *amount <= cap + EPSILON,
            None => absent_is_unlimited || *amount <= EPSILON,
        })
    }

    /// Slot-wise minimum over the slots both have.
    pub fn min(&self, other: &ResourceSlots) -> ResourceSlots {
        Self(self.0.iter().filter_map(|(k, v)| other.0.get(k).map(|o| (k.clone(), v.min(*o)))).collect())
    }

    pub fn to_json(&self) -> Value {
        Value::Object(self.0.iter().map(|(k, v)| (k.clone(), amount_to_json(*v))).collect())
    }

    /// Reads slots stored by [`Self::to_json`]; anything else is corrupted data.
    pub fn from_json(value: &Value) -> Result<Self, DomainError> {
        let object = value
            .as_object()
            .ok_or_else(|| DomainError::invariant(format!("resource slots are not an object: {value}")))?;
        object
            .iter()
            .map(|(k, v)| {
                v.as_f64()
                    .map(|amount| (k.clone(), amount))
                    .ok_or_else(|| DomainError::invariant(format!("slot {k} is not a number: {v}")))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// What a session asks for: the same slots for each of its `cluster_size` containers. The
/// launcher's input is per container; quotas, occupancy and the stored `requested_slots`
/// are the whole session's [`total`](Self::total). This is the one place the two meet.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceRequest {
    pub per_container: ResourceSlots,
    pub cluster_size: u32,
}

impl ResourceRequest {
    pub fn new(per_container: ResourceSlots, cluster_size: u32) -> Self {
        Self { per_container, cluster_size: cluster_size.max(1) }
    }

    /// The whole session: per container × cluster size.
    pub fn total(&self) -> ResourceSlots {
        self.per_container.scale(f64::from(self.cluster_size))
    }

    /// The request of a stored session, from its total and cluster size.
    pub fn from_stored(total: &Value, cluster_size: i32) -> Result<Self, DomainError> {
        let cluster_size = u32::try_from(cluster_size)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| DomainError::invariant(format!("stored cluster size {cluster_size}")))?;
        Ok(Self::new(ResourceSlots::from_json(total)?.scale(1.0 / f64::from(cluster_size)), cluster_size))
    }
}

/// Whole amounts are stored as JSON integers (bytes of memory exceed f64's pretty range).
fn amount_to_json(amount: f64) -> Value {
    if amount.fract() == 0.0 && amount.abs() < 9.0e15 { Value::from(amount as i64) } else { Value::from(amount) }
}

/// An amount of `slot` as a person reads it: memory in binary units (`2 GiB`, `1.5 GiB`,
/// `512 MiB`), anything else as a plain number (`2`, `0.5`). For messages; the API's numbers
/// stay numbers.
pub fn shown(slot: &str, amount: f64) -> String {
    fn trimmed(v: f64) -> String {
        let text = format!("{:.2}", v);
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
    if slot != MEM {
        return trimmed(amount);
    }
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = amount;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit < units.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", trimmed(v), units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(shown(MEM, 2.0 * 1024.0 * 1024.0 * 1024.0), "2 GiB");
        assert_eq!(shown(MEM, 1536.0 * 1024.0 * 1024.0), "1.5 GiB");
        assert_eq!(shown(MEM, 512.0 * 1024.0 * 1024.0), "512 MiB");
        assert_eq!(shown(MEM, 100.0), "100 bytes");
        assert_eq!(shown(CPU, 0.5), "0.5");
        assert_eq!(shown("cuda.device", 2.0), "2");
    }

    /// A number stored in a JSON column reads back as the number written: serde_json's
    /// default parser was one unit in the last place off for one stored value in eight.
    #[test]
    fn stored_amounts_read_back_exactly() {
        for text in ["1717119834.1373699", "0.30000000000000004", "2.2250738585072014e-308", "17179869184.000002"] {
            let exact: f64 = text.parse().expect("a number");
            let read: serde_json::Value = serde_json::from_str(&format!("{{\"cpu\": {text}}}")).expect("JSON");
            assert_eq!(read["cpu"].as_f64().map(f64::to_bits), Some(exact.to_bits()), "{text}");
        }
    }

    #[test]
    fn arithmetic() {
        let a = ResourceSlots::from_pairs([(CPU, 2.0), (MEM, 1024.0)]);
        let b = ResourceSlots::from_pairs([(CPU, 0.5), ("cuda.device", 1.0)]);
        let sum = a.add(&b);
        assert_eq!(sum.get(CPU), 2.5);
        assert_eq!(sum.get("cuda.device"), 1.0);
        assert_eq!(sum.sub(&b), ResourceSlots::from_pairs([(CPU, 2.0), (MEM, 1024.0), ("cuda.device", 0.0)]));
        assert_eq!(a.scale(2.0).get(MEM), 2048.0);
        assert_eq!(a.min(&b), ResourceSlots::from_pairs([(CPU, 0.5)]));
    }

    #[test]
    fn setting_and_naming_slots() {
        let mut slots = ResourceSlots::new();
        slots.set("cuda.device", 2.0);
        slots.set(CPU, 1.5);
        slots.set(CPU, 3.0);
        assert_eq!((slots.get(CPU), slots.limit("cuda.device"), slots.limit(MEM)), (3.0, Some(2.0), None));
        assert_eq!(slots.slot_names().collect::<Vec<_>>(), ["cpu", "cuda.device"]);
    }

    #[test]
    fn fitting_treats_absent_slots_by_context() {
        let request = ResourceSlots::from_pairs([(CPU, 4.0), ("cuda.device", 1.0)]);
        let agent = ResourceSlots::from_pairs([(CPU, 8.0)]);
        assert!(!request.fits_in(&agent, false), "an agent without accelerators has none");
        assert!(request.fits_in(&agent, true), "a limit without the slot is unlimited");
        let tight = ResourceSlots::from_pairs([(CPU, 0.1 + 0.2)]);
        assert!(tight.fits_in(&ResourceSlots::from_pairs([(CPU, 0.3)]), false));
    }

    #[test]
    fn a_request_totals_its_containers() {
        let request = ResourceRequest::new(ResourceSlots::from_pairs([(CPU, 4.0), (MEM, 1024.0)]), 2);
        assert_eq!(request.total(), ResourceSlots::from_pairs([(CPU, 8.0), (MEM, 2048.0)]));
        let stored = ResourceRequest::from_stored(&request.total().to_json(), 2).ok();
        assert_eq!(stored, Some(request));
        assert!(ResourceRequest::from_stored(&serde_json::json!({"cpu": 1}), 0).is_err());
    }

    #[test]
    fn json_round_trip_keeps_bytes_exact() {
        let slots = ResourceSlots::from_pairs([(CPU, 0.25), (MEM, 68_719_476_736.0)]);
        let json = slots.to_json();
        assert_eq!(json["mem"], serde_json::json!(68_719_476_736_i64));
        assert_eq!(ResourceSlots::from_json(&json).ok(), Some(slots));
        assert!(ResourceSlots::from_json(&serde_json::json!({"cpu": "x"})).is_err());
    }
}
