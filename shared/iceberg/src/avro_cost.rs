//! What reading one of the mirror's own Avro files (a manifest, a manifest list) holds in
//! memory, known before it is decoded: lakemirror writes them uncompressed, so their blocks
//! are their bytes, and each object becomes a value of a few fields (about
//! [`BYTES_PER_OBJECT`]). A file in the mirror's folder that is compressed, or whose blocks
//! claim more objects than their bytes hold, was not written by lakemirror: it is refused
//! before the Avro reader decompresses or decodes anything of it.

use crate::avro_header::{MAGIC, Reader};

/// Copies of a file's bytes its reading makes (the bytes, the iceberg reader's staging copy,
/// the Avro values' strings, the typed entries'): the room taken before it is read, which
/// grows by [`BYTES_PER_OBJECT`] for each object once they are counted.
pub(crate) const COPIES: u64 = 4;
/// Memory one decoded object (a manifest entry, a manifest list's entry) takes beside its
/// bytes: a named value per field, and the typed entry.
const BYTES_PER_OBJECT: u64 = 2048;
/// Bytes an Avro object takes at the least (one field of one byte).
const SMALLEST_OBJECT: i64 = 1;

/// What decoding the Avro container `file` takes in memory: its bytes and its objects'.
pub(crate) fn decoded_cost(file: &[u8]) -> Result<u64, String> {
    if !file.starts_with(MAGIC) {
        return Err("it is not an Avro file".into());
    }
    let mut reader = Reader {
        bytes: file,
        pos: MAGIC.len(),
    };
    loop {
        let count = reader.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            reader.long()?;
        }
        for _ in 0..count.unsigned_abs() {
            let key = reader.bytes()?.to_vec();
            let value = reader.bytes()?;
            if key == b"avro.codec" && value != b"null" {
                return Err(format!(
                    "it is compressed ({}), and lakemirror writes its Avro files uncompressed",
                    String::from_utf8_lossy(value)
                ));
            }
        }
    }
    reader.pos += 16; // the sync marker
    let mut objects: u64 = 0;
    while reader.pos < file.len() {
        let count = reader.long()?;
        let size = reader.long()?;
        if count < 0 || size < 0 || count.saturating_mul(SMALLEST_OBJECT) > size {
            return Err(format!("a block claims {count} objects in {size} bytes"));
        }
        let skipped = usize::try_from(size)
            .ok()
            .and_then(|size| reader.pos.checked_add(size))
            .and_then(|end| end.checked_add(16))
            .filter(|end| *end <= file.len())
            .ok_or("a block runs past the file's end")?;
        reader.pos = skipped;
        objects = objects.saturating_add(count.unsigned_abs());
    }
    Ok((file.len() as u64)
        .saturating_mul(COPIES)
        .saturating_add(objects.saturating_mul(BYTES_PER_OBJECT)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(out: &mut Vec<u8>, value: i64) {
        let mut n = ((value << 1) ^ (value >> 63)) as u64;
        while n >= 0x80 {
            out.push((n as u8 & 0x7F) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    fn container(codec: &[u8], blocks: &[(i64, usize)]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        long(&mut out, 1);
        for bytes in [&b"avro.codec"[..], codec] {
            long(&mut out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
        long(&mut out, 0);
        out.extend_from_slice(&[7; 16]);
        for (count, size) in blocks {
            long(&mut out, *count);
            long(&mut out, *size as i64);
            out.extend(std::iter::repeat_n(1u8, *size));
            out.extend_from_slice(&[7; 16]);
        }
        out
    }

    #[test]
    fn an_uncompressed_file_costs_its_bytes_and_its_objects() {
        let file = container(b"null", &[(10, 3000), (5, 1500)]);
        assert_eq!(
            decoded_cost(&file).unwrap(),
            4 * file.len() as u64 + 15 * 2048
        );
    }

    #[test]
    fn a_compressed_or_overclaiming_file_is_not_one_lakemirror_wrote() {
        let deflate = decoded_cost(&container(b"deflate", &[(1, 10)])).unwrap_err();
        assert!(deflate.contains("compressed (deflate)"), "{deflate}");
        let claims = decoded_cost(&container(b"null", &[(1_000_000, 10)])).unwrap_err();
        assert!(claims.contains("claims"), "{claims}");
        let mut cut = container(b"null", &[(1, 100)]);
        cut.truncate(cut.len() - 20);
        assert!(decoded_cost(&cut).is_err());
        assert!(decoded_cost(b"{}").is_err());
    }
}
