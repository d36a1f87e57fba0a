//! ONC RPC call and reply decoding (`nfs_wire::rpc`) on arbitrary bytes: never panics, and a
//! decoded call header re-encodes to bytes that decode to the same header and arguments.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::rpc::{decode_call, decode_reply, encode_call};

fuzz_target!(|data: &[u8]| {
    let _ = decode_reply(data);
    let Ok((hdr, args)) = decode_call(data) else { return };
    let mut again = Vec::new();
    encode_call(&hdr, &mut again);
    again.extend_from_slice(args);
    let (hdr2, args2) = decode_call(&again).expect("a re-encoded call decodes");
    assert_eq!(hdr, hdr2);
    assert_eq!(args, args2);
});
