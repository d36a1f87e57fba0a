//! Portmapper v2 and rpcbind v3/v4 calls (`nfs_wire::portmap`, what Braid's port 111 answers)
//! and DUMP results (what a client reads) decoded from arbitrary bytes: never panics, and
//! whatever decodes re-encodes to bytes that decode to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::portmap::*;
use nfs_wire::xdr::{XdrReader, XdrWriter};

fn encoded(f: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut XdrWriter::new(&mut out));
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, b)) = data.split_first() else { return };
    // The low two bits pick the decoder; versions 1..=5 and procedures 0..=12 cover the
    // answered ones and their neighbours.
    let (vers, proc_) = (u32::from(sel >> 2) % 5 + 1, u32::from(sel >> 2) / 5 % 13);
    match sel % 4 {
        0 | 1 => {
            let Ok(call) = decode_call(vers, proc_, b) else { return };
            assert_eq!(call.proc_(), proc_);
            let out = encoded(|w| call.encode_args(w));
            assert_eq!(decode_call(vers, proc_, &out), Ok(call));
        }
        2 => {
            let Ok(list) = decode_pmaplist(&mut XdrReader::new(b)) else { return };
            let out = encoded(|w| encode_pmaplist(&list, w));
            assert_eq!(decode_pmaplist(&mut XdrReader::new(&out)), Ok(list));
        }
        _ => {
            let Ok(list) = decode_rpcblist(&mut XdrReader::new(b)) else { return };
            let out = encoded(|w| encode_rpcblist(&list, w));
            // A universal address that parses writes back to one that parses the same (an
            // IPv4-mapped address comes back as IPv4).
            if let Some(sa) = list.first().and_then(|b| parse_uaddr(&b.addr)) {
                let canon = |a: std::net::SocketAddr| (a.ip().to_canonical(), a.port());
                assert_eq!(parse_uaddr(&uaddr(&sa)).map(canon), Some(canon(sa)));
            }
            assert_eq!(decode_rpcblist(&mut XdrReader::new(&out)), Ok(list));
        }
    }
});
