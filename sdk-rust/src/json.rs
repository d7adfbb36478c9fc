//! [`Json`]: a resource's spec or status as the broker sent it, decoded on first read.
//!
//! A rollup request carries the composite's whole subtree and a compose request every child
//! it owns: thousands of documents, most of which a handler never opens (counting the ready
//! ones reads no JSON at all). Building a `serde_json::Value` for each took about half of the
//! SDK's time on such a request (5,000 descendants: 9-10 ms to decode and 4 ms to drop, of
//! 20 ms including protobuf). A `Json` keeps the text, checks on arrival that it is JSON
//! (so a malformed document still fails the task up front, naming the field), and builds
//! the `Value` the first time it is read. It dereferences to `Value`, so `spec["x"]`,
//! `spec.get("x")` and `status.as_ref().map(|s| s["ready"].clone())` read as before.
//!
//! The text is a slice of the frame it arrived in (`pb::Resource`'s byte fields are
//! `Bytes`), so no copy is made; a `Json` kept after its task keeps that frame alive, and
//! `Json::from(j.into_value())` detaches it.

use std::{
    fmt,
    ops::{Deref, DerefMut},
    sync::OnceLock,
};

use bytes::Bytes;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// A JSON document, decoded into a [`Value`] when first read.
///
/// Built by the SDK from the wire (text kept, checked to be JSON) or by anyone from a
/// `Value` (`Json::from(json!({...}))`); the default is `null`. Equality compares the
/// decoded documents.
#[derive(Clone, Default)]
pub struct Json {
    /// The text as received; empty once the value is the only truth (built from a `Value`
    /// or changed through `DerefMut`).
    text: Bytes,
    value: OnceLock<Value>,
}

impl Json {
    /// Keeps `text` after checking that it is one JSON document (no `Value` is built).
    pub(crate) fn from_text(text: Bytes) -> Result<Self, serde_json::Error> {
        serde_json::from_slice::<serde::de::IgnoredAny>(&text)?;
        Ok(Self {
            text,
            value: OnceLock::new(),
        })
    }

    /// The decoded document.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            // Checked in `from_text`, so this cannot fail; `Null` rather than a panic if it did.
            serde_json::from_slice(&self.text).unwrap_or(Value::Null)
        })
    }

    /// The decoded document, owned.
    pub fn into_value(self) -> Value {
        self.value();
        self.value.into_inner().unwrap_or_default()
    }

    /// Decodes the document into `T`: straight from the text when it was not read yet.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match self.value.get() {
            None if !self.text.is_empty() => serde_json::from_slice(&self.text),
            _ => T::deserialize(self.value()),
        }
    }
}

impl From<Value> for Json {
    fn from(v: Value) -> Self {
        Self {
            text: Bytes::new(),
            value: OnceLock::from(v),
        }
    }
}

impl From<Json> for Value {
    fn from(j: Json) -> Self {
        j.into_value()
    }
}

impl Deref for Json {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl DerefMut for Json {
    fn deref_mut(&mut self) -> &mut Value {
        self.value();
        // The caller may change the value, so the received text is no longer the truth.
        self.text = Bytes::new();
        self.value.get_mut().expect("decoded just above")
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl PartialEq<Json> for Value {
    fn eq(&self, other: &Json) -> bool {
        self == other.value()
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.value(), f)
    }
}

/// The JSON text: as received while it is current (no decode), otherwise the value's.
impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(&self.text) {
            Ok(text) if !text.is_empty() => f.write_str(text),
            _ => fmt::Display::fmt(self.value(), f),
        }
    }
}

impl Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_checked_on_arrival_and_decoded_when_read() {
        let j = Json::from_text(Bytes::from_static(br#"{"x": {"y": [1, 2.50, "z"]}}"#)).unwrap();
        assert!(j.value.get().is_none(), "nothing decoded before a read");
        assert_eq!(j["x"]["y"][2], "z");
        assert!(j.value.get().is_some());
        assert_eq!(j, json!({"x": {"y": [1, 2.5, "z"]}}));
        assert!(Json::from_text(Bytes::from_static(b"{")).is_err());
        assert!(
            Json::from_text(Bytes::from_static(b"{} {}")).is_err(),
            "one document only"
        );
        assert!(Json::from_text(Bytes::new()).is_err());
    }

    #[test]
    fn typed_reads_come_straight_from_the_text() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        struct S {
            x: u32,
        }
        let j = Json::from_text(Bytes::from_static(br#"{"x": 7}"#)).unwrap();
        assert_eq!(j.deserialize::<S>().unwrap(), S { x: 7 });
        assert!(j.value.get().is_none(), "a typed read builds no Value");
        assert!(j.deserialize::<Vec<u8>>().is_err());
        let built = Json::from(json!({"x": 8}));
        assert_eq!(built.deserialize::<S>().unwrap(), S { x: 8 });
    }

    #[test]
    fn the_text_follows_changes() {
        let mut j = Json::from_text(Bytes::from_static(br#"{"x": 1}"#)).unwrap();
        assert_eq!(
            j.to_string(),
            r#"{"x": 1}"#,
            "unchanged: the text as received"
        );
        j["x"] = json!(2);
        assert_eq!(j.to_string(), r#"{"x":2}"#, "changed: the value serialised");
        assert_eq!(Json::from(json!([true])).to_string(), "[true]");
        assert_eq!(Value::from(j), json!({"x": 2}));
        assert_eq!(Json::default().to_string(), "null");
        assert_eq!(Json::default().deserialize::<Option<u8>>().unwrap(), None);
    }
}
