//! Stateful fuzzing of the NFS dispatch in memory: the input is a sequence of MOUNT and
//! NFSv3 calls over three connections (`nfs_server::fuzzing`); a broken invariant (a call
//! running past its bound, a reply to another XID, a call left in progress in the DRC,
//! caches over their bounds) panics with its description.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = nfs_server::fuzzing::run(data) {
        panic!("nfs_state: {e}");
    }
});
