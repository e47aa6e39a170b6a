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
//!
//! Before either decodes, one pass over the Thrift as the wire types say bounds the work: both
//! versions skip a list of booleans without consuming a byte per element, so a 304-byte file
//! (fuzzing again) kept them looping 2^31 times, over a second of CPU per list. The pass
//! refuses any list, map or string that claims more elements or bytes than are left. It reads
//! by wire type and the decoders by field id, so a footer crafted to differ in the two
//! readings can still cost parquet's skipping that second per list; it can no longer cost
//! memory.

use parquet60::file::metadata::ParquetMetaDataReader;

/// Nesting deeper than this is not a Parquet footer (the real one nests a few levels).
const MAX_DEPTH: usize = 64;

/// Checks the footer of a whole Parquet file (`PAR1` … footer, length, `PAR1`).
pub fn check(file: &[u8]) -> Result<(), String> {
    let range = metadata_range(file, file.len() as u64)?;
    // Within `file`: metadata_range keeps it between the opening magic and the length.
    check_metadata(&file[range.start as usize..range.end as usize])
}

/// Where the footer's metadata lies in a Parquet file of `size` bytes, from its last bytes
/// (`tail`, at least the final 8): refused unless `PAR1` closes the file and the declared
/// length fits after the opening `PAR1`.
pub fn metadata_range(tail: &[u8], size: u64) -> Result<std::ops::Range<u64>, String> {
    if tail.len() < 8 || !tail.ends_with(b"PAR1") {
        return Err("not a Parquet file (PAR1 missing at the end)".into());
    }
    let mut len = [0u8; 4];
    len.copy_from_slice(&tail[tail.len() - 8..tail.len() - 4]);
    let len = u64::from(u32::from_le_bytes(len));
    size.checked_sub(8 + len)
        .filter(|start| *start >= 4)
        .map(|start| start..size - 8)
        .ok_or_else(|| format!("the footer claims {len} bytes but the file has {size}"))
}

/// Checks the footer's metadata bytes alone (what precedes the length and the closing `PAR1`).
pub fn check_metadata(footer: &[u8]) -> Result<(), String> {
    Walk {
        bytes: footer,
        at: 0,
    }
    .skip_struct(0)?;
    ParquetMetaDataReader::decode_metadata(footer)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Compact-protocol element types.
mod kind {
    pub(super) const TRUE: u8 = 1;
    pub(super) const FALSE: u8 = 2;
    pub(super) const BYTE: u8 = 3;
    pub(super) const I16: u8 = 4;
    pub(super) const I32: u8 = 5;
    pub(super) const I64: u8 = 6;
    pub(super) const DOUBLE: u8 = 7;
    pub(super) const BINARY: u8 = 8;
    pub(super) const LIST: u8 = 9;
    pub(super) const SET: u8 = 10;
    pub(super) const MAP: u8 = 11;
    pub(super) const STRUCT: u8 = 12;
    pub(super) const UUID: u8 = 13;
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or("the footer ends in the middle of a value")?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<(), String> {
        if n > self.left() {
            return Err(format!(
                "the footer declares {n} bytes where {} are left",
                self.left()
            ));
        }
        self.at += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("the footer has a varint longer than 10 bytes".into())
    }

    /// A declared element count, refused when the bytes left could not hold that many
    /// elements of at least `min_size` bytes each.
    fn count(&mut self, declared: u64, min_size: usize) -> Result<usize, String> {
        let fits = usize::try_from(declared)
            .ok()
            .filter(|n| n.checked_mul(min_size).is_some_and(|b| b <= self.left()));
        fits.ok_or_else(|| {
            format!(
                "the footer declares {declared} elements where {} bytes are left",
                self.left()
            )
        })
    }

    fn skip_struct(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("the footer nests deeper than {MAX_DEPTH} levels"));
        }
        loop {
            let header = self.byte()?;
            let element = header & 0x0f;
            if element == 0 {
                return Ok(());
            }
            if header >> 4 == 0 {
                self.varint()?; // the field id, when not a delta
            }
            match element {
                kind::TRUE | kind::FALSE => {}
                other => self.skip(other, depth + 1)?,
            }
        }
    }

    fn skip(&mut self, element: u8, depth: usize) -> Result<(), String> {
        match element {
            kind::TRUE | kind::FALSE | kind::BYTE => self.take(1),
            kind::I16 | kind::I32 | kind::I64 => self.varint().map(|_| ()),
            kind::DOUBLE => self.take(8),
            kind::UUID => self.take(16),
            kind::BINARY => {
                let len = self.varint()?;
                let len = self.count(len, 1)?;
                self.take(len)
            }
            kind::LIST | kind::SET => {
                let header = self.byte()?;
                let mut n = u64::from(header >> 4);
                if n == 15 {
                    n = self.varint()?;
                }
                let n = self.count(n, 1)?;
                for _ in 0..n {
                    self.skip(header & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            kind::MAP => {
                let n = self.varint()?;
                let n = self.count(n, 2)?;
                if n > 0 {
                    let types = self.byte()?;
                    for _ in 0..n {
                        self.skip(types >> 4, depth + 1)?;
                        self.skip(types & 0x0f, depth + 1)?;
                    }
                }
                Ok(())
            }
            kind::STRUCT => self.skip_struct(depth),
            other => Err(format!("the footer has an unknown Thrift type {other}")),
        }
    }
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
        assert!(err.contains("declares 16777215 elements"), "{err}");
        // A footer length past the start of the file.
        let mut f = file(&[0x00]);
        let n = f.len();
        f[n - 8..n - 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(check(&f).unwrap_err().contains("claims 1000 bytes"));
    }

    #[test]
    fn strings_maps_depth_and_boolean_lists_are_bounded_by_the_bytes_left() {
        // A BINARY field claiming 1000 bytes.
        assert!(
            check(&file(&[0x18, 0xe8, 0x07, 0x00]))
                .unwrap_err()
                .contains("declares 1000 elements")
        );
        // A MAP of 2^20 entries.
        assert!(
            check(&file(&[0x1b, 0x80, 0x80, 0x40, 0x55, 0x00]))
                .unwrap_err()
                .contains("declares")
        );
        // Structs nested past the limit: field 1 of type STRUCT, repeated.
        assert!(check(&file(&[0x1c; 200])).unwrap_err().contains("deeper"));
        // Field 10 (unknown, so skipped): a list of 2^24 - 1 booleans in no bytes.
        let bools = [
            0x1a, 0x00, 0x1a, 0x00, 0x19, 0xf1, 0xff, 0xff, 0xff, 0x07, 0x00,
        ];
        assert!(
            check(&file(&bools[4..]))
                .unwrap_err()
                .contains("declares 16777215 elements")
        );
        // An empty struct is fine.
        assert!(check(&file(&[0x00])).unwrap_err().contains("missing"));
    }

    #[test]
    fn the_fuzzers_slow_checkpoint_is_refused_before_parquet_loops_over_it() {
        // Found by tests/fuzz (target checkpoint): 304 bytes that kept parquet's Thrift
        // skipping busy for 1.2 s (7 s under the sanitizer) on a list of booleans.
        let err = check(include_bytes!("testdata/slow-boolean-list.parquet")).unwrap_err();
        assert!(err.contains("declares 123 elements"), "{err}");
    }

    #[test]
    fn the_fuzzers_out_of_memory_checkpoints_are_refused() {
        // Found by tests/fuzz (target checkpoint): parquet 58 reserved ~4.6 GB and ~8.3 GB for
        // the key-value lists these files' footers declare. The second declares field 5 as a
        // boolean on the wire; parquet 58 reads it as the list it expects, and so the pass by
        // wire type lets it through: parquet 60's decoding refuses it.
        let err = check(include_bytes!("testdata/oom-key-value-list.parquet")).unwrap_err();
        assert!(err.contains("declares 12333235320 elements"), "{err}");
        let typed_bool = include_bytes!("testdata/oom-key-value-list-typed-bool.parquet");
        let err = check(typed_bool).unwrap_err();
        assert!(err.contains("Expected list element type"), "{err}");
    }
}
