//! Strict JSON parsing: like `serde_json::from_str::<Value>`, but an object that
//! repeats a key is an error instead of silently keeping the last value.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `text` as JSON, rejecting objects with duplicate keys.
pub fn from_str(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<StrictValue>(text).map(|strict| strict.0)
}

/// A JSON value whose objects had no duplicate keys.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let StrictValue(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn parses_like_serde_json() {
        let text = r#"{"a":[1,-2,3.5,true,null,"x"],"b":{"c":{}}}"#;
        assert_eq!(
            super::from_str(text).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        assert_eq!(super::from_str("12").unwrap(), json!(12));
    }

    #[test]
    fn rejects_a_repeated_key_at_any_depth() {
        let err = super::from_str(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate key `a`"), "{err}");
        let err = super::from_str(r#"{"x":[{"k":1,"k":1}]}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate key `k`"), "{err}");
    }

    #[test]
    fn rejects_invalid_json() {
        assert!(super::from_str("{\"a\":").is_err());
        assert!(super::from_str("not json").is_err());
    }
}
