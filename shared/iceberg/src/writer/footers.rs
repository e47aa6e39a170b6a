//! What the writer reads of data files: their Parquet footers, for the record counts the log
//! does not state, and, in a mirror that leaves variant columns out (format version 2), for
//! the fields inside those columns, which the name mapping must know.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::NameMapping;
use lakemirror_plan::PlannedFile;
use lakemirror_plan::name_mapping::{FileField, variant_placeholders, with_file_fields};
use lakemirror_storage::TableStorage;
use parquet::basic::{ConvertedType, LogicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::Type as ParquetType;

use crate::error::{Error, Result};

use super::MetadataWriter;

/// Footers read at once (each within the work's memory share).
const FOOTERS_AT_ONCE: usize = 16;

impl MetadataWriter {
    /// Fills in record counts the log did not give by reading Parquet footers.
    pub(super) async fn complete_record_counts(&self, files: &mut [PlannedFile]) -> Result<()> {
        let missing: Vec<usize> = (0..files.len())
            .filter(|i| files[*i].record_count.is_none())
            .collect();
        let counts: Vec<(usize, u64)> = futures::stream::iter(missing)
            .map(|i| {
                let (location, size) = (files[i].location.clone(), files[i].size);
                async move {
                    let footer = footer(&self.data_store, &location, size).await?;
                    let rows = u64::try_from(footer.file_metadata().num_rows())
                        .map_err(|_| Error::data_file(&location, "negative row count in footer"))?;
                    Ok::<_, Error>((i, rows))
                }
            })
            .buffer_unordered(FOOTERS_AT_ONCE)
            .try_collect()
            .await?;
        for (i, n) in counts {
            files[i].record_count = Some(n);
        }
        Ok(())
    }

    /// The name mapping in `properties` grown by the fields `files` hold inside the variant
    /// columns the mirror leaves out (a shredded variant's `typed_value` differs file by
    /// file): pyiceberg maps every field of a file before it projects the columns it reads,
    /// and refuses a file with one the mapping does not know. Reads the footers of `files`
    /// only when the mapping holds such a column.
    pub(super) async fn map_left_out_variants(
        &self,
        properties: &mut HashMap<String, String>,
        files: &[PlannedFile],
    ) -> Result<()> {
        let key = iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING;
        let Some(mut mapping) = properties
            .get(key)
            .and_then(|json| serde_json::from_str::<NameMapping>(json).ok())
        else {
            return Ok(());
        };
        let variants = variant_placeholders(&mapping);
        if variants.is_empty() || files.is_empty() {
            return Ok(());
        }
        let store = &self.data_store;
        let read: Vec<(String, u64)> = files.iter().map(|f| (f.location.clone(), f.size)).collect();
        let mut footers = futures::stream::iter(read)
            .map(|(location, size)| async move { footer(store, &location, size).await })
            .buffer_unordered(FOOTERS_AT_ONCE);
        let mut grew = false;
        while let Some(footer) = footers.try_next().await? {
            let root = footer.file_metadata().schema_descr().root_schema();
            for path in &variants {
                let Some(fields) = fields_within(root, path) else {
                    continue;
                };
                if let Some(grown) = with_file_fields(&mapping, path, &fields) {
                    mapping = grown;
                    grew = true;
                }
            }
        }
        if grew {
            properties.insert(key.to_string(), serde_json::to_string(&mapping)?);
        }
        Ok(())
    }
}

/// The footer of the Parquet file at `location` (`size` bytes, as the log states), checked
/// before it is decoded: two ranged reads, each within the work's memory share.
async fn footer(store: &TableStorage, location: &str, size: u64) -> Result<ParquetMetaData> {
    if size < 12 {
        return Err(Error::data_file(
            location,
            format!("is too small ({size} bytes) to be Parquet"),
        ));
    }
    let tail = store.get_range(location, size - 8..size).await?;
    let range = lakemirror_delta::footer::metadata_range(&tail, size)
        .map_err(|e| Error::data_file(location, format!("{e}; is add.size right?")))?;
    let footer = store.get_range(location, range).await?;
    lakemirror_delta::footer::check_metadata(&footer)
        .map_err(|e| Error::data_file(location, format!("corrupt Parquet footer: {e}")))?;
    Ok(parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&footer)?)
}

/// The fields inside the group at `path` (names, from the file's root), as readers that map
/// a file by name see them; None when the file has no group there.
fn fields_within(root: &ParquetType, path: &[String]) -> Option<Vec<FileField>> {
    let mut node = root;
    for name in path {
        node = node
            .get_fields()
            .iter()
            .find(|f| f.name() == name)
            .map(AsRef::as_ref)
            .filter(|f| f.is_group())?;
    }
    Some(node.get_fields().iter().map(|f| file_field(f)).collect())
}

/// A Parquet field as Arrow reads it: a list's repeated group is its `element`, a map's
/// repeated group its `key` and `value`.
fn file_field(field: &ParquetType) -> FileField {
    let name = field.name().to_string();
    if !field.is_group() {
        return FileField {
            name,
            children: Vec::new(),
        };
    }
    let info = field.get_basic_info();
    let is_list = matches!(info.logical_type_ref(), Some(LogicalType::List))
        || info.converted_type() == ConvertedType::LIST;
    let is_map = matches!(info.logical_type_ref(), Some(LogicalType::Map))
        || matches!(
            info.converted_type(),
            ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE
        );
    let repeated = field.get_fields().first().map(AsRef::as_ref);
    let children = match (is_list, is_map, repeated) {
        (true, _, Some(repeated)) => {
            // Three levels (a repeated group of one element), or two (the repeated field is
            // the element).
            let element = match repeated.is_group() && repeated.get_fields().len() == 1 {
                true => repeated.get_fields()[0].as_ref(),
                false => repeated,
            };
            vec![FileField {
                name: "element".into(),
                children: file_field(element).children,
            }]
        }
        (_, true, Some(repeated)) => repeated
            .get_fields()
            .iter()
            .zip(["key", "value"])
            .map(|(f, name)| FileField {
                name: name.into(),
                children: file_field(f).children,
            })
            .collect(),
        _ => field.get_fields().iter().map(|f| file_field(f)).collect(),
    };
    FileField { name, children }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::schema::parser::parse_message_type;

    #[test]
    fn a_shredded_variant_is_read_as_readers_map_it_lists_by_element() {
        let schema = parse_message_type(
            "message spark_schema {
               optional int32 i;
               optional group v {
                 required binary metadata;
                 optional binary value;
                 optional group typed_value {
                   required group id { optional binary value; optional int64 typed_value; }
                   required group tags {
                     optional binary value;
                     optional group typed_value (LIST) {
                       repeated group list {
                         required group element { optional binary value; optional binary typed_value (STRING); }
                       }
                     }
                   }
                 }
               }
             }",
        )
        .unwrap();
        let fields = fields_within(&schema, &["v".to_string()]).unwrap();
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["metadata", "value", "typed_value"]);
        let tags = &fields[2].children[1];
        assert_eq!(tags.name, "tags");
        let list = &tags.children[1];
        assert_eq!(list.name, "typed_value");
        assert_eq!(list.children.len(), 1);
        assert_eq!(list.children[0].name, "element");
        let element: Vec<&str> = list.children[0]
            .children
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(element, ["value", "typed_value"]);
        assert!(fields_within(&schema, &["i".to_string()]).is_none());
        assert!(fields_within(&schema, &["w".to_string()]).is_none());
    }
}
