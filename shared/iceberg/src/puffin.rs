//! Iceberg v3 deletion vectors: a Puffin file holding one `deletion-vector-v1` blob.
//!
//! The container is the iceberg crate's `PuffinWriter` (into memory, then one PUT); only the
//! blob is encoded here. It is byte for byte what Delta stores on disk for a deletion vector:
//! a big-endian length, the magic `D1 D3 39 64`, the 64-bit Roaring bitmap in the portable
//! serialization, and a big-endian CRC-32 of magic and bitmap. Inline (`i`) vectors lack
//! length and CRC, so the blob is always rebuilt from the bitmap rather than copied.
//! Spec: <https://iceberg.apache.org/puffin-spec/#deletion-vector-v1-blob-type>.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::puffin::{
    Blob, CREATED_BY_PROPERTY, CompressionCodec, DELETION_VECTOR_V1, PuffinReader, PuffinWriter,
};
use roaring::RoaringTreemap;

use crate::error::{Error, Result};

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
pub async fn deletion_vector_file(
    data_file: &str,
    positions: &RoaringTreemap,
) -> Result<DeletionVectorFile> {
    let blob = Blob::builder()
        .r#type(DELETION_VECTOR_V1.to_string())
        .fields(vec![ROW_POSITION_FIELD_ID])
        // Inherited from the manifest entry, as the spec requires for deletion vectors.
        .snapshot_id(-1)
        .sequence_number(-1)
        .data(deletion_vector_blob(data_file, positions)?)
        .properties(HashMap::from([
            ("referenced-data-file".to_string(), data_file.to_string()),
            ("cardinality".to_string(), positions.len().to_string()),
        ]))
        .build();
    let memory = FileIO::new_with_memory();
    let path = "memory:///deletion-vector.puffin";
    let created_by = HashMap::from([(
        CREATED_BY_PROPERTY.to_string(),
        concat!("lakemirror ", env!("CARGO_PKG_VERSION")).to_string(),
    )]);
    let mut writer = PuffinWriter::new(&memory.new_output(path)?, created_by, false).await?;
    writer.add(blob, CompressionCodec::None).await?;
    writer.close().await?;
    let metadata = PuffinReader::new(memory.new_input(path)?)
        .file_metadata()
        .await?
        .clone();
    let [blob] = metadata.blobs() else {
        return Err(Error::Bug(format!(
            "the Puffin file written for {data_file} holds {} blobs, not one",
            metadata.blobs().len()
        )));
    };
    let too_large = || {
        Error::data_file(
            data_file,
            "its deletion vector is too large for a Puffin file",
        )
    };
    Ok(DeletionVectorFile {
        bytes: memory.new_input(path)?.read().await?.to_vec(),
        content_offset: i64::try_from(blob.offset()).map_err(|_| too_large())?,
        content_size_in_bytes: i64::try_from(blob.length()).map_err(|_| too_large())?,
    })
}

/// length (BE u32) | magic | portable 64-bit Roaring bitmap | CRC-32 (BE) of magic + bitmap.
fn deletion_vector_blob(data_file: &str, positions: &RoaringTreemap) -> Result<Vec<u8>> {
    let mut vector = DV_MAGIC.to_vec();
    positions.serialize_into(&mut vector).map_err(|e| {
        Error::data_file(
            data_file,
            format!("its deletion vector cannot be serialized: {e}"),
        )
    })?;
    let length = u32::try_from(vector.len())
        .map_err(|_| Error::data_file(data_file, "its deletion vector is larger than 4 GiB"))?;
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
    use lakemirror_delta::deletion_vector::parse_stored;

    fn positions(values: &[u64]) -> RoaringTreemap {
        values.iter().copied().collect()
    }

    #[test]
    fn the_blob_is_what_delta_stores_on_disk() {
        let rows = positions(&[0, 3, 4, 1 << 33]);
        let blob = deletion_vector_blob("s3://b/t/f.parquet", &rows).unwrap();
        // Delta's reader accepts it: same framing, same magic, same bitmap, same CRC.
        let size = i64::try_from(blob.len() - 8).unwrap();
        assert_eq!(parse_stored(&blob, size).unwrap(), rows);
    }

    #[tokio::test]
    async fn the_footer_points_at_the_blob() {
        const PUFFIN_MAGIC: &[u8; 4] = b"PFA1";
        let rows = positions(&[1, 2, 7]);
        let file = deletion_vector_file("s3://b/t/part-0.parquet", &rows)
            .await
            .unwrap();
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
