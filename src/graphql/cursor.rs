//! Cursors: the opaque form in which a client carries a domain page position (URL-safe
//! base64 of its JSON). Whether a decoded position fits the list is the domain's to check.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::DomainError;

use super::errors::ApiResult;

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

/// Both positions of a Relay page request, decoded.
pub fn decode_both<P: DeserializeOwned>(
    after: Option<&str>,
    before: Option<&str>,
) -> ApiResult<(Option<P>, Option<P>)> {
    Ok((after.map(|c| decode(c, "after")).transpose()?, before.map(|c| decode(c, "before")).transpose()?))
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
