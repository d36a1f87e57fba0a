//! The reader's framing (`smb_wire::read_ahead`) on arbitrary byte streams arriving in
//! arbitrary pieces: every frame comes out exactly as a straight parse of the stream gives
//! it, whatever the read-ahead capacity, receive sizes and limits.
#![no_main]
use libfuzzer_sys::fuzz_target;
use smb_wire::frame::frame_len;
use smb_wire::read_ahead::ReadAhead;

const CAP: usize = 1 << 16;

/// Frames of `stream` parsed in one go: the reference.
fn straight(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= stream.len() {
        let Ok(len) = frame_len(stream[at..at + 4].try_into().unwrap(), CAP) else { break };
        if at + 4 + len > stream.len() {
            break;
        }
        out.push(stream[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (knobs, stream) = data.split_at(2);
    let mut ra = ReadAhead::with_capacity(4 + usize::from(knobs[0]) * 64);
    let mut rng = u32::from(knobs[1]) | 1;
    let mut next = |m: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        rng as usize % m
    };
    let mut at = 0; // stream bytes "received" so far
    let mut got = Vec::new();
    'frames: loop {
        let prefix = loop {
            if let Some(p) = ra.take_prefix() {
                break p;
            }
            if at == stream.len() {
                break 'frames;
            }
            if next(4) == 0 {
                ra.limit_next(next(200));
            }
            let spare = ra.spare();
            assert!(!spare.is_empty());
            let n = spare.len().min(stream.len() - at).min(1 + next(3000));
            spare[..n].copy_from_slice(&stream[at..at + n]);
            ra.filled(n);
            at += n;
        };
        let Ok(len) = frame_len(prefix, CAP) else { break };
        let mut frame = ra.take_frame(len).to_vec();
        // The rest comes straight from the "socket".
        let rest = (len - frame.len()).min(stream.len() - at);
        frame.extend_from_slice(&stream[at..at + rest]);
        at += rest;
        if frame.len() < len {
            break;
        }
        got.push(frame);
    }
    assert_eq!(got, straight(stream));
});
