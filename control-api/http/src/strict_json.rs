//! JSON read as the OpenAPI document describes it: an object field takes a JSON object (or `null`), never
//! an array. serde's derived structs also accept their fields as an array in declaration order
//! (`"config": ["…", …]`), which the document does not allow and no client means; `check` reads a body
//! again through `Strict`, a view of the parsed JSON that refuses that, and names the field.

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Value};

/// `Err("path: message")` when `value`, read as `T`, gives a struct as an array somewhere.
pub fn check<T: DeserializeOwned>(value: Value) -> Result<(), String> {
    serde_path_to_error::deserialize::<_, T>(Strict(value)).map(drop).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." { inner.to_string() } else { format!("{path}: {inner}") }
    })
}

/// A parsed JSON value whose structs must be objects.
struct Strict(Value);

impl<'de> de::Deserializer<'de> for Strict {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(StrictSeq(items.into_iter())),
            Value::Object(fields) => visitor.visit_map(StrictMap { fields: fields.into_iter(), value: None }),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(_) => Err(de::Error::invalid_type(de::Unexpected::Seq, &"an object")),
            Value::Object(_) => self.deserialize_any(visitor),
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        seq tuple tuple_struct map identifier
    }
}

impl<'de> IntoDeserializer<'de, serde_json::Error> for Strict {
    type Deserializer = Strict;

    fn into_deserializer(self) -> Strict {
        self
    }
}

struct StrictSeq(std::vec::IntoIter<Value>);

impl<'de> SeqAccess<'de> for StrictSeq {
    type Error = serde_json::Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, Self::Error> {
        self.0.next().map(|item| seed.deserialize(Strict(item))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct StrictMap {
    fields: <Map<String, Value> as IntoIterator>::IntoIter,
    value: Option<Value>,
}

impl<'de> MapAccess<'de> for StrictMap {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.fields.next() else { return Ok(None) };
        self.value = Some(value);
        seed.deserialize(Value::String(key)).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Self::Error> {
        let value = self.value.take().ok_or_else(|| de::Error::custom("a value without its key"))?;
        seed.deserialize(Strict(value))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::check;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        #[serde(default)]
        voice: String,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        #[serde(default)]
        inner: Option<Inner>,
        #[serde(default)]
        items: Vec<Inner>,
        #[serde(flatten)]
        rest: std::collections::HashMap<String, serde_json::Value>,
    }

    #[test]
    fn objects_pass_and_arrays_in_their_place_are_named() {
        assert_eq!(check::<Outer>(json!({"name": "a", "inner": {"voice": "v"}, "items": [{}], "x": [1]})), Ok(()));
        assert_eq!(check::<Outer>(json!({"name": "a", "inner": null})), Ok(()));
        let err = check::<Outer>(json!({"name": "a", "inner": ["v"]})).unwrap_err();
        assert!(err.starts_with("inner: invalid type: sequence, expected an object"), "{err}");
        let err = check::<Outer>(json!({"name": "a", "items": [{}, ["v"]]})).unwrap_err();
        assert!(err.starts_with("items[1]: invalid type: sequence"), "{err}");
        assert!(check::<Outer>(json!(["a"])).unwrap_err().starts_with("invalid type: sequence"));
    }
}
