//! RPC record marking (`nfs_wire::record`) on arbitrary byte streams arriving in arbitrary
//! pieces: the records and the error (if any) are exactly those of a straight parse of the
//! whole stream, and no record exceeds the limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nfs_wire::record::{RecordError, RecordReader};

/// Records of `stream` parsed in one go, and whether the stream went bad: the reference.
fn straight(stream: &[u8], max: u32) -> (Vec<Vec<u8>>, bool) {
    let (mut out, mut rec, mut empties, mut at) = (Vec::new(), Vec::new(), 0, 0);
    while at + 4 <= stream.len() {
        let h = u32::from_be_bytes([stream[at], stream[at + 1], stream[at + 2], stream[at + 3]]);
        let (len, last) = ((h & 0x7fff_ffff) as usize, h >> 31 == 1);
        if rec.len() + len > max as usize {
            return (out, true);
        }
        if at + 4 + len > stream.len() {
            break;
        }
        if len == 0 && !last {
            empties += 1;
            if empties > 8 {
                return (out, true);
            }
        }
        rec.extend_from_slice(&stream[at + 4..at + 4 + len]);
        at += 4 + len;
        if last {
            out.push(std::mem::take(&mut rec));
            empties = 0;
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (knobs, stream) = data.split_at(2);
    let max = u32::from(knobs[0]) * 16;
    let step = usize::from(knobs[1]).max(1);
    let mut rr = RecordReader::new(max);
    let (mut got, mut bad) = (Vec::new(), false);
    'feed: for piece in stream.chunks(step) {
        rr.feed(piece);
        loop {
            match rr.next_record() {
                Ok(Some(rec)) => {
                    assert!(rec.len() <= max as usize);
                    got.push(rec.to_vec());
                }
                Ok(None) => break,
                Err(RecordError::TooLong { .. } | RecordError::EmptyFragments) => {
                    bad = true;
                    break 'feed;
                }
            }
        }
    }
    assert_eq!((got, bad), straight(stream, max));
});
