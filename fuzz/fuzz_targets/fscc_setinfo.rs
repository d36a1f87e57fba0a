#![no_main]
//! Feeds (class byte, rest) to smb_fscc::parse_set_info; it must never
//! panic and must only return well-formed names.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&class, rest)) = data.split_first() {
        if let Ok(smb_fscc::SetInfo::Rename { file_name, .. }) = smb_fscc::parse_set_info(class, rest) {
            // A decoded name came from at most rest.len() bytes of UTF-16.
            assert!(file_name.encode_utf16().count() * 2 <= rest.len());
        }
    }
});
