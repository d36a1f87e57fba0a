//! Every NFSv3 procedure's arguments (the server side) and results (the client side) decoded
//! from arbitrary bytes: never panics, and whatever decodes re-encodes to bytes that decode
//! to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::nfs3::*;
use nfs_wire::xdr::{Xdr, XdrReader, XdrWriter};

fn args_round_trip(proc_: Proc3, bytes: &[u8]) {
    let Ok(args) = Args3::decode(proc_, &mut XdrReader::new(bytes)) else { return };
    let mut out = Vec::new();
    args.encode(&mut XdrWriter::new(&mut out));
    let again = Args3::decode(proc_, &mut XdrReader::new(&out)).expect("re-encoded args decode");
    assert_eq!(args, again);
}

/// A macro, not a generic function: the decoded value and its re-decoding borrow from
/// different buffers, so each needs its own lifetime.
macro_rules! res_round_trip {
    ($t:ty, $bytes:expr) => {{
        if let Ok(res) = <$t>::decode_xdr(&mut XdrReader::new($bytes)) {
            let mut out = Vec::new();
            res.encode_xdr(&mut XdrWriter::new(&mut out));
            let mut r = XdrReader::new(&out);
            let again = <$t>::decode_xdr(&mut r).expect("re-encoded result decodes");
            assert_eq!(r.remaining(), 0);
            assert_eq!(res, again);
        }
    }};
}

fn results(proc_: Proc3, b: &[u8]) {
    match proc_ {
        Proc3::Null => {}
        Proc3::Getattr => res_round_trip!(GetattrRes, b),
        Proc3::Setattr => res_round_trip!(SetattrRes, b),
        Proc3::Lookup => res_round_trip!(LookupRes, b),
        Proc3::Access => res_round_trip!(AccessRes, b),
        Proc3::Readlink => res_round_trip!(ReadlinkRes, b),
        Proc3::Read => res_round_trip!(ReadRes, b),
        Proc3::Write => res_round_trip!(WriteRes, b),
        Proc3::Create => res_round_trip!(CreateRes, b),
        Proc3::Mkdir => res_round_trip!(MkdirRes, b),
        Proc3::Symlink => res_round_trip!(SymlinkRes, b),
        Proc3::Mknod => res_round_trip!(MknodRes, b),
        Proc3::Remove => res_round_trip!(RemoveRes, b),
        Proc3::Rmdir => res_round_trip!(RmdirRes, b),
        Proc3::Rename => res_round_trip!(RenameRes, b),
        Proc3::Link => res_round_trip!(LinkRes, b),
        Proc3::Readdir => res_round_trip!(ReaddirRes, b),
        Proc3::Readdirplus => res_round_trip!(ReaddirplusRes, b),
        Proc3::Fsstat => res_round_trip!(FsstatRes, b),
        Proc3::Fsinfo => res_round_trip!(FsinfoRes, b),
        Proc3::Pathconf => res_round_trip!(PathconfRes, b),
        Proc3::Commit => res_round_trip!(CommitRes, b),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else { return };
    let Some(proc_) = Proc3::from_u32(u32::from(sel % 22)) else { return };
    if sel < 128 {
        args_round_trip(proc_, bytes);
    } else {
        results(proc_, bytes);
    }
});
