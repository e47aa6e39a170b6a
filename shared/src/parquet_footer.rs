//! A Parquet footer vetted before parquet 58 decodes it: checkpoints, and the data files whose
//! footers the mirror and the reverse sync read, are input nobody vouches for.
//!
//! The footer is a Thrift `FileMetaData`. parquet 58 (the version iceberg 0.10 pins) reserves
//! room for as many elements as a list header declares before it reads one, and reads a known
//! field as the type it expects whatever the wire says. A corrupt or hostile file of a few
//! hundred bytes can so ask for gigabytes, and a failed allocation aborts the process: found
//! by fuzzing, twice (an 813-byte file asking for 4.6 GB, a 123-byte one for 8 GB). parquet 60
//! decodes the same metadata but refuses a list longer than the bytes left
//! (apache/arrow-rs#10979), so its verdict comes first.

use parquet60::file::metadata::ParquetMetaDataReader;

/// Checks the footer of a whole Parquet file (`PAR1` … footer, length, `PAR1`).
pub fn check(file: &[u8]) -> Result<(), String> {
    let Some(len_at) = file.len().checked_sub(8) else {
        return Err("too short for a Parquet footer".into());
    };
    let mut len = [0u8; 4];
    len.copy_from_slice(&file[len_at..len_at + 4]);
    let len = u32::from_le_bytes(len) as usize;
    let Some(start) = len_at.checked_sub(len).filter(|s| *s >= 4) else {
        return Err(format!(
            "the footer claims {len} bytes but the file has {}",
            file.len()
        ));
    };
    check_metadata(&file[start..len_at])
}

/// Checks the footer's metadata bytes alone (what precedes the length and the closing `PAR1`).
pub fn check_metadata(footer: &[u8]) -> Result<(), String> {
    ParquetMetaDataReader::decode_metadata(footer)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PAR1`, a footer, its length, `PAR1`.
    fn file(footer: &[u8]) -> Vec<u8> {
        let mut f = b"PAR1".to_vec();
        f.extend_from_slice(footer);
        f.extend_from_slice(&u32::try_from(footer.len()).unwrap().to_le_bytes());
        f.extend_from_slice(b"PAR1");
        f
    }

    #[test]
    fn a_footer_written_by_parquet_passes() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
        use std::sync::Arc;
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "name",
                Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])) as ArrayRef,
            ),
        ])
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
                "k".into(),
                "v".to_string(),
            )]))
            .set_max_row_group_row_count(Some(2))
            .build();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        check(&bytes).unwrap();
    }

    #[test]
    fn a_list_longer_than_the_footer_is_refused() {
        // Field 2 (schema) of type LIST: 15 << 4 | STRUCT, then the count as a varint.
        let footer = [0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0x07, 0x00];
        let err = check(&file(&footer)).unwrap_err();
        assert!(err.contains("exceeds remaining input"), "{err}");
        // A footer length past the start of the file.
        let mut f = file(&[0x00]);
        let n = f.len();
        f[n - 8..n - 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(check(&f).unwrap_err().contains("claims 1000 bytes"));
    }

    #[test]
    fn the_fuzzers_out_of_memory_checkpoints_are_refused() {
        // Found by tests/fuzz (target checkpoint): parquet 58 reserved ~4.6 GB and ~8.3 GB for
        // the key-value lists these files' footers declare. The second declares field 5 as a
        // boolean on the wire; parquet 58 reads it as the list it expects.
        for bytes in [
            &include_bytes!("testdata/oom-key-value-list.parquet")[..],
            &include_bytes!("testdata/oom-key-value-list-typed-bool.parquet")[..],
        ] {
            assert!(check(bytes).is_err());
        }
    }
}
