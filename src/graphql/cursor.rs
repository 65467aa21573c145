//! Cursors: the opaque form in which a client carries a domain page position (URL-safe
//! base64 of its JSON). Whether a decoded position fits the list is the domain's to check.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::DomainError;

use super::result::{ApiResult, with_paths};
use crate::domain::store::paging::PageRequest;

pub fn encode<P: Serialize>(position: &P) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(position).unwrap_or_default())
}

/// The position in cursor `text` given as argument `field`, or `INVALID_CURSOR`.
pub fn decode<P: DeserializeOwned>(text: &str, field: &str) -> ApiResult<P> {
    URL_SAFE_NO_PAD.decode(text.as_bytes()).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).ok_or_else(
        || {
            DomainError::bad_input("INVALID_CURSOR", Some(field.to_owned()), format!("`{field}`: malformed cursor"))
                .into()
        },
    )
}

/// The cursor of a position in the global sequence of status transitions (a timeline entry,
/// a live event): the number itself, so that any of them resumes a subscription.
pub fn sequence(seq: i64) -> String {
    seq.to_string()
}

/// The sequence number of cursor `text` given as argument `field`, or `INVALID_CURSOR`.
pub fn decode_sequence(text: &str, field: &str) -> ApiResult<i64> {
    text.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
        DomainError::bad_input(
            "INVALID_CURSOR",
            Some(field.to_owned()),
            format!("`{field}`: malformed cursor (use the cursor of an event or status transition)"),
        )
        .into()
    })
}

/// The domain page request of Relay's `first`/`last`/`after`/`before`: sizes are checked
/// first (whatever is wrong with the cursors), then the cursors decoded into positions.
/// `path` names the domain's paging fields in this API.
pub fn page_request<P: DeserializeOwned>(
    first: Option<i32>,
    last: Option<i32>,
    after: Option<&str>,
    before: Option<&str>,
    path: impl Fn(&str) -> String,
) -> ApiResult<PageRequest<P>> {
    let request = PageRequest::new(first, last, after, before).map_err(|e| with_paths(e, &path))?;
    let (after, before) = (request.after, request.before);
    let after = after.map(|c| decode(c, &path("after"))).transpose()?;
    let before = before.map(|c| decode(c, &path("before"))).transpose()?;
    Ok(request.with_positions(after, before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let text = encode(&42_i64);
        assert_eq!(decode::<i64>(&text, "after").ok(), Some(42));
        for bad in ["!!", "", &URL_SAFE_NO_PAD.encode("{}")] {
            assert!(decode::<i64>(bad, "after").is_err(), "{bad}");
        }
    }
}
