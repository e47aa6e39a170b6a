//! Checkpoints decoded: Parquet checkpoints (classic, multi-part, v2 and its sidecars) and
//! JSON v2 checkpoints into action lines, reading only the columns a snapshot needs; a
//! table's definition from a checkpoint's footer and two column chunks (ranged reads).

use bytes::Bytes;

use crate::actions::ActionLine;

/// The checkpoint columns that hold a table's definition.
const DEFINITION_COLUMNS: [&str; 2] = ["metaData", "protocol"];

/// Some byte ranges of a Parquet file, at their offsets: enough to decode the columns whose
/// chunks are present. Reading anywhere else is an error, never a silent read.
#[derive(Debug)]
pub struct SparseFile {
    pub len: u64,
    pub parts: Vec<(u64, Bytes)>,
}

impl SparseFile {
    /// The part holding `start`, from `start` to the part's end.
    fn from(&self, start: u64) -> parquet::errors::Result<Bytes> {
        self.parts
            .iter()
            .find_map(|(at, bytes)| {
                let from = usize::try_from(start.checked_sub(*at)?).ok()?;
                (from < bytes.len()).then(|| bytes.slice(from..))
            })
            .ok_or_else(|| {
                parquet::errors::ParquetError::General(format!(
                    "byte {start} of the checkpoint was not read"
                ))
            })
    }
}

impl parquet::file::reader::Length for SparseFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for SparseFile {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.from(start)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let bytes = self.from(start)?;
        if length > bytes.len() {
            return Err(parquet::errors::ParquetError::General(format!(
                "bytes {start}..+{length} of the checkpoint were not read"
            )));
        }
        Ok(bytes.slice(..length))
    }
}

/// Where the footer of a Parquet file of `size` bytes starts, from the file's last bytes.
pub(crate) fn footer_start(tail: &[u8], size: u64) -> std::result::Result<u64, String> {
    crate::footer::metadata_range(tail, size).map(|range| range.start)
}

/// The byte ranges of the metaData and protocol column chunks. `footer` is the file from
/// `footer_start` to its end.
pub(crate) fn definition_chunk_ranges(
    footer: &[u8],
    footer_start: u64,
) -> std::result::Result<Vec<std::ops::Range<u64>>, String> {
    let metadata_bytes = &footer[..footer.len().saturating_sub(8)];
    crate::footer::check_metadata(metadata_bytes)
        .map_err(|e| format!("corrupt Parquet footer: {e}"))?;
    let metadata = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(metadata_bytes)
        .map_err(|e| e.to_string())?;
    let mut ranges = Vec::new();
    for row_group in metadata.row_groups() {
        for column in row_group.columns() {
            let top = column.column_path().parts().first().map(String::as_str);
            if top.is_some_and(|t| DEFINITION_COLUMNS.contains(&t)) {
                let (start, len) = column.byte_range();
                let end = start
                    .checked_add(len)
                    .filter(|end| *end <= footer_start)
                    .ok_or("a column chunk lies outside the file")?;
                ranges.push(start..end);
            }
        }
    }
    Ok(coalesce(ranges, COALESCE_GAP))
}

/// Ranges closer than this are read in one request: a struct's leaf columns lie side by side.
const COALESCE_GAP: u64 = 4096;

/// `ranges` sorted and merged where they overlap or lie within `gap` bytes of each other.
fn coalesce(mut ranges: Vec<std::ops::Range<u64>>, gap: u64) -> Vec<std::ops::Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<u64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// The metaData and protocol rows of a checkpoint held whole in memory, decoded as ranged
/// reads see it: only the footer and those columns' chunks reach the decoder.
pub fn definition_actions_of(bytes: Bytes) -> std::result::Result<Vec<ActionLine>, String> {
    let size = bytes.len() as u64;
    let start = footer_start(&bytes, size)?;
    // Both fit in memory: `start` and every range end lie within `bytes`.
    let at = |offset: u64| offset as usize;
    let ranges = definition_chunk_ranges(&bytes[at(start)..], start)?;
    let mut parts: Vec<(u64, Bytes)> = ranges
        .iter()
        .map(|r| (r.start, bytes.slice(at(r.start)..at(r.end))))
        .collect();
    parts.push((start, bytes.slice(at(start)..)));
    definition_actions(SparseFile { len: size, parts })
}

/// The metaData and protocol rows of a checkpoint of which `file` holds the footer and
/// those columns' chunks.
pub fn definition_actions(file: SparseFile) -> std::result::Result<Vec<ActionLine>, String> {
    let mut lines = Vec::new();
    crate::checkpoint_columns::for_each_row(file, &DEFINITION_COLUMNS, |line| {
        if line.meta_data.is_some() || line.protocol.is_some() {
            lines.push(line);
        }
    })?;
    Ok(lines)
}

/// Reads a JSON checkpoint (v2): one action per line, as in a commit.
pub fn json_actions(bytes: &[u8]) -> Result<Vec<ActionLine>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
        .collect()
}

/// Reads a Parquet checkpoint (classic, v2 or sidecar) into action lines.
pub fn checkpoint_actions(bytes: Bytes) -> Result<Vec<ActionLine>, String> {
    let mut lines = Vec::new();
    for_each_checkpoint_action(bytes, |line| lines.push(line))?;
    Ok(lines)
}

/// The checkpoint columns a snapshot reads: file actions, the table's definition, a v2
/// checkpoint's sidecars, and domain metadata (row tracking's high-water mark). Tombstones
/// (`remove`) and `txn` are not decoded.
const SNAPSHOT_COLUMNS: [&str; 5] = ["add", "metaData", "protocol", "sidecar", "domainMetadata"];

/// Hands each action of a Parquet checkpoint (classic, v2 or sidecar) to `each` as it is
/// decoded, reading only [`SNAPSHOT_COLUMNS`].
pub fn for_each_checkpoint_action(
    bytes: Bytes,
    each: impl FnMut(ActionLine),
) -> Result<(), String> {
    // A Parquet file starts and ends with PAR1. Checked before the footer is decoded: the
    // parquet crate's footer decoder allocates whatever a corrupt footer declares (found by
    // fuzzing: 34 bytes ending in a 9-byte "footer" asked for gigabytes).
    let magic = b"PAR1";
    if bytes.len() < 12 || !bytes.starts_with(magic) || !bytes.ends_with(magic) {
        return Err("not a Parquet file (PAR1 missing at the start or end)".into());
    }
    crate::footer::check(&bytes).map_err(|e| format!("corrupt Parquet footer: {e}"))?;
    crate::checkpoint_columns::for_each_row(bytes, &SNAPSHOT_COLUMNS, each)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogFileKind, classify};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use serde_json::Value;

    #[test]
    fn bytes_that_are_not_parquet_are_refused_before_the_footer_is_decoded() {
        // Found by tests/fuzz (target checkpoint): decoding this "footer" ran out of memory.
        let oom = Bytes::from_static(b"\x7b\x2b\x22\x34\xef\xda\xf6\x29\x5c\x22\x49\x49\x49\x33\x22\x29\x5c\x2b\xf6\xca\xf6\xf6\x0d\x00\xff\xbf\x09\x00\x00\x00\x50\x41\x52\x31");
        let err = checkpoint_actions(oom).unwrap_err();
        assert!(err.contains("not a Parquet file"), "{err}");
        assert!(checkpoint_actions(Bytes::from_static(b"PAR1PAR1")).is_err());
        assert!(checkpoint_actions(Bytes::new()).is_err());
    }

    #[test]
    fn a_parquet_footer_declaring_more_than_it_holds_is_refused_before_decoding() {
        // Found by tests/fuzz (target checkpoint): PAR1 at both ends, and a key-value list
        // the parquet crate reserved ~4.6 GB for, aborting the process.
        for oom in [
            &include_bytes!("testdata/oom-key-value-list.parquet")[..],
            &include_bytes!("testdata/oom-key-value-list-typed-bool.parquet")[..],
        ] {
            let err = checkpoint_actions(Bytes::from_static(oom)).unwrap_err();
            assert!(err.contains("corrupt Parquet footer"), "{err}");
        }
    }

    /// A checkpoint as Spark lays it out: one row per action, one struct column per kind;
    /// the protocol and metaData rows first, then `adds` add rows.
    fn checkpoint(adds: usize) -> Vec<u8> {
        use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray, StructArray};
        use arrow_schema::{DataType, Field};
        use std::sync::Arc;
        let rows = adds + 2;
        let strings = |f: &dyn Fn(usize) -> Option<String>| -> ArrayRef {
            Arc::new(StringArray::from((0..rows).map(f).collect::<Vec<_>>()))
        };
        let nulls_but = |row: usize| {
            arrow_buffer::NullBuffer::from((0..rows).map(|r| r == row).collect::<Vec<_>>())
        };
        let protocol = StructArray::new(
            vec![Field::new("minReaderVersion", DataType::Int32, true)].into(),
            vec![Arc::new(Int32Array::from(
                (0..rows).map(|r| (r == 0).then_some(1)).collect::<Vec<_>>(),
            )) as ArrayRef],
            Some(nulls_but(0)),
        );
        let schema = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}"#;
        let meta_data = StructArray::new(
            vec![Field::new("schemaString", DataType::Utf8, true)].into(),
            vec![strings(&|r| (r == 1).then(|| schema.to_string()))],
            Some(nulls_but(1)),
        );
        let add = StructArray::new(
            vec![Field::new("path", DataType::Utf8, true)].into(),
            vec![strings(&|r| {
                (r >= 2).then(|| format!("part-{r:05}-a-long-name-as-spark-writes.parquet"))
            })],
            Some(arrow_buffer::NullBuffer::from(
                (0..rows).map(|r| r >= 2).collect::<Vec<_>>(),
            )),
        );
        let batch = RecordBatch::try_from_iter([
            ("protocol", Arc::new(protocol) as ArrayRef),
            ("metaData", Arc::new(meta_data) as ArrayRef),
            ("add", Arc::new(add) as ArrayRef),
        ])
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    #[test]
    fn only_the_columns_a_snapshot_needs_are_decoded() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, StructArray};
        use std::sync::Arc;
        let add = StructArray::new(
            vec![
                arrow_schema::Field::new("path", arrow_schema::DataType::Utf8, true),
                arrow_schema::Field::new("size", arrow_schema::DataType::Int64, true),
            ]
            .into(),
            vec![
                Arc::new(StringArray::from(vec![Some("a.parquet"), None])) as ArrayRef,
                Arc::new(Int64Array::from(vec![Some(10), None])),
            ],
            Some(arrow_buffer::NullBuffer::from(vec![true, false])),
        );
        // Not even an action: decoding this column would fail the whole checkpoint.
        let remove = StringArray::from(vec![None, Some("a tombstone lakemirror never reads")]);
        let batch = RecordBatch::try_from_iter([
            ("add", Arc::new(add) as ArrayRef),
            ("remove", Arc::new(remove) as ArrayRef),
        ])
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let mut paths = Vec::new();
        for_each_checkpoint_action(Bytes::from(bytes), |line| {
            paths.extend(line.add.map(|a| a.path));
        })
        .unwrap();
        assert_eq!(paths, ["a.parquet"]);
    }

    #[test]
    fn a_checkpoints_definition_is_read_from_its_footer_and_two_column_chunks() {
        let bytes = Bytes::from(checkpoint(20_000));
        let size = bytes.len() as u64;
        let start = footer_start(&bytes, size).unwrap();
        let ranges = definition_chunk_ranges(&bytes[start as usize..], start).unwrap();
        let read = size - start + ranges.iter().map(|r| r.end - r.start).sum::<u64>();
        assert!(read * 20 < size, "read {read} of {size} bytes");

        let lines = definition_actions_of(bytes.clone()).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].protocol.as_ref().unwrap().min_reader_version, 1);
        assert!(
            lines[1]
                .meta_data
                .as_ref()
                .unwrap()
                .schema_string
                .contains("\"id\"")
        );
        let whole = SerializedFileReader::new(bytes).unwrap();
        assert_eq!(whole.metadata().file_metadata().num_rows(), 20_002);
    }

    #[test]
    fn stats_kept_only_as_a_struct_are_read_from_the_checkpoint() {
        use arrow_array::{
            ArrayRef, Date32Array, Int64Array, RecordBatch, StringArray, StructArray,
            TimestampMicrosecondArray,
        };
        use arrow_schema::{DataType, Field, Fields, TimeUnit};
        use std::sync::Arc;
        let columns = |id: i64, day: i32, at: i64| {
            let fields: Fields = vec![
                Field::new("id", DataType::Int64, true),
                Field::new("day", DataType::Date32, true),
                Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            ]
            .into();
            StructArray::new(
                fields,
                vec![
                    Arc::new(Int64Array::from(vec![id])) as ArrayRef,
                    Arc::new(Date32Array::from(vec![day])),
                    Arc::new(TimestampMicrosecondArray::from(vec![at])),
                ],
                None,
            )
        };
        let min = columns(1, 19_723, 0);
        let max = columns(9, 19_724, 1);
        let parsed = StructArray::try_from(vec![
            (
                "numRecords",
                Arc::new(Int64Array::from(vec![3])) as ArrayRef,
            ),
            ("minValues", Arc::new(min) as ArrayRef),
            ("maxValues", Arc::new(max) as ArrayRef),
        ])
        .unwrap();
        let add = StructArray::try_from(vec![
            (
                "path",
                Arc::new(StringArray::from(vec!["part-0.parquet"])) as ArrayRef,
            ),
            ("size", Arc::new(Int64Array::from(vec![10]))),
            ("stats", Arc::new(StringArray::from(vec![None::<&str>]))),
            ("stats_parsed", Arc::new(parsed)),
        ])
        .unwrap();
        let batch = RecordBatch::try_from_iter([("add", Arc::new(add) as ArrayRef)]).unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();

        let lines = checkpoint_actions(Bytes::from(bytes)).unwrap();
        let stats: Value =
            serde_json::from_str(lines[0].add.as_ref().unwrap().stats.as_deref().unwrap()).unwrap();
        assert_eq!(
            stats,
            serde_json::json!({
                "numRecords": 3,
                "minValues": {"id": 1, "day": "2024-01-01"},
                "maxValues": {"id": 9, "day": "2024-01-02"},
            })
        );
    }

    #[test]
    fn neighbouring_ranges_are_read_in_one_request() {
        assert_eq!(
            coalesce(vec![30..40, 0..10, 12..20, 5..8], 4),
            vec![0..20, 30..40]
        );
        assert_eq!(coalesce(vec![0..10, 15..20], 4), vec![0..10, 15..20]);
        assert_eq!(coalesce(Vec::new(), 4), Vec::<std::ops::Range<u64>>::new());
    }

    #[test]
    fn a_sparse_file_refuses_reads_outside_what_was_fetched() {
        use parquet::file::reader::ChunkReader;
        let file = SparseFile {
            len: 100,
            parts: vec![(10, Bytes::from_static(b"0123456789"))],
        };
        assert_eq!(file.get_bytes(12, 3).unwrap().as_ref(), b"234");
        assert!(file.get_bytes(12, 9).is_err());
        assert!(file.get_bytes(5, 1).is_err());
        assert!(file.get_read(20).is_err());
    }

    #[test]
    fn v2_json_checkpoint_lines_name_their_sidecars() {
        let text = br#"{"checkpointMetadata":{"version":2}}
{"sidecar":{"path":"00000000000000000002.checkpoint.0000000001.0000000002.055454d8.parquet","sizeInBytes":9268,"modificationTime":1}}
{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["v2Checkpoint"]}}
"#;
        let lines = json_actions(text).unwrap();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1]
                .sidecar
                .as_ref()
                .unwrap()
                .path
                .ends_with("055454d8.parquet")
        );
        assert!(lines[2].protocol.is_some());
        assert_eq!(
            classify("00000000000000000002.checkpoint.e8fa2696-9728-4e9c-b285-634743fdd4fb.json"),
            LogFileKind::V2Checkpoint(2)
        );
    }
}
