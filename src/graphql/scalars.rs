//! Custom scalars, and what the schema says of its scalars.

/// `DateTime` as the schema describes it (the library's own says only what implements it).
pub const DATE_TIME: &str = "An instant, as RFC 3339 text. Answers are in UTC, written with the offset \
`+00:00` and a fraction of a second when there is one, to the microsecond (`2026-12-06T08:30:00.123456+00:00`). \
Inputs may carry any offset (`Z` too).";

/// `BigInt` as the schema describes it.
pub const BIG_INT: &str = "A signed 64-bit integer, sent as a JSON number, not a string (memory sizes in \
bytes exceed `Int`'s 32 bits). Map it to a number: the API's values (bytes, counts) stay below 2^53, where \
JavaScript's numbers are exact. Accepted as a number or as a string of decimal digits.";

use async_graphql::{InputValueError, InputValueResult, Number, Scalar, ScalarType, Value};

/// A 64-bit integer sent as a JSON number (memory sizes in bytes exceed `Int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigInt(pub i64);

#[Scalar(name = "BigInt")]
impl ScalarType for BigInt {
    fn parse(value: Value) -> InputValueResult<Self> {
        match &value {
            Value::Number(n) => n.as_i64().map(BigInt).ok_or_else(|| InputValueError::custom("not a 64-bit integer")),
            Value::String(s) => s.parse().map(BigInt).map_err(|_| InputValueError::custom("not a 64-bit integer")),
            _ => Err(InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> Value {
        Value::Number(Number::from(self.0))
    }
}
