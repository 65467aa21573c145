//! Custom scalars.

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
