//! Deletion vectors: the row positions of a data file that Delta has deleted.
//!
//! A descriptor on an `add` says where the bitmap is: in a file beside the table (`u`: a
//! Z85-encoded UUID after an optional random prefix), at an absolute path (`p`), or inline
//! in the log (`i`, Z85). Stored bitmaps sit at `offset` in their file as
//! `size (u32 BE) | data | CRC-32 of data (u32 BE)`; the data is a magic number followed by
//! a 64-bit roaring bitmap in the portable format. Parsing is pure; [`read_positions`]
//! fetches the bytes.

use lakemirror_storage::LogPath;
use std::io::Cursor;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

/// Magic number in front of every serialized deletion vector (little-endian).
pub(crate) const MAGIC: u32 = 1_681_511_377;

/// `add.deletionVector` as the log spells it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionVector {
    pub storage_type: String,
    pub path_or_inline_dv: String,
    #[serde(default)]
    pub offset: Option<i64>,
    pub size_in_bytes: i64,
    pub cardinality: i64,
}

impl crate::bounded::HeapSize for DeletionVector {
    fn heap_size(&self) -> u64 {
        self.storage_type.heap_size() + self.path_or_inline_dv.heap_size()
    }
}

/// The row positions `dv` deletes from the data file at `data_location`, read from the
/// log (inline) or from the table's storage (the only IO of this module).
pub async fn read_positions(
    store: &lakemirror_storage::TableStorage,
    data_location: &str,
    dv: &DeletionVector,
) -> crate::Result<RoaringTreemap> {
    let bad = |e: String| {
        crate::Error::malformed(
            store.root_uri(),
            format!("deletion vector of {data_location}: {e}"),
        )
    };
    match dv.source().map_err(bad)? {
        DvSource::Inline(bytes) => parse_bitmap(&bytes).map_err(bad),
        DvSource::File {
            path,
            relative,
            offset,
        } => {
            let location = match relative {
                true => store
                    .scope()
                    .resolve_decoded(LogPath::DeletionVector, &path),
                false => store.scope().resolve(LogPath::DeletionVector, &path),
            }
            .map_err(bad)?;
            let block = store
                .get_range(&location, offset..offset + dv.stored_len())
                .await?;
            parse_stored(&block, dv.size_in_bytes).map_err(bad)
        }
    }
}

/// Where a deletion vector's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DvSource {
    /// In the log itself: the serialized bitmap.
    Inline(Vec<u8>),
    /// In a file: a path relative to the table root (`relative`) or an absolute URI.
    File {
        path: String,
        relative: bool,
        offset: u64,
    },
}

impl DeletionVector {
    /// Where to read the bitmap from.
    pub fn source(&self) -> Result<DvSource, String> {
        match self.storage_type.as_str() {
            "i" => {
                let size = usize::try_from(self.size_in_bytes)
                    .map_err(|_| format!("negative sizeInBytes {}", self.size_in_bytes))?;
                let mut bytes = z85_decode(&self.path_or_inline_dv)?;
                if bytes.len() < size {
                    return Err(format!(
                        "inline deletion vector holds {} bytes, sizeInBytes says {size}",
                        bytes.len()
                    ));
                }
                bytes.truncate(size);
                Ok(DvSource::Inline(bytes))
            }
            "u" => {
                let encoded = &self.path_or_inline_dv;
                let split = encoded.len().checked_sub(20).ok_or_else(|| {
                    format!("deletion vector id {encoded:?} is shorter than 20 characters")
                })?;
                let (prefix, id) = encoded.split_at(split);
                let uuid = uuid::Uuid::from_slice(&z85_decode(id)?)
                    .map_err(|e| format!("deletion vector id {id:?}: {e}"))?;
                let file = format!("deletion_vector_{}.bin", uuid.hyphenated());
                Ok(DvSource::File {
                    path: if prefix.is_empty() {
                        file
                    } else {
                        format!("{prefix}/{file}")
                    },
                    relative: true,
                    offset: self.file_offset()?,
                })
            }
            "p" => Ok(DvSource::File {
                path: self.path_or_inline_dv.clone(),
                relative: false,
                offset: self.file_offset()?,
            }),
            other => Err(format!("unknown deletion vector storageType {other:?}")),
        }
    }

    fn file_offset(&self) -> Result<u64, String> {
        u64::try_from(self.offset.unwrap_or(1))
            .map_err(|_| format!("negative offset {:?}", self.offset))
    }

    /// Bytes to read from a file at the offset: size, data and checksum.
    pub fn stored_len(&self) -> u64 {
        u64::try_from(self.size_in_bytes).unwrap_or(0) + 8
    }
}

/// Reads a stored deletion vector: the `size | data | crc` block at its offset.
pub fn parse_stored(block: &[u8], expected_size: i64) -> Result<RoaringTreemap, String> {
    let size_field = block
        .get(..4)
        .ok_or("deletion vector block is shorter than its size field")?;
    let size =
        u32::from_be_bytes([size_field[0], size_field[1], size_field[2], size_field[3]]) as usize;
    if i64::try_from(size).ok() != Some(expected_size) {
        return Err(format!(
            "deletion vector size field says {size}, the log says {expected_size}"
        ));
    }
    let data = block
        .get(4..4 + size)
        .ok_or("deletion vector block is shorter than its size")?;
    let crc = block
        .get(4 + size..8 + size)
        .ok_or("deletion vector block has no checksum")?;
    let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let actual = crc32fast::hash(data);
    if stored != actual {
        return Err(format!(
            "deletion vector checksum mismatch ({stored:08x} stored, {actual:08x} computed)"
        ));
    }
    parse_bitmap(data)
}

/// Reads a serialized deletion vector: the magic number, then a portable 64-bit roaring bitmap.
pub fn parse_bitmap(data: &[u8]) -> Result<RoaringTreemap, String> {
    let magic = data
        .get(..4)
        .ok_or("deletion vector shorter than its magic number")?;
    let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
    if magic != MAGIC {
        return Err(format!(
            "not a deletion vector (magic {magic}, expected {MAGIC})"
        ));
    }
    RoaringTreemap::deserialize_from(Cursor::new(&data[4..]))
        .map_err(|e| format!("deletion vector bitmap: {e}"))
}

/// Decodes Z85 (ZeroMQ base-85), four bytes per five characters, with the `z85` crate. Its
/// padded form (a last group starting with `#`) cannot occur in what Delta writes: such a
/// group would exceed 32 bits in plain Z85.
pub fn z85_decode(text: &str) -> Result<Vec<u8>, String> {
    z85::decode(text).map_err(|e| format!("not Z85 text ({} characters): {e:?}", text.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dv(storage_type: &str, path: &str, size: i64) -> DeletionVector {
        DeletionVector {
            storage_type: storage_type.into(),
            path_or_inline_dv: path.into(),
            offset: Some(1),
            size_in_bytes: size,
            cardinality: 1,
        }
    }

    #[test]
    fn z85_round_trips_the_spec_example() {
        // ZeroMQ RFC 32: "HelloWorld" encodes 0x86 0x4F 0xD2 0x6F 0xB5 0x59 0xF7 0x5B.
        assert_eq!(
            z85_decode("HelloWorld").unwrap(),
            vec![0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]
        );
        assert!(z85_decode("abc").is_err());
        assert!(z85_decode("abc d").is_err());
    }

    #[test]
    fn relative_descriptor_names_the_file_beside_the_table() {
        // From dv-partitioned-with-checkpoint (Spark): no prefix.
        let source = dv("u", "0X9F0q2<2yJ-f)Gm2!e0", 34).source().unwrap();
        let DvSource::File {
            path,
            relative,
            offset,
        } = source
        else {
            panic!("{source:?}")
        };
        assert!(relative);
        assert_eq!(offset, 1);
        assert!(
            path.starts_with("deletion_vector_") && path.ends_with(".bin"),
            "{path}"
        );
        let with_prefix = dv("u", "ab0X9F0q2<2yJ-f)Gm2!e0", 34).source().unwrap();
        assert!(
            matches!(with_prefix, DvSource::File { path, .. } if path.starts_with("ab/deletion_vector_"))
        );
    }

    /// A deletion vector as Delta serializes it: the magic number, then the bitmap.
    fn serialized(positions: &[u64]) -> Vec<u8> {
        let bitmap: RoaringTreemap = positions.iter().copied().collect();
        let mut data = MAGIC.to_le_bytes().to_vec();
        bitmap.serialize_into(&mut data).unwrap();
        data
    }

    #[test]
    fn stored_block_is_checked_and_parsed() {
        let data = serialized(&[3, 5_000_000_000]);
        let mut block = (data.len() as u32).to_be_bytes().to_vec();
        block.extend_from_slice(&data);
        block.extend_from_slice(&crc32fast::hash(&data).to_be_bytes());
        let parsed = parse_stored(&block, data.len() as i64).unwrap();
        assert_eq!(parsed.iter().collect::<Vec<_>>(), vec![3, 5_000_000_000]);

        let mut corrupt = block.clone();
        corrupt[6] ^= 0xff;
        assert!(
            parse_stored(&corrupt, data.len() as i64)
                .unwrap_err()
                .contains("checksum")
        );
        assert!(parse_stored(&block, 7).is_err());
    }

    #[test]
    fn inline_descriptor_decodes_and_truncates() {
        let mut data = serialized(&[0, 2]);
        let size = data.len() as i64;
        while !data.len().is_multiple_of(4) {
            data.push(0);
        }
        let text = z85_encode(&data);
        let DvSource::Inline(bytes) = dv("i", &text, size).source().unwrap() else {
            panic!()
        };
        assert_eq!(
            parse_bitmap(&bytes).unwrap().iter().collect::<Vec<_>>(),
            vec![0, 2]
        );
    }

    fn z85_encode(data: &[u8]) -> String {
        z85::encode(data)
    }
}
