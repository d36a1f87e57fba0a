//! Keeps the answers to a connection's later requests behind the break notifications its
//! earlier requests send.
//!
//! Requests of one connection run as tasks of their own, so a CREATE sent right after a
//! rename could be answered before the rename's task has even looked at the file. A
//! client that sends the rename and then the CREATE expects the rename's lease break to
//! arrive first (smbtorture `smb2.lease.rename_wait` copies the lease key out of the break
//! it must have seen by the time the CREATE is answered), as it does from a server that
//! works through a connection's requests in order. So each frame holding a SET_INFO
//! (rename, delete disposition: the requests that break handle caching and wait), or an
//! encrypted one, which cannot be looked into before its task decrypts it, holds its place
//! from arrival until it has sent its breaks: it goes async (breaks are sent before the wait
//! that makes a request async) or finishes. CREATEs do not hold their place: a client's
//! threads share one connection, and holding every answer behind the slowest earlier open
//! cost the open/close mix 10% (BENCHMARKS.md has no such loss now); a CREATE that breaks
//! sends its break before its own interim answer, which is what clients wait on.
//! An answer waits only while a frame that arrived before it still holds its place; a
//! connection of READs and WRITEs never waits (one atomic load per frame).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use smb_wire::header::offset;
use smb_wire::Command;
use tokio::sync::Notify;

use crate::sync::lock;

/// The longest an answer waits for an earlier frame's breaks. A frame holds its place
/// only until its breaks are sent, which takes no I/O; this bound keeps a missed release
/// from stalling a connection, and says so in the log.
const MAX_WAIT: Duration = Duration::from_secs(2);

/// The frames of one connection that may still send breaks, by arrival number.
#[derive(Debug, Default)]
pub(crate) struct BreakOrder {
    held: Mutex<BTreeSet<u64>>,
    count: AtomicUsize,
    passed: Notify,
}

impl BreakOrder {
    /// Frame `seq` (numbered by arrival) holds its place until [`BreakOrder::pass`].
    pub(crate) fn hold(&self, seq: u64) {
        if lock(&self.held).insert(seq) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Frame `seq` has sent whatever breaks it sends (or holds no place); answers behind it
    /// may go. Idempotent.
    pub(crate) fn pass(&self, seq: u64) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        if lock(&self.held).remove(&seq) {
            self.count.fetch_sub(1, Ordering::AcqRel);
            self.passed.notify_waiters();
        }
    }

    /// Waits until no frame that arrived before `seq` holds its place (at most
    /// [`MAX_WAIT`]).
    pub(crate) async fn wait_before(&self, seq: u64, conn: u64) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let deadline = tokio::time::Instant::now() + MAX_WAIT;
        loop {
            // Subscribe before looking, so a pass between the two is not missed.
            let passed = self.passed.notified();
            tokio::pin!(passed);
            passed.as_mut().enable();
            if !self.earlier_held(seq) {
                return;
            }
            if tokio::time::timeout_at(deadline, passed).await.is_err() {
                tracing::warn!(conn, seq, "an earlier request did not pass its breaks in time; answering anyway");
                return;
            }
        }
    }

    fn earlier_held(&self, seq: u64) -> bool {
        lock(&self.held).first().is_some_and(|&first| first < seq)
    }
}

/// Passes frame `seq`'s place when dropped, so every way out of a frame's processing
/// (a dropped connection included) lets the answers behind it go.
pub(crate) struct Place<'a>(pub(crate) &'a BreakOrder, pub(crate) u64);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.pass(self.1);
    }
}

/// Whether a received frame (SMB2 header first, transport header stripped) may send break
/// notifications before it answers: it holds a SET_INFO, or is encrypted.
pub(crate) fn may_break(frame: &[u8]) -> bool {
    if crate::transform::is_encrypted(frame) {
        return true;
    }
    holds_breaking_command(frame)
}

/// Whether a plain (decrypted) compound holds a SET_INFO.
pub(crate) fn holds_breaking_command(frame: &[u8]) -> bool {
    let mut pos = 0usize;
    // A compound of N messages takes N steps; a malformed chain stops the walk.
    while let Some(h) = frame.get(pos..pos + 64) {
        if h[..4] != smb_wire::header::PROTOCOL_ID {
            return false;
        }
        let cmd = u16::from_le_bytes([h[offset::COMMAND], h[offset::COMMAND + 1]]);
        if cmd == Command::SetInfo as u16 {
            return true;
        }
        let next = u32::from_le_bytes(h[offset::NEXT_COMMAND..offset::NEXT_COMMAND + 4].try_into().unwrap_or_default());
        if next < 64 {
            return false;
        }
        pos += next as usize;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(cmd: Command, next: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(&smb_wire::header::PROTOCOL_ID);
        h[offset::COMMAND..offset::COMMAND + 2].copy_from_slice(&(cmd as u16).to_le_bytes());
        h[offset::NEXT_COMMAND..offset::NEXT_COMMAND + 4].copy_from_slice(&next.to_le_bytes());
        h
    }

    #[test]
    fn finds_set_info_anywhere_in_a_compound() {
        assert!(!holds_breaking_command(&msg(Command::Read, 0)));
        assert!(!holds_breaking_command(&msg(Command::Create, 0)));
        assert!(holds_breaking_command(&msg(Command::SetInfo, 0)));
        let mut c = msg(Command::Read, 64);
        c.extend(msg(Command::SetInfo, 0));
        assert!(holds_breaking_command(&c));
        // A NextCommand pointing past the frame ends the walk.
        assert!(!holds_breaking_command(&msg(Command::Read, 4096)));
        assert!(!holds_breaking_command(&[0u8; 10]));
    }

    #[tokio::test]
    async fn an_answer_waits_for_earlier_frames_only() {
        let o = std::sync::Arc::new(BreakOrder::default());
        o.hold(1);
        o.hold(3);
        // Frame 1 holds nothing back from itself, nor does frame 3 from frame 2.
        tokio::time::timeout(Duration::from_millis(50), o.wait_before(1, 0)).await.unwrap();
        let o2 = o.clone();
        let waiter = tokio::spawn(async move { o2.wait_before(2, 0).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        o.pass(1);
        tokio::time::timeout(Duration::from_millis(500), waiter).await.unwrap().unwrap();
        o.pass(3);
        o.pass(3);
        assert_eq!(o.count.load(Ordering::Acquire), 0);
    }
}
