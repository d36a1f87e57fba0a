//! One TCP connection: the reader loop takes whole RPC records off the socket and runs each
//! call in its own task; replies go out in completion order through the connection's
//! writer, one record (single fragment) each.

use std::net::SocketAddr;
use std::sync::Arc;

use nfs_wire::record::{set_mark, RecordReader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{Mutex, Semaphore};

use crate::dispatch;
use crate::state::NfsState;

/// Calls of one connection running at once; the next record is not read until one ends,
/// so a client that floods is back-pressured at TCP.
pub const MAX_IN_FLIGHT: usize = 128;
/// Largest record: a maximal WRITE (1 MiB) plus its headers.
pub const MAX_RECORD: usize = (1 << 20) + 4096;
/// Bytes received at least per read.
const READ_AHEAD: usize = 64 * 1024;

/// Serves one accepted socket until it closes; its admission `ticket` goes last.
pub async fn serve(state: Arc<NfsState>, sock: TcpStream, peer: SocketAddr, ticket: braid_admission::Ticket) {
    let _ = sock.set_nodelay(true);
    let (mut rd, wr) = sock.into_split();
    let wr = Arc::new(Mutex::new(wr));
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut records = RecordReader::new(MAX_RECORD as u32);
    let counts = state.peers.connect(peer.ip());
    let slots = Arc::new(crate::qos::Slots::new(peer.ip()));
    tracing::debug!(%peer, "nfs connection");
    // A graceful stop changes this: no new calls are read, those in flight are answered.
    let mut stop = state.stop.subscribe();
    // When the record being received began to arrive: it must be whole within the record
    // timeout (a client that sends a large record's header and then a byte now and then
    // holds nothing for long).
    let mut record_since: Option<tokio::time::Instant> = None;
    'conn: loop {
        loop {
            let record = match records.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "bad RPC record; disconnecting");
                    break 'conn;
                }
            };
            let Ok(permit) = in_flight.clone().acquire_owned().await else { break 'conn };
            // A client's calls over all its connections are bounded too.
            let Some(client_permit) = ticket.call_permit().await else { break 'conn };
            let (state, wr, counts, slots) = (state.clone(), wr.clone(), counts.clone(), slots.clone());
            tokio::spawn(async move {
                let len_in = record.len();
                let reply = dispatch::call(&state, peer.ip(), &slots, record).await;
                counts.record(len_in, reply.as_ref().map_or(0, Vec::len));
                if let Some(reply) = reply {
                    send(&wr, reply).await;
                }
                drop((permit, client_permit));
            });
        }
        record_since = if records.in_record() { record_since.or_else(|| Some(tokio::time::Instant::now())) } else { None };
        let deadline = record_since.map(|t| t + state.config.record_timeout);
        // Room for what the current fragment still needs (the reader bounds it), at least
        // a read-ahead's worth so small calls come several per receive.
        let want = records.wanted().clamp(READ_AHEAD, MAX_RECORD + 4);
        let buf = records.read_buf();
        buf.reserve(want);
        let read = tokio::select! {
            r = rd.read_buf(buf) => r,
            _ = stop.changed() => break,
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                state.admission.hit(braid_admission::Limit::FrameTimeout, peer.ip());
                break;
            }
        };
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "nfs connection lost");
                break;
            }
        }
    }
    if *stop.borrow() {
        let _ = in_flight.acquire_many(MAX_IN_FLIGHT as u32).await;
    }
    // Close our side now; replies still being produced find the writer shut, and calls
    // waiting for their export's limits leave the queue.
    slots.close();
    let _ = wr.lock().await.shutdown().await;
    state.peers.disconnect(peer.ip(), &counts);
    tracing::debug!(%peer, "nfs connection closed");
    drop(stop);
    drop(ticket);
}

/// Writes one reply record. `reply` starts with four bytes reserved for the record mark.
async fn send(wr: &Mutex<OwnedWriteHalf>, mut reply: Vec<u8>) {
    if reply.len() < 4 {
        return;
    }
    set_mark(&mut reply, 0);
    let mut w = wr.lock().await;
    if let Err(e) = w.write_all(&reply).await {
        tracing::debug!(error = %e, "cannot send an NFS reply");
    }
}
