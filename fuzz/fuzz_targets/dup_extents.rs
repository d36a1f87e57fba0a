#![no_main]
//! Feeds arbitrary FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX) inputs to smb_wire's decoders; they
//! must never panic, accept exactly the inputs long enough, and what they decode must
//! encode back to the bytes it came from.
use libfuzzer_sys::fuzz_target;
use smb_wire::msg::dup_extents::{DuplicateExtents, DATA_EX_LEN, DATA_LEN};

fuzz_target!(|data: &[u8]| {
    match DuplicateExtents::decode(data) {
        Ok(d) => {
            assert!(data.len() >= DATA_LEN && d.flags == 0);
            let mut b = Vec::new();
            d.encode(&mut b);
            assert_eq!(b, data[..DATA_LEN]);
        }
        Err(_) => assert!(data.len() < DATA_LEN),
    }
    match DuplicateExtents::decode_ex(data) {
        Ok(d) => {
            assert!(data.len() >= DATA_EX_LEN);
            let mut b = Vec::new();
            d.encode_ex(&mut b);
            // StructureSize and Reserved are not kept: the fields between them round-trip.
            assert_eq!(b[8..52], data[8..52]);
        }
        Err(_) => assert!(data.len() < DATA_EX_LEN),
    }
});
