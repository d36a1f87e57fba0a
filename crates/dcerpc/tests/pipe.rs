//! End-to-end tests: hand-built PDUs (C706 §12.6) in, decoded PDUs out.

use dcerpc::{pipe_kind, Pipe, PipeKind, RpcContext, RpcError, ServerInfo, ShareInfo, STYPE_DISKTREE, STYPE_IPC, STYPE_SPECIAL};

// ---------- wire builders (independent of the crate's encoders) ----------

const SRVSVC: ([u8; 16], u32) = ([0xc8, 0x4f, 0x32, 0x4b, 0x70, 0x16, 0xd3, 0x01, 0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1, 0x88], 3);
const WKSSVC: ([u8; 16], u32) = ([0x98, 0xd0, 0xff, 0x6b, 0x12, 0xa1, 0x10, 0x36, 0x98, 0x33, 0x46, 0xc3, 0xf8, 0x7e, 0x34, 0x5a], 1);
const NDR: ([u8; 16], u32) = ([0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48, 0x60], 2);
const NDR64: ([u8; 16], u32) = ([0x33, 0x05, 0x71, 0x71, 0xba, 0xbe, 0x37, 0x49, 0x83, 0x19, 0xb5, 0xdb, 0xef, 0x9c, 0xcc, 0x36], 1);
// 6cb71c2c-9812-4540-0300-000000000000 (features 0x03).
const BTFN: ([u8; 16], u32) = ([0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45, 0x03, 0, 0, 0, 0, 0, 0, 0], 1);

fn header(ptype: u8, flags: u8, call_id: u32, body: &[u8]) -> Vec<u8> {
    let mut v = vec![5, 0, ptype, flags, 0x10, 0, 0, 0];
    v.extend_from_slice(&((16 + body.len()) as u16).to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&call_id.to_le_bytes());
    v.extend_from_slice(body);
    v
}

type Syn = ([u8; 16], u32);

fn bind_pdu(ptype: u8, call_id: u32, xmit: u16, recv: u16, ctxs: &[(u16, Syn, &[Syn])]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&xmit.to_le_bytes());
    b.extend_from_slice(&recv.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[ctxs.len() as u8, 0, 0, 0]);
    for (id, abs, ts) in ctxs {
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&[ts.len() as u8, 0]);
        b.extend_from_slice(&abs.0);
        b.extend_from_slice(&abs.1.to_le_bytes());
        for t in ts.iter() {
            b.extend_from_slice(&t.0);
            b.extend_from_slice(&t.1.to_le_bytes());
        }
    }
    header(ptype, 3, call_id, &b)
}

fn request_pdu(call_id: u32, flags: u8, ctx_id: u16, opnum: u16, alloc: u32, stub: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&alloc.to_le_bytes());
    b.extend_from_slice(&ctx_id.to_le_bytes());
    b.extend_from_slice(&opnum.to_le_bytes());
    b.extend_from_slice(stub);
    header(0, flags, call_id, &b)
}

/// Little NDR writer for request stubs.
#[derive(Default)]
struct W(Vec<u8>);
impl W {
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.resize(self.0.len().div_ceil(4) * 4, 0);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn wstr(&mut self, s: &str) -> &mut Self {
        let u: Vec<u16> = s.encode_utf16().chain([0]).collect();
        self.u32(u.len() as u32).u32(0).u32(u.len() as u32);
        for c in u {
            self.0.extend_from_slice(&c.to_le_bytes());
        }
        self
    }
}

/// Little NDR reader for response stubs (panics = test failure).
struct R<'a>(&'a [u8], usize);
impl R<'_> {
    fn u32(&mut self) -> u32 {
        self.1 = self.1.div_ceil(4) * 4;
        let v = u32::from_le_bytes(self.0[self.1..self.1 + 4].try_into().unwrap());
        self.1 += 4;
        v
    }
    fn wstr(&mut self) -> String {
        let max = self.u32();
        assert_eq!(self.u32(), 0, "offset");
        let actual = self.u32();
        assert_eq!(max, actual);
        let u: Vec<u16> = (0..actual as usize).map(|i| u16::from_le_bytes([self.0[self.1 + 2 * i], self.0[self.1 + 2 * i + 1]])).collect();
        self.1 += 2 * actual as usize;
        assert_eq!(u.last(), Some(&0), "NUL terminated");
        String::from_utf16(&u[..u.len() - 1]).unwrap()
    }
    fn done(&self) {
        assert_eq!(self.1, self.0.len(), "trailing bytes in stub");
    }
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

// ---------- fixtures ----------

fn shares() -> Vec<ShareInfo> {
    vec![
        ShareInfo { name: "data".into(), share_type: STYPE_DISKTREE, comment: "Main data".into() },
        ShareInfo { name: "IPC$".into(), share_type: STYPE_IPC | STYPE_SPECIAL, comment: "IPC Service".into() },
        ShareInfo { name: "Données📁".into(), share_type: STYPE_DISKTREE, comment: String::new() },
    ]
}

fn server() -> ServerInfo {
    ServerInfo { name: "BRAID".into(), comment: "Braid SMB".into(), version_major: 10, version_minor: 0, server_type: 0x9003 }
}

/// Binds a fresh srvsvc pipe the way Windows does and drains the bind_ack.
fn bound(ctx: &RpcContext<'_>, recv: u16) -> Pipe {
    let mut p = Pipe::new(PipeKind::Srvsvc);
    let ndr: &[Syn] = &[NDR];
    p.write(&bind_pdu(11, 1, 4280, recv, &[(0, SRVSVC, ndr)]), ctx).unwrap();
    let (ack, more) = p.read(65536);
    assert!(!more);
    assert_eq!(ack[2], 12);
    p
}

/// Reads response fragments until LAST; returns (stub, fragment sizes).
fn read_response(p: &mut Pipe, call_id: u32) -> (Vec<u8>, Vec<usize>) {
    let mut stub = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let (pdu, more) = p.read(65536);
        assert!(!more);
        assert!(pdu.len() >= 24, "short pdu {pdu:?}");
        assert_eq!(pdu[2], 2, "expected response, got ptype {} status {:#x}", pdu[2], le32(&pdu, 24));
        assert_eq!(le16(&pdu, 8) as usize, pdu.len());
        assert_eq!(le32(&pdu, 12), call_id);
        let first = pdu[3] & 1 != 0;
        assert_eq!(first, sizes.is_empty());
        // alloc_hint counts the remaining stub from this fragment on.
        let hint = le32(&pdu, 16) as usize;
        stub.extend_from_slice(&pdu[24..]);
        sizes.push(pdu.len());
        assert!(hint >= pdu.len() - 24);
        if pdu[3] & 2 != 0 {
            return (stub, sizes);
        }
    }
}

fn read_fault(p: &mut Pipe) -> u32 {
    let (pdu, _) = p.read(65536);
    assert_eq!(pdu[2], 3, "expected fault");
    assert_eq!(pdu.len(), 32);
    le32(&pdu, 24)
}

fn enum_all_stub(level: u32, resume: bool) -> Vec<u8> {
    // As Samba's smbclient -L sends it (MS-SRVS §3.1.4.8): unique server UNC,
    // SHARE_ENUM_STRUCT with an empty container, max length -1, resume 0.
    let mut w = W::default();
    w.u32(0x0002_0000).wstr("\\\\127.0.0.1");
    w.u32(level).u32(level).u32(0x0002_0004).u32(0).u32(0);
    w.u32(u32::MAX);
    if resume {
        w.u32(0x0002_0008).u32(0);
    } else {
        w.u32(0);
    }
    w.0
}

/// Decodes a NetrShareEnumAll level 1 response stub.
fn decode_enum1(stub: &[u8]) -> (Vec<(String, u32, String)>, u32) {
    let mut r = R(stub, 0);
    assert_eq!(r.u32(), 1);
    assert_eq!(r.u32(), 1);
    assert_ne!(r.u32(), 0, "container ptr");
    let n = r.u32();
    assert_ne!(r.u32(), 0, "array ptr");
    assert_eq!(r.u32(), n, "conformance");
    let mut fixed = Vec::new();
    for _ in 0..n {
        let np = r.u32();
        let ty = r.u32();
        let rp = r.u32();
        assert!(np != 0 && rp != 0);
        fixed.push(ty);
    }
    let mut out = Vec::new();
    for ty in fixed {
        let name = r.wstr();
        let remark = r.wstr();
        out.push((name, ty, remark));
    }
    assert_eq!(r.u32(), n, "TotalEntries");
    assert_ne!(r.u32(), 0, "resume ptr");
    assert_eq!(r.u32(), 0, "resume value");
    let werr = r.u32();
    r.done();
    (out, werr)
}

// ---------- tests ----------

#[test]
fn bind_ack_windows_style() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = Pipe::new(PipeKind::Srvsvc);
    let a: &[Syn] = &[NDR];
    let b: &[Syn] = &[NDR64];
    let c: &[Syn] = &[BTFN];
    let bind = bind_pdu(11, 2, 4280, 4280, &[(0, SRVSVC, a), (1, SRVSVC, b), (2, SRVSVC, c)]);
    let (ack, more) = p.transceive(&bind, 4280, &ctx).unwrap();
    assert!(!more && !p.has_output());
    assert_eq!(&ack[..8], &[5, 0, 12, 3, 0x10, 0, 0, 0]);
    assert_eq!(le16(&ack, 8) as usize, ack.len());
    assert_eq!(le16(&ack, 10), 0);
    assert_eq!(le32(&ack, 12), 2);
    assert_eq!(le16(&ack, 16), 4280);
    assert_eq!(le16(&ack, 18), 4280);
    assert_ne!(le32(&ack, 20), 0, "assoc group");
    assert_eq!(le16(&ack, 24), 13);
    assert_eq!(&ack[26..39], b"\\PIPE\\srvsvc\0");
    // 39 -> padded to 40, then the result list.
    assert_eq!(ack[40], 3);
    let res = |i: usize| {
        let o = 44 + 24 * i;
        (le16(&ack, o), le16(&ack, o + 2), &ack[o + 4..o + 24])
    };
    let mut ndr_wire = NDR.0.to_vec();
    ndr_wire.extend_from_slice(&2u32.to_le_bytes());
    assert_eq!(res(0), (0, 0, &ndr_wire[..]));
    assert_eq!(res(1), (2, 2, &[0u8; 20][..]));
    assert_eq!(res(2).0, 3);
    assert_eq!(res(2).1 & !3, 0);
    assert_eq!(ack.len(), 44 + 3 * 24);
}

#[test]
fn bind_wrong_interface_and_alter_context() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = Pipe::new(PipeKind::Srvsvc);
    let ndr: &[Syn] = &[NDR];
    p.write(&bind_pdu(11, 1, 4280, 4280, &[(0, WKSSVC, ndr)]), &ctx).unwrap();
    let (ack, _) = p.read(4280);
    assert_eq!(ack[2], 12);
    assert_eq!(ack[40], 1);
    assert_eq!((le16(&ack, 44), le16(&ack, 46)), (2, 1));
    // Call on the rejected context: fault nca_s_unknown_if.
    p.write(&request_pdu(2, 3, 0, 15, 0, &enum_all_stub(1, true)), &ctx).unwrap();
    assert_eq!(read_fault(&mut p), 0x1c01_0003);
    // Now add srvsvc with alter_context and call on it.
    p.write(&bind_pdu(14, 3, 4280, 4280, &[(1, SRVSVC, ndr)]), &ctx).unwrap();
    let (resp, _) = p.read(4280);
    assert_eq!(resp[2], 15);
    assert_eq!(le16(&resp, 24), 0, "empty secondary address");
    assert_eq!(resp[28], 1);
    assert_eq!(le16(&resp, 32), 0, "accepted");
    p.write(&request_pdu(4, 3, 1, 15, 0, &enum_all_stub(1, true)), &ctx).unwrap();
    let (stub, _) = read_response(&mut p, 4);
    assert_eq!(decode_enum1(&stub).0.len(), 3);
    // A second bind on the association is refused in-band.
    p.write(&bind_pdu(11, 5, 4280, 4280, &[(0, SRVSVC, ndr)]), &ctx).unwrap();
    assert_eq!(p.read(4280).0[2], 13);
}

#[test]
fn share_enum_all_level1() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = bound(&ctx, 4280);
    let stub = enum_all_stub(1, true);
    p.write(&request_pdu(2, 3, 0, 15, stub.len() as u32, &stub), &ctx).unwrap();
    let (resp, sizes) = read_response(&mut p, 2);
    assert_eq!(sizes.len(), 1);
    let (list, werr) = decode_enum1(&resp);
    assert_eq!(werr, 0);
    assert_eq!(
        list,
        vec![("data".into(), 0, "Main data".into()), ("IPC$".into(), 0x8000_0003, "IPC Service".into()), ("Données📁".into(), 0, String::new()),]
    );
}

#[test]
fn share_enum_other_levels_parse_fully() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = bound(&ctx, 4280);
    for (i, level) in [0u32, 2, 501, 502, 7].into_iter().enumerate() {
        let call = 10 + i as u32;
        p.write(&request_pdu(call, 3, 0, 15, 0, &enum_all_stub(level, false)), &ctx).unwrap();
        let (stub, _) = read_response(&mut p, call);
        let mut r = R(&stub, 0);
        assert_eq!(r.u32(), level);
        assert_eq!(r.u32(), level);
        if level == 7 {
            assert_eq!(r.u32(), 3); // TotalEntries
            assert_eq!(r.u32(), 0); // no resume handle
            assert_eq!(r.u32(), 0x7c);
            r.done();
            continue;
        }
        assert_ne!(r.u32(), 0);
        assert_eq!(r.u32(), 3);
        assert_ne!(r.u32(), 0);
        assert_eq!(r.u32(), 3);
        let (fixed_words, strings) = match level {
            0 => (1, 1),
            501 => (4, 2),
            2 => (8, 3),
            _ => (10, 3),
        };
        for _ in 0..3 * fixed_words {
            r.u32();
        }
        let mut names = Vec::new();
        for _ in 0..3 {
            names.push(r.wstr());
            for _ in 1..strings {
                r.wstr();
            }
        }
        assert_eq!(names, ["data", "IPC$", "Données📁"]);
        assert_eq!(r.u32(), 3);
        assert_eq!(r.u32(), 0, "NULL resume handle echoed");
        assert_eq!(r.u32(), 0);
        r.done();
    }
}

#[test]
fn share_get_info_and_server_get_info() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = bound(&ctx, 4280);

    let mut w = W::default();
    w.u32(0x0002_0000).wstr("\\\\braid").wstr("ipc$").u32(1);
    p.write(&request_pdu(2, 3, 0, 16, 0, &w.0), &ctx).unwrap();
    let (stub, _) = read_response(&mut p, 2);
    let mut r = R(&stub, 0);
    assert_eq!(r.u32(), 1);
    assert_ne!(r.u32(), 0);
    r.u32();
    assert_eq!(r.u32(), 0x8000_0003);
    r.u32();
    assert_eq!(r.wstr(), "IPC$");
    assert_eq!(r.wstr(), "IPC Service");
    assert_eq!(r.u32(), 0);
    r.done();

    let mut w = W::default();
    w.u32(0).wstr("nope").u32(1);
    p.write(&request_pdu(3, 3, 0, 16, 0, &w.0), &ctx).unwrap();
    let (stub, _) = read_response(&mut p, 3);
    let mut r = R(&stub, 0);
    assert_eq!((r.u32(), r.u32(), r.u32()), (1, 0, 0x906));
    r.done();

    let mut w = W::default();
    w.u32(0x0002_0000).wstr("\\\\braid").u32(101);
    p.write(&request_pdu(4, 3, 0, 21, 0, &w.0), &ctx).unwrap();
    let (stub, _) = read_response(&mut p, 4);
    let mut r = R(&stub, 0);
    assert_eq!(r.u32(), 101);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 500);
    assert_ne!(r.u32(), 0);
    assert_eq!((r.u32(), r.u32(), r.u32()), (10, 0, 0x9003));
    assert_ne!(r.u32(), 0);
    assert_eq!(r.wstr(), "BRAID");
    assert_eq!(r.wstr(), "Braid SMB");
    assert_eq!(r.u32(), 0);
    r.done();
}

#[test]
fn wkssvc_get_info_100() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = Pipe::new(pipe_kind("\\PIPE\\wkssvc").unwrap());
    let ndr: &[Syn] = &[NDR];
    p.write(&bind_pdu(11, 1, 4280, 4280, &[(0, WKSSVC, ndr)]), &ctx).unwrap();
    let (ack, _) = p.read(4280);
    assert_eq!(&ack[26..39], b"\\PIPE\\wkssvc\0");
    assert_eq!(le16(&ack, 44), 0);
    let mut w = W::default();
    w.u32(0x0002_0000).wstr("\\\\braid").u32(100);
    p.write(&request_pdu(2, 3, 0, 0, 0, &w.0), &ctx).unwrap();
    let (stub, _) = read_response(&mut p, 2);
    let mut r = R(&stub, 0);
    assert_eq!(r.u32(), 100);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 500);
    r.u32();
    r.u32();
    assert_eq!((r.u32(), r.u32()), (10, 0));
    assert_eq!(r.wstr(), "BRAID");
    assert_eq!(r.wstr(), "WORKGROUP");
    assert_eq!(r.u32(), 0);
    r.done();
}

#[test]
fn faults_are_in_band() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    // Request before bind.
    let mut p = Pipe::new(PipeKind::Srvsvc);
    p.write(&request_pdu(1, 3, 0, 15, 0, &enum_all_stub(1, true)), &ctx).unwrap();
    assert_eq!(read_fault(&mut p), 0x1c01_000b);

    let mut p = bound(&ctx, 4280);
    p.write(&request_pdu(2, 3, 0, 99, 0, &[]), &ctx).unwrap();
    assert_eq!(read_fault(&mut p), 0x1c01_0002);
    // Truncated stub.
    let stub = enum_all_stub(1, true);
    p.write(&request_pdu(3, 3, 0, 15, 0, &stub[..20]), &ctx).unwrap();
    assert_eq!(read_fault(&mut p), 0x6f7);
    // Discriminant mismatch.
    let mut w = W::default();
    w.u32(0).u32(1).u32(2).u32(0).u32(u32::MAX).u32(0);
    p.write(&request_pdu(4, 3, 0, 15, 0, &w.0), &ctx).unwrap();
    assert_eq!(read_fault(&mut p), 0x6f7);
    // Still usable afterwards.
    p.write(&request_pdu(5, 3, 0, 15, 0, &stub), &ctx).unwrap();
    assert_eq!(decode_enum1(&read_response(&mut p, 5).0).0.len(), 3);
    // Big-endian bind gets a bind_nak.
    let mut q = Pipe::new(PipeKind::Srvsvc);
    let ndr: &[Syn] = &[NDR];
    let mut be = bind_pdu(11, 1, 4280, 4280, &[(0, SRVSVC, ndr)]);
    be[4] = 0x00;
    let len = be.len() as u16;
    be[8..10].copy_from_slice(&len.to_be_bytes());
    q.write(&be, &ctx).unwrap();
    assert_eq!(q.read(4280).0[2], 13);
}

#[test]
fn large_response_fragments_and_read_chunking() {
    let sh: Vec<ShareInfo> =
        (0..200).map(|i| ShareInfo { name: format!("share{i:03}"), share_type: STYPE_DISKTREE, comment: format!("comment number {i}") }).collect();
    let sv = server();
    let ctx = RpcContext { shares: &sh, server: &sv };
    // Client can receive at most 1500-byte fragments.
    let mut p = bound(&ctx, 1500);
    let stub = enum_all_stub(1, true);
    p.write(&request_pdu(7, 3, 0, 15, 0, &stub), &ctx).unwrap();

    // First fragment through a small READ: chunked with more_pending.
    let mut first = Vec::new();
    loop {
        let (chunk, more) = p.read(100);
        assert!(chunk.len() <= 100);
        first.extend_from_slice(&chunk);
        if !more {
            break;
        }
    }
    assert_eq!(le16(&first, 8) as usize, first.len());
    assert!(first.len() <= 1500);
    assert_eq!(first[3] & 3, 1, "FIRST only");
    let total_hint = le32(&first, 16) as usize;
    let mut full = first[24..].to_vec();
    let (rest, sizes) = read_response_cont(&mut p);
    full.extend_from_slice(&rest);
    assert_eq!(full.len(), total_hint);
    assert!(sizes.len() >= 10);
    assert!(sizes.iter().all(|&s| s <= 1500));
    assert!(!p.has_output());
    let (list, werr) = decode_enum1(&full);
    assert_eq!(werr, 0);
    assert_eq!(list.len(), 200);
    assert_eq!(list[199].0, "share199");
    assert_eq!(list[42].2, "comment number 42");
}

/// Reads non-first fragments until LAST.
fn read_response_cont(p: &mut Pipe) -> (Vec<u8>, Vec<usize>) {
    let mut stub = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let (pdu, more) = p.read(1 << 16);
        assert!(!more);
        assert_eq!(pdu[2], 2);
        assert_eq!(pdu[3] & 1, 0);
        stub.extend_from_slice(&pdu[24..]);
        sizes.push(pdu.len());
        if pdu[3] & 2 != 0 {
            return (stub, sizes);
        }
    }
}

#[test]
fn fragmented_request_and_byte_at_a_time_input() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let mut p = bound(&ctx, 4280);
    let stub = enum_all_stub(1, true);
    let (a, b) = stub.split_at(13);
    let mut bytes = request_pdu(9, 1, 0, 15, stub.len() as u32, a);
    bytes.extend(request_pdu(9, 2, 0, 15, b.len() as u32, b));
    for byte in &bytes {
        p.write(std::slice::from_ref(byte), &ctx).unwrap();
    }
    let (resp, _) = read_response(&mut p, 9);
    assert_eq!(decode_enum1(&resp).0.len(), 3);
}

#[test]
fn malformed_headers_are_errors() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let good = request_pdu(1, 3, 0, 15, 0, &[]);

    // Truncated header: just buffered.
    let mut p = Pipe::new(PipeKind::Srvsvc);
    p.write(&good[..10], &ctx).unwrap();
    assert!(!p.has_output());

    let mut short = good.clone();
    short[8..10].copy_from_slice(&8u16.to_le_bytes());
    let mut p = Pipe::new(PipeKind::Srvsvc);
    assert_eq!(p.write(&short, &ctx), Err(RpcError::FragTooShort(8)));
    assert_eq!(p.write(&good, &ctx), Err(RpcError::Broken));

    let mut huge = good.clone();
    huge[8..10].copy_from_slice(&0xffffu16.to_le_bytes());
    let mut p = Pipe::new(PipeKind::Srvsvc);
    assert!(matches!(p.write(&huge, &ctx), Err(RpcError::FragTooLarge(0xffff, _))));

    let mut auth = good.clone();
    auth[10..12].copy_from_slice(&8u16.to_le_bytes());
    let mut p = Pipe::new(PipeKind::Srvsvc);
    assert_eq!(p.write(&auth, &ctx), Err(RpcError::AuthNotSupported(8)));

    let mut ver = good.clone();
    ver[0] = 4;
    let mut p = Pipe::new(PipeKind::Srvsvc);
    assert_eq!(p.write(&ver, &ctx), Err(RpcError::BadVersion(4, 0)));

    // Bind whose body is shorter than its context count claims.
    let ndr: &[Syn] = &[NDR];
    let mut bind = bind_pdu(11, 1, 4280, 4280, &[(0, SRVSVC, ndr)]);
    bind[24] = 9;
    let mut p = Pipe::new(PipeKind::Srvsvc);
    assert!(matches!(p.write(&bind, &ctx), Err(RpcError::Malformed(_))));

    // Input cap.
    let mut p = Pipe::new(PipeKind::Srvsvc);
    assert_eq!(p.write(&vec![0u8; (1 << 20) + 1], &ctx), Err(RpcError::InputTooLarge));

    // Non-first fragment with no call in progress.
    let mut p = bound(&ctx, 4280);
    assert!(p.write(&request_pdu(3, 2, 0, 15, 0, &[]), &ctx).is_err());
}

#[test]
fn garbage_never_panics() {
    let (sh, sv) = (shares(), server());
    let ctx = RpcContext { shares: &sh, server: &sv };
    let ndr: &[Syn] = &[NDR, NDR64];
    let mut seed_pdus = bind_pdu(11, 1, 4280, 1432, &[(0, SRVSVC, ndr)]);
    seed_pdus.extend(request_pdu(2, 3, 0, 15, 0, &enum_all_stub(1, true)));
    let mut w = W::default();
    w.u32(0x0002_0000).wstr("\\\\b").wstr("data").u32(502);
    seed_pdus.extend(request_pdu(3, 3, 0, 16, 0, &w.0));
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut rnd = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..5000 {
        let mut data = seed_pdus.clone();
        for _ in 0..(rnd() % 6) {
            let i = (rnd() as usize) % data.len();
            data[i] = rnd() as u8;
        }
        let cut = (rnd() as usize) % (data.len() + 1);
        let mut p = Pipe::new(PipeKind::Srvsvc);
        let _ = p.write(&data[..cut], &ctx);
        let _ = p.write(&data[cut..], &ctx);
        while p.has_output() {
            let _ = p.read(997);
        }
    }
}
