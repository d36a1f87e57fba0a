//! Every NLM version 4 procedure's arguments (the server side) and the results of the
//! synchronous procedures (the client side, as for GRANTED callbacks) decoded from arbitrary
//! bytes: never panics, and whatever decodes re-encodes to bytes that decode to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::nlm4::*;
use nfs_wire::xdr::{Xdr, XdrReader, XdrWriter};

fn encoded(f: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut XdrWriter::new(&mut out));
    out
}

fn args_round_trip(proc_: Nlm4Proc, bytes: &[u8]) {
    let Ok(args) = Nlm4Args::decode(proc_, &mut XdrReader::new(bytes)) else { return };
    assert_eq!(args.proc_(), proc_);
    let out = encoded(|w| args.encode(w));
    let mut r = XdrReader::new(&out);
    assert_eq!(Nlm4Args::decode(proc_, &mut r), Ok(args));
    assert_eq!(r.remaining(), 0);
}

fn res_round_trip<T: for<'a> Xdr<'a> + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    let Ok(res) = T::decode_xdr(&mut XdrReader::new(bytes)) else { return };
    let out = encoded(|w| res.encode_xdr(w));
    let mut r = XdrReader::new(&out);
    assert_eq!(T::decode_xdr(&mut r), Ok(res));
    assert_eq!(r.remaining(), 0);
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else { return };
    if sel < 128 {
        // Procedures 0 to 23; 16 to 19 are not NLM version 4 procedures.
        let Some(p) = Nlm4Proc::from_u32(u32::from(sel % 24)) else { return };
        args_round_trip(p, bytes);
        return;
    }
    match sel % 3 {
        0 => res_round_trip::<Nlm4TestRes>(bytes),
        1 => res_round_trip::<Nlm4Res>(bytes),
        _ => res_round_trip::<Nlm4ShareRes>(bytes),
    }
});
