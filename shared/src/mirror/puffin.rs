//! Iceberg v3 deletion vectors: a Puffin file holding one `deletion-vector-v1` blob.
//!
//! The blob is byte for byte what Delta stores on disk for a deletion vector: a big-endian
//! length, the magic `D1 D3 39 64`, the 64-bit Roaring bitmap in the portable serialization,
//! and a big-endian CRC-32 of magic and bitmap. Inline (`i`) vectors lack length and CRC, so
//! the blob is always rebuilt from the bitmap rather than copied.
//! Spec: <https://iceberg.apache.org/puffin-spec/#deletion-vector-v1-blob-type>.

use roaring::RoaringTreemap;
use serde_json::json;

use crate::error::{Error, Result};

const PUFFIN_MAGIC: &[u8; 4] = b"PFA1";
const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// Iceberg's reserved field ID of the row position (`_pos`): what a deletion vector indexes.
const ROW_POSITION_FIELD_ID: i32 = 2_147_483_645;

/// A Puffin file with one deletion vector, and where its blob lies inside it.
#[derive(Debug, Clone)]
pub struct DeletionVectorFile {
    pub bytes: Vec<u8>,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
}

/// Serializes the deletion vector of `data_file` (the data file's full location).
pub fn deletion_vector_file(
    data_file: &str,
    positions: &RoaringTreemap,
) -> Result<DeletionVectorFile> {
    let blob = deletion_vector_blob(positions)?;
    let offset = PUFFIN_MAGIC.len();
    let footer = json!({
        "blobs": [{
            "type": "deletion-vector-v1",
            "fields": [ROW_POSITION_FIELD_ID],
            // Inherited from the manifest entry, as the spec requires for deletion vectors.
            "snapshot-id": -1,
            "sequence-number": -1,
            "offset": offset,
            "length": blob.len(),
            "properties": {
                "referenced-data-file": data_file,
                "cardinality": positions.len().to_string(),
            },
        }],
        "properties": { "created-by": concat!("lakemirror ", env!("CARGO_PKG_VERSION")) },
    });
    let footer = serde_json::to_vec(&footer)?;
    let footer_len = u32::try_from(footer.len())
        .map_err(|_| Error::InvalidInput(format!("Puffin footer for {data_file} too large")))?;

    let mut bytes = Vec::with_capacity(offset + blob.len() + footer.len() + 16);
    bytes.extend_from_slice(PUFFIN_MAGIC);
    bytes.extend_from_slice(&blob);
    // Footer: magic, payload (uncompressed JSON), payload size (LE), flags, magic.
    bytes.extend_from_slice(PUFFIN_MAGIC);
    bytes.extend_from_slice(&footer);
    bytes.extend_from_slice(&footer_len.to_le_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    bytes.extend_from_slice(PUFFIN_MAGIC);
    Ok(DeletionVectorFile {
        bytes,
        content_offset: offset as i64,
        content_size_in_bytes: blob.len() as i64,
    })
}

/// length (BE u32) | magic | portable 64-bit Roaring bitmap | CRC-32 (BE) of magic + bitmap.
fn deletion_vector_blob(positions: &RoaringTreemap) -> Result<Vec<u8>> {
    let mut vector = DV_MAGIC.to_vec();
    positions
        .serialize_into(&mut vector)
        .map_err(|e| Error::InvalidInput(format!("serializing a deletion vector: {e}")))?;
    let length = u32::try_from(vector.len())
        .map_err(|_| Error::InvalidInput("deletion vector larger than 4 GiB".into()))?;
    let crc = crc32fast::hash(&vector);
    let mut blob = Vec::with_capacity(vector.len() + 8);
    blob.extend_from_slice(&length.to_be_bytes());
    blob.extend_from_slice(&vector);
    blob.extend_from_slice(&crc.to_be_bytes());
    Ok(blob)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::deletion_vector::parse_stored;

    fn positions(values: &[u64]) -> RoaringTreemap {
        values.iter().copied().collect()
    }

    #[test]
    fn the_blob_is_what_delta_stores_on_disk() {
        let rows = positions(&[0, 3, 4, 1 << 33]);
        let blob = deletion_vector_blob(&rows).unwrap();
        // Delta's reader accepts it: same framing, same magic, same bitmap, same CRC.
        let size = i64::try_from(blob.len() - 8).unwrap();
        assert_eq!(parse_stored(&blob, size).unwrap(), rows);
    }

    #[test]
    fn the_footer_points_at_the_blob() {
        let rows = positions(&[1, 2, 7]);
        let file = deletion_vector_file("s3://b/t/part-0.parquet", &rows).unwrap();
        let bytes = &file.bytes;
        assert_eq!(&bytes[..4], PUFFIN_MAGIC);
        assert_eq!(&bytes[bytes.len() - 4..], PUFFIN_MAGIC);
        assert_eq!(&bytes[bytes.len() - 8..bytes.len() - 4], &[0, 0, 0, 0]);
        let footer_len =
            u32::from_le_bytes(bytes[bytes.len() - 12..bytes.len() - 8].try_into().unwrap())
                as usize;
        let footer_start = bytes.len() - 12 - footer_len;
        assert_eq!(&bytes[footer_start - 4..footer_start], PUFFIN_MAGIC);
        let footer: serde_json::Value =
            serde_json::from_slice(&bytes[footer_start..bytes.len() - 12]).unwrap();
        let blob = &footer["blobs"][0];
        assert_eq!(blob["type"], "deletion-vector-v1");
        assert_eq!(
            blob["properties"]["referenced-data-file"],
            "s3://b/t/part-0.parquet"
        );
        assert_eq!(blob["properties"]["cardinality"], "3");
        assert_eq!(blob["offset"], file.content_offset);
        assert_eq!(blob["length"], file.content_size_in_bytes);
        let start = file.content_offset as usize;
        let end = start + file.content_size_in_bytes as usize;
        let size = i64::try_from(end - start - 8).unwrap();
        assert_eq!(parse_stored(&bytes[start..end], size).unwrap(), rows);
    }
}
