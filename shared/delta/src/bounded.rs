//! What one parsed action may become: lists and maps of a commit line (partition columns,
//! partition values, configuration, features) hold at most [`MAX_ENTRIES`] entries, and
//! each parsed action says how much memory it holds ([`HeapSize`]), so that a parse is
//! bounded by what it keeps, not only by the bytes it read (`"partitionColumns":["","",…]`
//! is 24 bytes of `String` for every 3 bytes read).

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};

/// The most entries one list or map of an action holds: far more partition columns,
/// partition values, table properties or features than any table has.
pub const MAX_ENTRIES: usize = 4096;

/// Memory a parsed value holds beside its own size: its strings and collections.
pub trait HeapSize {
    fn heap_size(&self) -> u64;
}

/// Bookkeeping of one `String` or one map entry beside its bytes.
const STRING: u64 = 24;
const ENTRY: u64 = 16;

impl HeapSize for String {
    fn heap_size(&self) -> u64 {
        STRING + self.len() as u64
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_size(&self) -> u64 {
        self.as_ref().map_or(0, HeapSize::heap_size)
    }
}

impl<T: HeapSize> HeapSize for Vec<T> {
    fn heap_size(&self) -> u64 {
        self.iter().map(HeapSize::heap_size).sum()
    }
}

impl<K: HeapSize, V: HeapSize> HeapSize for HashMap<K, V> {
    fn heap_size(&self) -> u64 {
        self.iter()
            .map(|(k, v)| ENTRY + k.heap_size() + v.heap_size())
            .sum()
    }
}

/// A list of at most [`MAX_ENTRIES`].
struct BoundedList<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for BoundedList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Entries<T> {
            type Value = BoundedList<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a list of at most {MAX_ENTRIES} entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element()? {
                    if entries.len() == MAX_ENTRIES {
                        return Err(A::Error::custom(format!(
                            "a list of more than {MAX_ENTRIES} entries"
                        )));
                    }
                    entries.push(entry);
                }
                Ok(BoundedList(entries))
            }
        }
        deserializer.deserialize_seq(Entries(PhantomData))
    }
}

/// A map of at most [`MAX_ENTRIES`] (a key given twice counts twice).
struct BoundedMap<K, V>(HashMap<K, V>);

impl<'de, K, V> Deserialize<'de> for BoundedMap<K, V>
where
    K: Deserialize<'de> + Eq + Hash,
    V: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<K, V>(PhantomData<(K, V)>);
        impl<'de, K, V> Visitor<'de> for Entries<K, V>
        where
            K: Deserialize<'de> + Eq + Hash,
            V: Deserialize<'de>,
        {
            type Value = BoundedMap<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a map of at most {MAX_ENTRIES} entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = HashMap::new();
                let mut seen = 0;
                while let Some((key, value)) = map.next_entry()? {
                    seen += 1;
                    if seen > MAX_ENTRIES {
                        return Err(A::Error::custom(format!(
                            "a map of more than {MAX_ENTRIES} entries"
                        )));
                    }
                    entries.insert(key, value);
                }
                Ok(BoundedMap(entries))
            }
        }
        deserializer.deserialize_map(Entries(PhantomData))
    }
}

/// `deserialize_with` for a list of at most [`MAX_ENTRIES`].
pub(crate) fn list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    BoundedList::deserialize(deserializer).map(|list| list.0)
}

/// `deserialize_with` for an optional list of at most [`MAX_ENTRIES`].
pub(crate) fn option_list<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<BoundedList<T>>::deserialize(deserializer).map(|list| list.map(|l| l.0))
}

/// `deserialize_with` for a map of at most [`MAX_ENTRIES`].
pub(crate) fn map<'de, D, K, V>(deserializer: D) -> Result<HashMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Eq + Hash,
    V: Deserialize<'de>,
{
    BoundedMap::deserialize(deserializer).map(|map| map.0)
}

/// `deserialize_with` for an optional map of at most [`MAX_ENTRIES`].
pub(crate) fn option_map<'de, D, K, V>(deserializer: D) -> Result<Option<HashMap<K, V>>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Eq + Hash,
    V: Deserialize<'de>,
{
    Option::<BoundedMap<K, V>>::deserialize(deserializer).map(|map| map.map(|m| m.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(default, deserialize_with = "list")]
        columns: Vec<String>,
        #[serde(default, deserialize_with = "option_map")]
        values: Option<HashMap<String, Option<String>>>,
    }

    #[test]
    fn a_list_or_map_past_the_bound_is_refused_while_it_is_parsed() {
        let within = format!(
            r#"{{"columns":{}}}"#,
            serde_json::to_string(&vec![""; MAX_ENTRIES]).unwrap()
        );
        assert_eq!(
            serde_json::from_str::<Line>(&within).unwrap().columns.len(),
            MAX_ENTRIES
        );
        let past = format!(
            r#"{{"columns":{}}}"#,
            serde_json::to_string(&vec![""; MAX_ENTRIES + 1]).unwrap()
        );
        let err = serde_json::from_str::<Line>(&past)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("more than 4096 entries"), "{err}");
        // A key given again counts again: a map cannot be padded with one key.
        let repeated: String = (0..=MAX_ENTRIES)
            .map(|_| r#""k":null"#)
            .collect::<Vec<_>>()
            .join(",");
        let err = serde_json::from_str::<Line>(&format!(r#"{{"values":{{{repeated}}}}}"#))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("more than 4096 entries"), "{err}");
        let none: Line = serde_json::from_str(r#"{"values":null}"#).unwrap();
        assert!(none.values.is_none() && none.columns.is_empty());
    }

    #[test]
    fn the_heap_size_counts_every_string_not_only_its_bytes() {
        let empty: Vec<String> = vec![String::new(); 100];
        assert_eq!(empty.heap_size(), 100 * 24);
    }
}
