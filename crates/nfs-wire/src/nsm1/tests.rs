use super::*;
use crate::xdr::testing::{encode, round_trip};
use crate::xdr::{XdrError, XdrReader};

fn my_id() -> MyId {
    MyId { my_name: b"localhost".as_slice().into(), my_prog: 100_021, my_vers: 4, my_proc: 16 }
}

#[test]
fn every_procedures_args_round_trip() {
    let mon_id = MonId { mon_name: b"client".as_slice().into(), my_id: my_id() };
    let all = [
        SmArgs::Null,
        SmArgs::Stat(SmName { mon_name: b"server".as_slice().into() }),
        SmArgs::Mon(Mon { mon_id: mon_id.clone(), priv_: [3; SM_PRIV_SZ] }),
        SmArgs::Unmon(mon_id),
        SmArgs::UnmonAll(my_id()),
        SmArgs::SimuCrash,
        SmArgs::Notify(StatChge { mon_name: b"client".as_slice().into(), state: 5 }),
    ];
    for a in &all {
        let p = a.proc_();
        assert_eq!(SmProc::from_u32(p as u32), Some(p));
        let bytes = encode(|w| a.encode(w));
        let mut r = XdrReader::new(&bytes);
        assert_eq!(SmArgs::decode(p, &mut r).as_ref(), Ok(a));
        assert_eq!(r.remaining(), 0);
        for n in 0..bytes.len() {
            assert!(SmArgs::decode(p, &mut XdrReader::new(&bytes[..n])).is_err(), "{p}: prefix {n}");
        }
    }
    assert_eq!(SmProc::from_u32(7), None);
}

#[test]
fn results_and_callback_round_trip() {
    assert_eq!(round_trip(&SmStatRes { res_stat: SmRes::StatFail, state: 3 }), [0, 0, 0, 1, 0, 0, 0, 3]);
    round_trip(&SmStatRes { res_stat: SmRes::StatSucc, state: -1 });
    assert_eq!(round_trip(&SmStat { state: 17 }), [0, 0, 0, 17]);
    let priv_: [u8; 16] = std::array::from_fn(|i| i as u8);
    let bytes = round_trip(&Status { mon_name: b"host1".as_slice().into(), state: 9, priv_ });
    #[rustfmt::skip]
    assert_eq!(bytes[..16], [0, 0, 0, 5, b'h', b'o', b's', b't', b'1', 0, 0, 0, 0, 0, 0, 9]);
    assert_eq!(bytes[16..], priv_);
    assert_eq!(SmRes::decode(&mut XdrReader::new(&[0, 0, 0, 2])), Err(XdrError::BadValue(2)));
}

/// SM_MON as a lock manager sends it to its local statd: watch "client", call back
/// NLM version 4 procedure 16 on this host with the 16 private bytes.
#[test]
fn decodes_a_hand_built_sm_mon() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        0, 0, 0, 6, b'c', b'l', b'i', b'e', b'n', b't', 0, 0, // mon_name
        0, 0, 0, 9, b'l', b'o', b'c', b'a', b'l', b'h', b'o', b's', b't', 0, 0, 0, // my_name
        0, 1, 0x86, 0xb5, // my_prog 100021
        0, 0, 0, 4, // my_vers
        0, 0, 0, 16, // my_proc
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // priv: no length, no padding
    ];
    let args = SmArgs::decode(SmProc::Mon, &mut XdrReader::new(bytes)).unwrap();
    let expect = Mon { mon_id: MonId { mon_name: b"client".as_slice().into(), my_id: my_id() }, priv_: std::array::from_fn(|i| i as u8 + 1) };
    assert_eq!(args, SmArgs::Mon(expect));
    assert_eq!(encode(|w| args.encode(w)), bytes);
}

#[test]
fn over_long_names_are_refused() {
    let mut name = vec![0, 0, 4, 1];
    name.resize(4 + 1028, b'a');
    assert_eq!(SmName::decode(&mut XdrReader::new(&name)), Err(XdrError::TooLong { len: 1025, max: SM_MAXSTRLEN }));
    assert_eq!(StatChge::decode(&mut XdrReader::new(&name)), Err(XdrError::TooLong { len: 1025, max: SM_MAXSTRLEN }));
    name[3] = 0;
    name.truncate(4 + 1024);
    name.extend_from_slice(&[0, 0, 0, 1]);
    assert_eq!(StatChge::decode(&mut XdrReader::new(&name)).map(|s| (s.mon_name.as_bytes().len(), s.state)), Ok((1024, 1)));
    assert_eq!(SmName::decode(&mut XdrReader::new(&[0x80, 0, 0, 0])), Err(XdrError::TooLong { len: 0x8000_0000, max: SM_MAXSTRLEN }));
}
