//! MOUNT v3 arguments (the server side) and results (the client side) decoded from arbitrary
//! bytes: never panics, and whatever decodes re-encodes to bytes that decode to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::mount3::*;
use nfs_wire::xdr::{XdrReader, XdrWriter};

fn encoded(f: impl FnOnce(&mut XdrWriter<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut XdrWriter::new(&mut out));
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, b)) = data.split_first() else { return };
    match sel % 4 {
        0 => {
            let Some(p) = MountProc3::from_u32(u32::from(sel / 4 % 6)) else { return };
            let Ok(a) = MountArgs3::decode(p, &mut XdrReader::new(b)) else { return };
            let out = encoded(|w| a.encode(w));
            assert_eq!(MountArgs3::decode(p, &mut XdrReader::new(&out)), Ok(a));
        }
        1 => {
            let Ok(res) = MntRes::decode(&mut XdrReader::new(b)) else { return };
            let out = encoded(|w| res.encode(w));
            assert_eq!(MntRes::decode(&mut XdrReader::new(&out)), Ok(res));
        }
        2 => {
            let Ok(list) = decode_export_list(&mut XdrReader::new(b)) else { return };
            let out = encoded(|w| encode_export_list(&list, w));
            assert_eq!(decode_export_list(&mut XdrReader::new(&out)), Ok(list));
        }
        _ => {
            let Ok(list) = decode_mount_list(&mut XdrReader::new(b)) else { return };
            let out = encoded(|w| encode_mount_list(&list, w));
            assert_eq!(decode_mount_list(&mut XdrReader::new(&out)), Ok(list));
        }
    }
});
