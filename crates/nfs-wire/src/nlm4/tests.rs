use super::*;
use crate::xdr::testing::{encode, round_trip};
use crate::xdr::{XdrError, XdrReader};

fn lock() -> Nlm4Lock {
    Nlm4Lock {
        caller_name: b"client".as_slice().into(),
        fh: vec![1, 2, 3, 4, 5, 6, 7, 8].into(),
        oh: b"1234@client".as_slice().into(),
        svid: 1234,
        l_offset: 0x1_0000_0000,
        l_len: 0,
    }
}

fn every_args() -> Vec<Nlm4Args> {
    let cookie: Netobj = vec![1, 0, 0, 0].into();
    let test = Nlm4TestArgs { cookie: cookie.clone(), exclusive: true, alock: lock() };
    let lockargs = Nlm4LockArgs { cookie: cookie.clone(), block: true, exclusive: false, alock: lock(), reclaim: true, state: 3 };
    let canc = Nlm4CancArgs { cookie: cookie.clone(), block: false, exclusive: true, alock: lock() };
    let unlock = Nlm4UnlockArgs { cookie: cookie.clone(), alock: lock() };
    let holder = Nlm4Holder { exclusive: true, svid: -1, oh: b"9@other".as_slice().into(), l_offset: u64::MAX, l_len: 1 };
    let testres = Nlm4TestRes { cookie: cookie.clone(), stat: Nlm4TestRply::Denied(holder) };
    let res = Nlm4Res { cookie: cookie.clone(), stat: Nlm4Stats::DeniedGracePeriod };
    let share =
        Nlm4Share { caller_name: b"c".as_slice().into(), fh: vec![9; 64].into(), oh: Netobj::default(), mode: Fsh4Mode::Dw, access: Fsh4Access::Rw };
    let shareargs = Nlm4ShareArgs { cookie, share, reclaim: false };
    let notify = Nlm4Notify { name: b"client.example".as_slice().into(), state: 7 };
    use Nlm4Args as A;
    vec![
        A::Null,
        A::Test(test.clone()),
        A::Lock(lockargs.clone()),
        A::Cancel(canc.clone()),
        A::Unlock(unlock.clone()),
        A::Granted(test.clone()),
        A::TestMsg(test.clone()),
        A::LockMsg(lockargs.clone()),
        A::CancelMsg(canc),
        A::UnlockMsg(unlock),
        A::GrantedMsg(test),
        A::TestRes(testres),
        A::LockRes(res.clone()),
        A::CancelRes(res.clone()),
        A::UnlockRes(res.clone()),
        A::GrantedRes(res),
        A::Share(shareargs.clone()),
        A::Unshare(shareargs),
        A::NmLock(lockargs),
        A::FreeAll(notify),
    ]
}

#[test]
fn every_procedures_args_round_trip() {
    let all = every_args();
    assert_eq!(all.len(), 20);
    for a in &all {
        let p = a.proc_();
        assert_eq!(Nlm4Proc::from_u32(p as u32), Some(p));
        let bytes = encode(|w| a.encode(w));
        let mut r = XdrReader::new(&bytes);
        assert_eq!(Nlm4Args::decode(p, &mut r).as_ref(), Ok(a));
        assert_eq!(r.remaining(), 0);
        for n in 0..bytes.len() {
            assert!(Nlm4Args::decode(p, &mut XdrReader::new(&bytes[..n])).is_err(), "{p}: prefix {n}");
        }
    }
    for p in [16, 17, 18, 19, 24] {
        assert_eq!(Nlm4Proc::from_u32(p), None);
    }
}

#[test]
fn results_round_trip() {
    let cookie: Netobj = vec![0xaa; 5].into();
    for s in 0..10 {
        let stat = Nlm4Stats::from_u32(s).unwrap();
        round_trip(&Nlm4Res { cookie: cookie.clone(), stat });
        round_trip(&Nlm4ShareRes { cookie: cookie.clone(), stat, sequence: -5 });
        if stat != Nlm4Stats::Denied {
            let res = Nlm4TestRes { cookie: cookie.clone(), stat: Nlm4TestRply::Stat(stat) };
            assert_eq!(res.stat.status(), stat);
            round_trip(&res);
        }
    }
    let holder = Nlm4Holder { exclusive: false, svid: 42, oh: b"42@h".as_slice().into(), l_offset: 10, l_len: 20 };
    let bytes = round_trip(&Nlm4TestRes { cookie: Netobj::default(), stat: Nlm4TestRply::Denied(holder) });
    #[rustfmt::skip]
    assert_eq!(bytes, [
        0, 0, 0, 0, // cookie: empty
        0, 0, 0, 1, // NLM4_DENIED
        0, 0, 0, 0, // exclusive: false
        0, 0, 0, 42, // svid
        0, 0, 0, 4, b'4', b'2', b'@', b'h', // oh
        0, 0, 0, 0, 0, 0, 0, 10, // l_offset
        0, 0, 0, 0, 0, 0, 0, 20, // l_len
    ]);
    assert_eq!(Nlm4Stats::decode(&mut XdrReader::new(&[0, 0, 0, 10])), Err(XdrError::BadValue(10)));
    assert_eq!(Fsh4Mode::from_u32(4), None);
    assert_eq!(Fsh4Access::from_u32(4), None);
}

/// An NLM4_LOCK call's arguments as Linux's lockd client lays them out: a 4-byte cookie
/// from its counter (host order), the owner handle "pid@nodename", svid the pid, and a
/// lock to the end of the file as length 0.
#[test]
fn decodes_a_linux_lock_call() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0, 0, 0, 4, 0x05, 0, 0, 0, // cookie
        0, 0, 0, 1, // block
        0, 0, 0, 1, // exclusive
        0, 0, 0, 6, b'c', b'l', b'i', b'e', b'n', b't', 0, 0, // caller_name
        0, 0, 0, 8, 1, 0, 0, 0, 0x2a, 0, 0, 0, // fh
        0, 0, 0, 11, b'1', b'2', b'3', b'4', b'@', b'c', b'l', b'i', b'e', b'n', b't', 0, // oh
        0, 0, 0x04, 0xd2, // svid 1234
        0, 0, 0, 0, 0, 0, 0x10, 0, // l_offset 4096
        0, 0, 0, 0, 0, 0, 0, 0, // l_len: to the end
        0, 0, 0, 0, // reclaim
        0, 0, 0, 3, // NSM state
    ];
    let args = Nlm4Args::decode(Nlm4Proc::from_u32(2).unwrap(), &mut XdrReader::new(bytes)).unwrap();
    let expect = Nlm4LockArgs {
        cookie: vec![5, 0, 0, 0].into(),
        block: true,
        exclusive: true,
        alock: Nlm4Lock {
            caller_name: b"client".as_slice().into(),
            fh: vec![1, 0, 0, 0, 0x2a, 0, 0, 0].into(),
            oh: b"1234@client".as_slice().into(),
            svid: 1234,
            l_offset: 4096,
            l_len: 0,
        },
        reclaim: false,
        state: 3,
    };
    assert_eq!(args, Nlm4Args::Lock(expect));
    assert_eq!(encode(|w| args.encode(w)), bytes);
}

#[test]
fn over_long_items_are_refused_before_allocation() {
    // A netobj claiming 1025 bytes, followed by enough bytes that only the limit refuses it.
    let mut cookie = vec![0, 0, 4, 1];
    cookie.resize(4 + 1028, 0);
    assert_eq!(Nlm4Res::decode(&mut XdrReader::new(&cookie)), Err(XdrError::TooLong { len: 1025, max: MAXNETOBJ_SZ }));
    // A caller name of 1025 bytes after an empty cookie and two booleans.
    let mut test = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 4, 1];
    test.resize(12 + 1028, b'a');
    assert_eq!(Nlm4TestArgs::decode(&mut XdrReader::new(&test)), Err(XdrError::TooLong { len: 1025, max: LM_MAXSTRLEN }));
    // FREE_ALL's name may be one byte longer than a caller name, no more.
    let mut name = vec![0, 0, 4, 1];
    name.resize(4 + 1028, b'h');
    name.extend_from_slice(&[0, 0, 0, 9]);
    let n = Nlm4Notify::decode(&mut XdrReader::new(&name)).unwrap();
    assert_eq!((n.name.as_bytes().len(), n.state), (1025, 9));
    name[3] = 2;
    assert_eq!(Nlm4Notify::decode(&mut XdrReader::new(&name)), Err(XdrError::TooLong { len: 1026, max: LM_MAXNAMELEN }));
    // A length word of 4 GiB with nothing after it: an error, not an allocation.
    assert_eq!(Nlm4Res::decode(&mut XdrReader::new(&[0xff, 0xff, 0xff, 0xff])), Err(XdrError::TooLong { len: u32::MAX, max: MAXNETOBJ_SZ }));
    let at_limit = Nlm4Res { cookie: vec![7; 1024].into(), stat: Nlm4Stats::Granted };
    round_trip(&at_limit);
    // A boolean that is neither 0 nor 1.
    assert_eq!(Nlm4TestArgs::decode(&mut XdrReader::new(&[0, 0, 0, 0, 0, 0, 0, 2])), Err(XdrError::BadValue(2)));
}
