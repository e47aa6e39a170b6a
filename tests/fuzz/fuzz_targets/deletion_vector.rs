//! A stored deletion vector (size, magic, RoaringBitmapArray, checksum). Any input may be
//! refused; none may panic or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lakemirror_delta::deletion_vector::parse_stored(data, data.len() as i64);
    let _ = lakemirror_delta::deletion_vector::parse_bitmap(data);
});
