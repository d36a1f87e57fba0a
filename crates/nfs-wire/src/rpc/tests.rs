use super::*;

fn sys_call() -> CallHeader {
    let sys = AuthSys { stamp: 0x11, machine_name: b"host1".to_vec(), uid: 1000, gid: 100, gids: vec![100, 4] };
    CallHeader { xid: 0xdead_beef, prog: PROG_NFS, vers: 3, proc_: 1, cred: Auth::Sys(sys), verf: Auth::None }
}

#[test]
fn call_layout_byte_by_byte() {
    let mut out = Vec::new();
    encode_call(&sys_call(), &mut out);
    #[rustfmt::skip]
    let expect: Vec<u8> = vec![
        0xde, 0xad, 0xbe, 0xef, // xid
        0, 0, 0, 0, // CALL
        0, 0, 0, 2, // rpcvers
        0, 1, 0x86, 0xa3, // 100003
        0, 0, 0, 3, // vers
        0, 0, 0, 1, // GETATTR
        0, 0, 0, 1, // AUTH_SYS
        0, 0, 0, 36, // body length
        0, 0, 0, 0x11, // stamp
        0, 0, 0, 5, b'h', b'o', b's', b't', b'1', 0, 0, 0, // machine name
        0, 0, 3, 0xe8, // uid 1000
        0, 0, 0, 100, // gid
        0, 0, 0, 2, 0, 0, 0, 100, 0, 0, 0, 4, // gids
        0, 0, 0, 0, 0, 0, 0, 0, // verifier AUTH_NONE
    ];
    assert_eq!(out, expect);
    out.extend_from_slice(&[1, 2, 3, 4]);
    let (hdr, args) = decode_call(&out).unwrap();
    assert_eq!(hdr, sys_call());
    assert_eq!(args, [1, 2, 3, 4]);
}

#[test]
fn every_truncated_call_errors() {
    let mut out = Vec::new();
    encode_call(&sys_call(), &mut out);
    for n in 0..out.len() {
        assert!(decode_call(&out[..n]).is_err(), "prefix {n}");
    }
}

#[test]
fn call_errors_say_how_to_answer() {
    let mut out = Vec::new();
    encode_call(&sys_call(), &mut out);
    let mut v = out.clone();
    v[11] = 3;
    assert_eq!(decode_call(&v), Err(RpcError::RpcMismatch { xid: 0xdead_beef, vers: 3 }));
    let mut v = out.clone();
    v[7] = 1;
    assert_eq!(decode_call(&v), Err(RpcError::WrongDirection { xid: 0xdead_beef }));
    // 17 gids: over the AUTH_SYS limit.
    let mut v = out.clone();
    v[59] = 17;
    assert_eq!(decode_call(&v), Err(RpcError::BadCred { xid: 0xdead_beef }));
    // Credential body longer than its AUTH_SYS content.
    let mut v = out[..28].to_vec();
    v.extend_from_slice(&[0, 0, 0, 40]);
    v.extend_from_slice(&out[32..68]);
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(&out[68..]);
    assert_eq!(decode_call(&v), Err(RpcError::BadCred { xid: 0xdead_beef }));
}

#[test]
fn other_flavors_keep_their_number() {
    let hdr = CallHeader { xid: 1, prog: PROG_MOUNT, vers: 3, proc_: 0, cred: Auth::Other(RPCSEC_GSS), verf: Auth::None };
    let mut out = Vec::new();
    encode_call(&hdr, &mut out);
    assert_eq!(decode_call(&out).unwrap().0, hdr);
}

#[test]
fn accepted_replies_layout_and_round_trip() {
    let mut out = Vec::new();
    encode_accepted(7, AcceptStat::Success, &mut out);
    assert_eq!(out, [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(decode_reply(&out), Ok((7, Ok(&[0u8, 0, 0, 0][..]))));
    let cases = [
        (AcceptStat::ProgUnavail, ReplyError::ProgUnavail),
        (AcceptStat::ProgMismatch { low: 3, high: 3 }, ReplyError::ProgMismatch { low: 3, high: 3 }),
        (AcceptStat::ProcUnavail, ReplyError::ProcUnavail),
        (AcceptStat::GarbageArgs, ReplyError::GarbageArgs),
        (AcceptStat::SystemErr, ReplyError::SystemErr),
    ];
    for (stat, err) in cases {
        let mut out = Vec::new();
        encode_accepted(9, stat, &mut out);
        assert_eq!(decode_reply(&out), Ok((9, Err(err))));
        for n in 0..out.len() {
            assert!(decode_reply(&out[..n]).is_err());
        }
    }
}

#[test]
fn denied_replies_layout_and_round_trip() {
    let mut out = Vec::new();
    encode_denied(5, RejectStat::AuthError(AuthStat::TooWeak), &mut out);
    assert_eq!(out, [0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5]);
    assert_eq!(decode_reply(&out), Ok((5, Err(ReplyError::AuthError(AuthStat::TooWeak)))));
    let mut out = Vec::new();
    encode_denied(6, RejectStat::RpcMismatch { low: 2, high: 2 }, &mut out);
    assert_eq!(out, [0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2]);
    assert_eq!(decode_reply(&out), Ok((6, Err(ReplyError::RpcMismatch { low: 2, high: 2 }))));
}
