use super::*;
use crate::xdr::testing::encode;
use crate::xdr::{XdrError, XdrReader};

#[test]
fn mnt_layout_and_round_trip() {
    let args = MntArgs { dirpath: b"/data".to_vec() };
    let bytes = encode(|w| args.encode(w));
    assert_eq!(bytes, [0, 0, 0, 5, b'/', b'd', b'a', b't', b'a', 0, 0, 0]);
    assert_eq!(MountArgs3::decode(MountProc3::Mnt, &mut XdrReader::new(&bytes)), Ok(MountArgs3::Mnt(args.clone())));
    assert_eq!(MountArgs3::decode(MountProc3::Umnt, &mut XdrReader::new(&bytes)), Ok(MountArgs3::Umnt(args)));
    for n in 0..bytes.len() {
        assert!(MntArgs::decode(&mut XdrReader::new(&bytes[..n])).is_err());
    }
    let res = MntRes::Ok(MntResOk { fhandle: NfsFh3::new(&[7, 7, 7]).unwrap(), auth_flavors: vec![1, 0] });
    let bytes = encode(|w| res.encode(w));
    #[rustfmt::skip]
    assert_eq!(bytes, [
        0, 0, 0, 0, // MNT3_OK
        0, 0, 0, 3, 7, 7, 7, 0, // fhandle
        0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, // AUTH_SYS, AUTH_NONE
    ]);
    assert_eq!(MntRes::decode(&mut XdrReader::new(&bytes)), Ok(res));
    for n in 0..bytes.len() {
        assert!(MntRes::decode(&mut XdrReader::new(&bytes[..n])).is_err());
    }
    let fail = encode(|w| MntRes::Fail(MountStat3::Acces).encode(w));
    assert_eq!(fail, [0, 0, 0, 13]);
    assert_eq!(MntRes::decode(&mut XdrReader::new(&fail)), Ok(MntRes::Fail(MountStat3::Acces)));
}

#[test]
fn limits_are_enforced() {
    let mut long = vec![0, 0, 4, 1];
    long.resize(4 + 1028, b'a');
    assert_eq!(MntArgs::decode(&mut XdrReader::new(&long)), Err(XdrError::TooLong { len: 1025, max: MNTPATHLEN }));
    // A flavor count the input cannot hold.
    let bytes = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 60];
    assert_eq!(MntRes::decode(&mut XdrReader::new(&bytes)), Err(XdrError::Short));
    assert_eq!(MountProc3::from_u32(6), None);
}

#[test]
fn export_and_mount_lists_round_trip() {
    let exports = vec![
        ExportNode { dir: b"/data".to_vec(), groups: vec![] },
        ExportNode { dir: b"/pub".to_vec(), groups: vec![b"10.0.0.0/8".to_vec(), b"host".to_vec()] },
    ];
    let bytes = encode(|w| encode_export_list(&exports, w));
    #[rustfmt::skip]
    assert_eq!(bytes[..24], [
        0, 0, 0, 1, 0, 0, 0, 5, b'/', b'd', b'a', b't', b'a', 0, 0, 0, 0, 0, 0, 0, // /data, no groups
        0, 0, 0, 1, // next
    ]);
    assert_eq!(decode_export_list(&mut XdrReader::new(&bytes)), Ok(exports));
    for n in 0..bytes.len() {
        assert!(decode_export_list(&mut XdrReader::new(&bytes[..n])).is_err());
    }
    let mounts = vec![MountBody { hostname: b"client".to_vec(), directory: b"/data".to_vec() }];
    let bytes = encode(|w| encode_mount_list(&mounts, w));
    assert_eq!(decode_mount_list(&mut XdrReader::new(&bytes)), Ok(mounts));
    assert_eq!(encode(|w| encode_mount_list(&[], w)), [0, 0, 0, 0]);
}
