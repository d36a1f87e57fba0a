//! Stateful fuzzing of the SMB pipeline in memory: the input is a sequence of client
//! operations over three connections (`smb_server::fuzzing`); a broken invariant (a request
//! left unanswered, state left after every connection closed) panics with its description.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = smb_server::fuzzing::run(data) {
        panic!("smb_state: {e}");
    }
});
