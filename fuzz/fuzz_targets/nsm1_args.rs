//! Every NSM version 1 procedure's arguments, its results and the status callback decoded
//! from arbitrary bytes: never panics, and whatever decodes re-encodes to bytes that decode
//! to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::nsm1::*;
use nfs_wire::xdr::{Xdr, XdrReader, XdrWriter};

fn encoded(f: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut XdrWriter::new(&mut out));
    out
}

fn round_trip<T: for<'a> Xdr<'a> + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    let Ok(v) = T::decode_xdr(&mut XdrReader::new(bytes)) else { return };
    let out = encoded(|w| v.encode_xdr(w));
    let mut r = XdrReader::new(&out);
    assert_eq!(T::decode_xdr(&mut r), Ok(v));
    assert_eq!(r.remaining(), 0);
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else { return };
    if sel < 128 {
        let Some(p) = SmProc::from_u32(u32::from(sel % 7)) else { return };
        let Ok(args) = SmArgs::decode(p, &mut XdrReader::new(bytes)) else { return };
        assert_eq!(args.proc_(), p);
        let out = encoded(|w| args.encode(w));
        let mut r = XdrReader::new(&out);
        assert_eq!(SmArgs::decode(p, &mut r), Ok(args));
        assert_eq!(r.remaining(), 0);
        return;
    }
    match sel % 3 {
        0 => round_trip::<Status>(bytes),
        1 => round_trip::<SmStatRes>(bytes),
        _ => round_trip::<SmStat>(bytes),
    }
});
