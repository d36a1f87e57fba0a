//! Round trips of every procedure's arguments and results, byte layouts of a few messages
//! checked against RFC 1813, and truncated input.

use super::*;
use crate::xdr::{pad_len, Xdr, XdrError, XdrReader, XdrWriter};

fn fh(b: u8) -> NfsFh3 {
    NfsFh3::new(&[b; 28]).unwrap()
}

fn t(s: u32) -> NfsTime3 {
    NfsTime3 { seconds: s, nseconds: s * 3 }
}

fn fattr() -> Fattr3 {
    Fattr3 {
        ftype: Ftype3::Reg,
        mode: 0o644,
        nlink: 1,
        uid: 1000,
        gid: 100,
        size: 0x1_0000_0001,
        used: 4096,
        rdev: Specdata3 { specdata1: 0, specdata2: 0 },
        fsid: 0x55,
        fileid: 0x1234_5678_9abc,
        atime: t(1),
        mtime: t(2),
        ctime: t(3),
    }
}

fn sattr() -> Sattr3 {
    Sattr3 { mode: Some(0o600), uid: None, gid: Some(7), size: Some(9), atime: SetTime::ServerTime, mtime: SetTime::Client(t(5)) }
}

fn dirop(name: &[u8]) -> DirOpArgs3 {
    DirOpArgs3 { dir: fh(1), name: name.to_vec() }
}

fn wcc() -> WccData {
    WccData { before: PreOpAttr(Some(fattr().wcc())), after: PostOpAttr(Some(fattr())) }
}

fn encode<'a, T: Xdr<'a>>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode_xdr(&mut XdrWriter::new(&mut out));
    out
}

/// Encodes, decodes back to the same value using every byte, and checks that every shorter
/// prefix of the encoding is refused.
fn round_trip<'a, T: Xdr<'a> + PartialEq + std::fmt::Debug>(v: &T, bytes: &'a [u8]) {
    let mut r = XdrReader::new(bytes);
    let back = T::decode_xdr(&mut r).unwrap();
    assert_eq!(&back, v);
    assert_eq!(r.remaining(), 0, "{v:?}");
    for n in 0..bytes.len() {
        assert!(T::decode_xdr(&mut XdrReader::new(&bytes[..n])).is_err(), "prefix {n} of {v:?}");
    }
}

macro_rules! check {
    ($($v:expr),+ $(,)?) => {$({
        let v = $v;
        let bytes = encode(&v);
        round_trip(&v, &bytes);
    })+};
}

fn all_args(data: &[u8]) -> Vec<Args3<'_>> {
    vec![
        Args3::Getattr(GetattrArgs { object: fh(2) }),
        Args3::Setattr(SetattrArgs { object: fh(2), new_attributes: sattr(), guard: Some(t(9)) }),
        Args3::Setattr(SetattrArgs { object: fh(2), new_attributes: Sattr3::default(), guard: None }),
        Args3::Lookup(LookupArgs { what: dirop(b"name") }),
        Args3::Access(AccessArgs { object: fh(2), access: ACCESS3_READ | ACCESS3_MODIFY }),
        Args3::Readlink(ReadlinkArgs { symlink: fh(3) }),
        Args3::Read(ReadArgs { file: fh(3), offset: 1 << 40, count: 65536 }),
        Args3::Write(WriteArgs { file: fh(3), offset: 7, count: data.len() as u32, stable: StableHow::FileSync, data }),
        Args3::Create(CreateArgs { where_: dirop(b"new"), how: CreateHow3::Unchecked(sattr()) }),
        Args3::Create(CreateArgs { where_: dirop(b"new"), how: CreateHow3::Guarded(Sattr3::default()) }),
        Args3::Create(CreateArgs { where_: dirop(b"new"), how: CreateHow3::Exclusive(*b"verifier") }),
        Args3::Mkdir(MkdirArgs { where_: dirop(b"d"), attributes: sattr() }),
        Args3::Symlink(SymlinkArgs {
            where_: dirop(b"ln"),
            symlink: SymlinkData3 { symlink_attributes: Sattr3::default(), symlink_data: b"../target".to_vec() },
        }),
        Args3::Mknod(MknodArgs { where_: dirop(b"f"), what: MknodData3::Fifo(sattr()) }),
        Args3::Mknod(MknodArgs { where_: dirop(b"s"), what: MknodData3::Sock(Sattr3::default()) }),
        Args3::Mknod(MknodArgs {
            where_: dirop(b"c"),
            what: MknodData3::Chr { dev_attributes: sattr(), spec: Specdata3 { specdata1: 1, specdata2: 3 } },
        }),
        Args3::Mknod(MknodArgs { where_: dirop(b"b"), what: MknodData3::Blk { dev_attributes: sattr(), spec: Specdata3::default() } }),
        Args3::Mknod(MknodArgs { where_: dirop(b"r"), what: MknodData3::Other(Ftype3::Reg) }),
        Args3::Remove(RemoveArgs { object: dirop(b"gone") }),
        Args3::Rmdir(RmdirArgs { object: dirop(b"gonedir") }),
        Args3::Rename(RenameArgs { from: dirop(b"a"), to: DirOpArgs3 { dir: fh(4), name: b"b".to_vec() } }),
        Args3::Link(LinkArgs { file: fh(5), link: dirop(b"hard") }),
        Args3::Readdir(ReaddirArgs { dir: fh(1), cookie: 3, cookieverf: *b"cookieve", count: 4096 }),
        Args3::Readdirplus(ReaddirplusArgs { dir: fh(1), cookie: 0, cookieverf: [0; 8], dircount: 512, maxcount: 32768 }),
        Args3::Fsstat(FsstatArgs { fsroot: fh(1) }),
        Args3::Fsinfo(FsinfoArgs { fsroot: fh(1) }),
        Args3::Pathconf(PathconfArgs { object: fh(1) }),
        Args3::Commit(CommitArgs { file: fh(3), offset: 0, count: 0 }),
    ]
}

#[test]
fn every_procedures_args_round_trip() {
    let data = b"hello world";
    let all = all_args(data);
    let mut seen = std::collections::HashSet::new();
    for a in &all {
        seen.insert(a.proc_());
        let mut bytes = Vec::new();
        a.encode(&mut XdrWriter::new(&mut bytes));
        let back = Args3::decode(a.proc_(), &mut XdrReader::new(&bytes)).unwrap();
        assert_eq!(&back, a);
        for n in 0..bytes.len() {
            assert!(Args3::decode(a.proc_(), &mut XdrReader::new(&bytes[..n])).is_err(), "{:?} prefix {n}", a.proc_());
        }
    }
    assert_eq!(seen.len(), 21, "every procedure but NULL");
    assert_eq!(Args3::decode(Proc3::Null, &mut XdrReader::new(&[])), Ok(Args3::Null));
}

#[test]
fn every_procedures_results_round_trip() {
    check!(
        GetattrRes::Ok(GetattrResOk { obj_attributes: fattr() }),
        GetattrRes::Fail(Nfsstat3::Stale),
        SetattrRes::Ok(SetattrResOk { obj_wcc: wcc() }),
        SetattrRes::Fail(Nfsstat3::NotSync, WccData::default()),
        LookupRes::Ok(LookupResOk { object: fh(6), obj_attributes: PostOpAttr(Some(fattr())), dir_attributes: PostOpAttr(None) }),
        LookupRes::Fail(Nfsstat3::Noent, PostOpAttr(Some(fattr()))),
        AccessRes::Ok(AccessResOk { obj_attributes: PostOpAttr(None), access: 0x3f }),
        AccessRes::Fail(Nfsstat3::Badhandle, PostOpAttr(None)),
        ReadlinkRes::Ok(ReadlinkResOk { symlink_attributes: PostOpAttr(None), data: b"/a/b".to_vec() }),
        ReadlinkRes::Fail(Nfsstat3::Inval, PostOpAttr(None)),
        WriteRes::Ok(WriteResOk { file_wcc: wcc(), count: 11, committed: StableHow::DataSync, verf: *b"WRITEVRF" }),
        WriteRes::Fail(Nfsstat3::Nospc, wcc()),
        CreateRes::Ok(CreateResOk { obj: PostOpFh3(Some(fh(7))), obj_attributes: PostOpAttr(Some(fattr())), dir_wcc: wcc() }),
        CreateRes::Fail(Nfsstat3::Exist, wcc()),
        MkdirRes::Ok(CreateResOk { obj: PostOpFh3(None), obj_attributes: PostOpAttr(None), dir_wcc: WccData::default() }),
        MkdirRes::Fail(Nfsstat3::Exist, WccData::default()),
        SymlinkRes::Ok(CreateResOk { obj: PostOpFh3(Some(fh(8))), obj_attributes: PostOpAttr(None), dir_wcc: wcc() }),
        SymlinkRes::Fail(Nfsstat3::Notsupp, WccData::default()),
        MknodRes::Ok(CreateResOk { obj: PostOpFh3(Some(fh(9))), obj_attributes: PostOpAttr(None), dir_wcc: wcc() }),
        MknodRes::Fail(Nfsstat3::Badtype, WccData::default()),
        RemoveRes::Ok(RemoveResOk { dir_wcc: wcc() }),
        RemoveRes::Fail(Nfsstat3::Acces, wcc()),
        RmdirRes::Ok(RemoveResOk { dir_wcc: wcc() }),
        RmdirRes::Fail(Nfsstat3::Notempty, wcc()),
        RenameRes::Ok(RenameResOk { fromdir_wcc: wcc(), todir_wcc: WccData::default() }),
        RenameRes::Fail(Nfsstat3::Xdev, RenameResOk { fromdir_wcc: wcc(), todir_wcc: wcc() }),
        LinkRes::Ok(LinkResOk { file_attributes: PostOpAttr(Some(fattr())), linkdir_wcc: wcc() }),
        LinkRes::Fail(Nfsstat3::Mlink, LinkResOk { file_attributes: PostOpAttr(None), linkdir_wcc: wcc() }),
        FsstatRes::Ok(FsstatResOk {
            obj_attributes: PostOpAttr(None),
            tbytes: 1 << 40,
            fbytes: 1 << 39,
            abytes: 1 << 38,
            tfiles: 1000,
            ffiles: 900,
            afiles: 800,
            invarsec: 0,
        }),
        FsstatRes::Fail(Nfsstat3::Io, PostOpAttr(None)),
        FsinfoRes::Ok(fsinfo_ok()),
        FsinfoRes::Fail(Nfsstat3::Serverfault, PostOpAttr(None)),
        PathconfRes::Ok(PathconfResOk {
            obj_attributes: PostOpAttr(Some(fattr())),
            linkmax: 32000,
            name_max: 255,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        }),
        PathconfRes::Fail(Nfsstat3::Jukebox, PostOpAttr(None)),
        CommitRes::Ok(CommitResOk { file_wcc: wcc(), verf: *b"WRITEVRF" }),
        CommitRes::Fail(Nfsstat3::Io, wcc()),
    );
}

fn fsinfo_ok() -> FsinfoResOk {
    FsinfoResOk {
        obj_attributes: PostOpAttr(Some(fattr())),
        rtmax: 1 << 20,
        rtpref: 1 << 20,
        rtmult: 4096,
        wtmax: 1 << 20,
        wtpref: 1 << 20,
        wtmult: 4096,
        dtpref: 65536,
        maxfilesize: u64::MAX,
        time_delta: NfsTime3 { seconds: 0, nseconds: 1 },
        properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
    }
}

#[test]
fn read_result_head_then_data() {
    let data = b"abcde";
    let ok = ReadResOk { file_attributes: PostOpAttr(None), count: 5, eof: true };
    let mut out = Vec::new();
    ReadRes::encode_ok_head(&ok, &mut XdrWriter::new(&mut out));
    // status, no attributes, count, eof, data length: the server appends data and padding.
    assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 5]);
    out.extend_from_slice(data);
    out.resize(out.len() + pad_len(data.len()), 0);
    let whole = encode(&ReadRes::Ok(ok, data));
    assert_eq!(out, whole);
    round_trip(&ReadRes::Ok(ok, data), &whole);
    check!(ReadRes::Fail(Nfsstat3::Isdir, PostOpAttr(Some(fattr()))));
}

#[test]
fn fattr3_layout_byte_by_byte() {
    let bytes = encode(&GetattrRes::Ok(GetattrResOk { obj_attributes: fattr() }));
    #[rustfmt::skip]
    let expect: Vec<u8> = vec![
        0, 0, 0, 0, // NFS3_OK
        0, 0, 0, 1, // NF3REG
        0, 0, 0x01, 0xa4, // mode 0644
        0, 0, 0, 1, // nlink
        0, 0, 0x03, 0xe8, // uid
        0, 0, 0, 100, // gid
        0, 0, 0, 1, 0, 0, 0, 1, // size
        0, 0, 0, 0, 0, 0, 0x10, 0, // used
        0, 0, 0, 0, 0, 0, 0, 0, // rdev
        0, 0, 0, 0, 0, 0, 0, 0x55, // fsid
        0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, // fileid
        0, 0, 0, 1, 0, 0, 0, 3, // atime
        0, 0, 0, 2, 0, 0, 0, 6, // mtime
        0, 0, 0, 3, 0, 0, 0, 9, // ctime
    ];
    assert_eq!(bytes, expect);
    assert_eq!(bytes.len(), 4 + Fattr3::XDR_LEN);
}

#[test]
fn args_layouts_byte_by_byte() {
    let lookup = encode(&LookupArgs { what: DirOpArgs3 { dir: NfsFh3::new(&[0xaa, 0xbb]).unwrap(), name: b"hello".to_vec() } });
    assert_eq!(lookup, [0, 0, 0, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0]);
    let f = NfsFh3::new(&[1, 2, 3, 4]).unwrap();
    let write = encode(&WriteArgs { file: f, offset: 0x1_0000_0000, count: 3, stable: StableHow::Unstable, data: b"xyz" });
    #[rustfmt::skip]
    assert_eq!(write, [
        0, 0, 0, 4, 1, 2, 3, 4, // file
        0, 0, 0, 1, 0, 0, 0, 0, // offset
        0, 0, 0, 3, // count
        0, 0, 0, 0, // UNSTABLE
        0, 0, 0, 3, b'x', b'y', b'z', 0, // data
    ]);
    let excl = encode(&CreateArgs { where_: DirOpArgs3 { dir: f, name: b"n".to_vec() }, how: CreateHow3::Exclusive(*b"12345678") });
    #[rustfmt::skip]
    assert_eq!(excl, [
        0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 1, b'n', 0, 0, 0, // where
        0, 0, 0, 2, b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'8', // EXCLUSIVE, verifier
    ]);
    let setattr = encode(&SetattrArgs { object: f, new_attributes: sattr(), guard: Some(t(9)) });
    #[rustfmt::skip]
    assert_eq!(setattr, [
        0, 0, 0, 4, 1, 2, 3, 4,
        0, 0, 0, 1, 0, 0, 0x01, 0x80, // mode 0600
        0, 0, 0, 0, // uid unset
        0, 0, 0, 1, 0, 0, 0, 7, // gid 7
        0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, // size 9
        0, 0, 0, 1, // atime: SET_TO_SERVER_TIME
        0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 15, // mtime: SET_TO_CLIENT_TIME
        0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 27, // guard ctime
    ]);
}

#[test]
fn bad_values_are_refused() {
    // File handle over 64 bytes.
    let mut long = vec![0, 0, 0, 65];
    long.extend_from_slice(&[0; 68]);
    assert_eq!(GetattrArgs::decode(&mut XdrReader::new(&long)), Err(XdrError::TooLong { len: 65, max: 64 }));
    // Unknown stable_how, createmode, time_how, ftype, status.
    let mut w = encode(&WriteArgs { file: fh(1), offset: 0, count: 0, stable: StableHow::Unstable, data: b"" });
    w[32 + 12 + 3] = 3;
    assert_eq!(WriteArgs::decode(&mut XdrReader::new(&w)), Err(XdrError::BadValue(3)));
    let mut c = encode(&CreateArgs { where_: dirop(b""), how: CreateHow3::Exclusive([0; 8]) });
    let at = c.len() - 12;
    c[at + 3] = 3;
    assert_eq!(CreateArgs::decode(&mut XdrReader::new(&c)), Err(XdrError::BadValue(3)));
    assert_eq!(SetTime::decode(&mut XdrReader::new(&[0, 0, 0, 3])), Err(XdrError::BadValue(3)));
    assert_eq!(Ftype3::decode(&mut XdrReader::new(&[0, 0, 0, 8])), Err(XdrError::BadValue(8)));
    assert_eq!(GetattrRes::decode(&mut XdrReader::new(&[0, 0, 0, 3])), Err(XdrError::BadValue(3)));
    assert!(NfsFh3::new(&[0; 65]).is_none());
}

#[test]
fn status_and_proc_numbers() {
    assert_eq!(Nfsstat3::from_u32(10008), Some(Nfsstat3::Jukebox));
    assert_eq!(Nfsstat3::Badhandle as u32, 10001);
    assert_eq!(Proc3::from_u32(21), Some(Proc3::Commit));
    assert_eq!(Proc3::from_u32(22), None);
    assert_eq!(Proc3::Readdirplus.name(), "READDIRPLUS");
    assert_eq!(Nfsstat3::Noent.to_string(), "Noent (2)");
    assert_eq!(CreateRes::Fail(Nfsstat3::Exist, WccData::default()).status(), Nfsstat3::Exist);
}

#[test]
fn dir_writer_stops_at_count_and_decodes() {
    let names: Vec<Vec<u8>> = (0..100).map(|i| format!("file-{i:03}").into_bytes()).collect();
    let mut out = vec![9, 9]; // bytes before the result stay untouched
    let count = 512;
    let mut dw = DirWriter::new(&mut out, &PostOpAttr(Some(fattr())), *b"verf0001", count);
    let mut fitted = 0;
    for (i, n) in names.iter().enumerate() {
        if !dw.push(&Entry3 { fileid: i as u64 + 10, name: n, cookie: i as u64 + 1 }) {
            break;
        }
        fitted += 1;
    }
    assert_eq!(dw.entries(), fitted);
    assert!(!dw.push(&Entry3 { fileid: 1, name: b"", cookie: 1 }), "nothing after an entry that did not fit");
    dw.finish(true);
    // Each entry: 4 + 8 + 4 + 8 (name) + 8 = 32 bytes; head 4 + 84 + 8; end 8.
    assert_eq!(fitted, (512 - 88 - 8 - 8) / 32);
    assert!(out.len() - 2 - 4 <= count as usize);
    let res = ReaddirRes::decode(&mut XdrReader::new(&out[2..])).unwrap();
    let ReaddirRes::Ok(ok) = res else { panic!("not ok") };
    assert!(!ok.eof, "eof is not claimed when an entry was left out");
    assert_eq!(ok.cookieverf, *b"verf0001");
    assert_eq!(ok.entries.len(), fitted);
    assert_eq!(ok.entries[3], Entry3 { fileid: 13, name: b"file-003", cookie: 4 });
    assert_eq!(out[..2], [9, 9]);
}

#[test]
fn dir_writer_whole_listing_round_trips() {
    let entries = vec![Entry3 { fileid: 1, name: b".", cookie: 1 }, Entry3 { fileid: 2, name: b"..", cookie: 2 }];
    let mut out = Vec::new();
    let mut dw = DirWriter::new(&mut out, &PostOpAttr(None), [0; 8], 4096);
    for e in &entries {
        assert!(dw.push(e));
    }
    dw.finish(true);
    let expect = ReaddirRes::Ok(DirListOk { dir_attributes: PostOpAttr(None), cookieverf: [0; 8], entries, eof: true });
    assert_eq!(out, encode(&expect));
    round_trip(&expect, &out);
    check!(ReaddirRes::Fail(Nfsstat3::BadCookie, PostOpAttr(None)));
}

#[test]
fn dir_writer_cancel_leaves_the_buffer_as_it_was() {
    let mut out = vec![1, 2, 3];
    let mut dw = DirWriter::new(&mut out, &PostOpAttr(Some(fattr())), [0; 8], 100);
    assert!(!dw.push(&Entry3 { fileid: 1, name: b"too-long-for-100-bytes", cookie: 1 }));
    assert_eq!(dw.entries(), 0);
    dw.cancel();
    assert_eq!(out, [1, 2, 3]);
}

#[test]
fn dirplus_writer_honours_dircount_and_maxcount() {
    let names: Vec<Vec<u8>> = (0..50).map(|i| format!("n{i:02}").into_bytes()).collect();
    let entry = |i: usize| EntryPlus3 {
        fileid: i as u64,
        name: &names[i],
        cookie: i as u64 + 1,
        name_attributes: PostOpAttr(Some(fattr())),
        name_handle: PostOpFh3(Some(fh(i as u8))),
    };
    // dircount: each directory part is 4 + 8 + 4 + 4 + 8 = 28 bytes.
    let mut out = Vec::new();
    let mut dw = DirPlusWriter::new(&mut out, &PostOpAttr(None), [0; 8], 28 * 3, 1 << 20);
    let n = (0..50).take_while(|&i| dw.push(&entry(i))).count();
    assert_eq!(n, 3);
    dw.finish(true);
    let ReaddirplusRes::Ok(ok) = ReaddirplusRes::decode(&mut XdrReader::new(&out)).unwrap() else { panic!() };
    assert_eq!((ok.entries.len(), ok.eof), (3, false));
    assert_eq!(ok.entries[2], entry(2));
    // maxcount: head 4 + 8 + end 8, entry 28 + 88 + 36.
    let mut out = Vec::new();
    let mut dw = DirPlusWriter::new(&mut out, &PostOpAttr(None), [0; 8], u32::MAX, 4 + 8 + 8 + 152 * 2);
    let n = (0..50).take_while(|&i| dw.push(&entry(i))).count();
    assert_eq!(n, 2);
    dw.finish(false);
    assert_eq!(out.len(), 4 + 4 + 8 + 8 + 152 * 2);
    // The first entry is held only to maxcount, so a tiny dircount still lists one.
    let mut out = Vec::new();
    let mut dw = DirPlusWriter::new(&mut out, &PostOpAttr(None), [0; 8], 0, 1 << 20);
    assert_eq!((0..50).take_while(|&i| dw.push(&entry(i))).count(), 1);
    // Everything fitting: eof kept.
    let mut out = Vec::new();
    let mut dw = DirPlusWriter::new(&mut out, &PostOpAttr(None), [0; 8], u32::MAX, u32::MAX);
    assert!((0..50).all(|i| dw.push(&entry(i))));
    dw.finish(true);
    let ReaddirplusRes::Ok(ok) = ReaddirplusRes::decode(&mut XdrReader::new(&out)).unwrap() else { panic!() };
    assert_eq!((ok.entries.len(), ok.eof), (50, true));
    round_trip(&ReaddirplusRes::Ok(ok), &out);
}

/// A small deterministic generator, so the sweep below covers many shapes without a crate.
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

#[test]
fn dir_writers_never_exceed_their_limits() {
    let mut seed = 7;
    let names: Vec<Vec<u8>> = (0..40).map(|i| vec![b'a' + (i % 26) as u8; 1 + lcg(&mut seed) as usize % 40]).collect();
    for count in (0..3000).step_by(37) {
        let dircount = lcg(&mut seed) as u32 % 2000;
        let mut out = Vec::new();
        let mut dw = DirPlusWriter::new(&mut out, &PostOpAttr(Some(fattr())), [1; 8], dircount, count);
        let mut pushed = 0;
        for (i, n) in names.iter().enumerate() {
            let attrs = PostOpAttr(if i % 3 == 0 { None } else { Some(fattr()) });
            let e = EntryPlus3 { fileid: i as u64, name: n, cookie: i as u64 + 1, name_attributes: attrs, name_handle: PostOpFh3(Some(fh(1))) };
            if !dw.push(&e) {
                break;
            }
            pushed += 1;
        }
        dw.finish(true);
        let ReaddirplusRes::Ok(ok) = ReaddirplusRes::decode(&mut XdrReader::new(&out)).unwrap() else { panic!() };
        assert_eq!(ok.entries.len(), pushed);
        assert_eq!(ok.eof, pushed == names.len());
        if pushed > 0 {
            assert!(out.len() - 4 <= count as usize, "resok over maxcount {count}");
        }
        let dir: usize = ok.entries.iter().map(|e| 4 + 8 + 4 + e.name.len().div_ceil(4) * 4 + 8).sum();
        assert!(pushed <= 1 || dir <= dircount as usize, "directory part over dircount {dircount}");
        for (i, e) in ok.entries.iter().enumerate() {
            assert_eq!((e.fileid, e.name), (i as u64, &names[i][..]));
        }
    }
}
