#![no_main]
//! Feeds arbitrary names to smb_fscc::split_stream_path; it must never panic, and what it
//! returns must be pieces of the input that obey the stream-name rules.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else { return };
    if let Ok(p) = smb_fscc::split_stream_path(name) {
        assert!(name.starts_with(p.file));
        assert!(!p.file.contains(':'));
        if let Some(s) = p.stream {
            assert!(!s.is_empty() && !s.contains([':', '\\', '/', '\0']));
            assert!(!p.main_data);
        }
    }
});
