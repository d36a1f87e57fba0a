//! One TCP connection: the reader loop takes whole RPC records off the socket and runs each
//! call in its own task; replies go out in completion order through the connection's
//! writer, one record (single fragment) each.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, Semaphore};

use crate::dispatch;
use crate::state::NfsState;

/// Calls of one connection running at once; the next record is not read until one ends,
/// so a client that floods is back-pressured at TCP.
pub const MAX_IN_FLIGHT: usize = 128;
/// Largest record: a maximal WRITE (1 MiB) plus its headers.
pub const MAX_RECORD: usize = (1 << 20) + 4096;
/// Most fragments one record may have (a flood of empty fragments is an attack, not a
/// client: real clients send one).
const MAX_FRAGMENTS: usize = 1024;

/// Why the reader stops.
#[derive(Debug)]
enum RecordError {
    Io(std::io::Error),
    TooLarge(usize),
    TooManyFragments,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Io(e) => write!(f, "{e}"),
            RecordError::TooLarge(n) => write!(f, "a record of {n} bytes or more exceeds {MAX_RECORD}"),
            RecordError::TooManyFragments => write!(f, "more than {MAX_FRAGMENTS} fragments in one record"),
        }
    }
}

/// Serves one accepted socket until it closes.
pub async fn serve(state: Arc<NfsState>, sock: TcpStream, peer: SocketAddr) {
    let _ = sock.set_nodelay(true);
    let (rd, wr) = sock.into_split();
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let wr = Arc::new(Mutex::new(wr));
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    tracing::debug!(%peer, "nfs connection");
    loop {
        let record = match read_record(&mut rd).await {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(RecordError::Io(e)) => {
                tracing::debug!(%peer, error = %e, "nfs connection lost");
                break;
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "bad RPC record; disconnecting");
                break;
            }
        };
        let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
        let (state, wr) = (state.clone(), wr.clone());
        tokio::spawn(async move {
            if let Some(reply) = dispatch::call(&state, peer.ip(), record).await {
                send(&wr, reply).await;
            }
            drop(permit);
        });
    }
    // Close our side now; replies still being produced find the writer shut.
    let _ = wr.lock().await.shutdown().await;
    tracing::debug!(%peer, "nfs connection closed");
}

/// Writes one reply record. `reply` starts with four bytes reserved for the record mark.
async fn send(wr: &Mutex<OwnedWriteHalf>, mut reply: Vec<u8>) {
    if reply.len() < 4 {
        return;
    }
    let len = (reply.len() - 4) as u32;
    reply[..4].copy_from_slice(&(len | 0x8000_0000).to_be_bytes());
    let mut w = wr.lock().await;
    if let Err(e) = w.write_all(&reply).await {
        tracing::debug!(error = %e, "cannot send an NFS reply");
    }
}

/// Reads one whole record (RFC 5531 section 11: fragments with a 4-byte mark each, the
/// last one flagged); None at a clean end of stream between records.
async fn read_record(rd: &mut BufReader<OwnedReadHalf>) -> Result<Option<Vec<u8>>, RecordError> {
    let mut record = Vec::new();
    let mut fragment = 0;
    loop {
        if fragment >= MAX_FRAGMENTS {
            return Err(RecordError::TooManyFragments);
        }
        let mut mark = [0u8; 4];
        match rd.read_exact(&mut mark).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && fragment == 0 => return Ok(None),
            Err(e) => return Err(RecordError::Io(e)),
        }
        let word = u32::from_be_bytes(mark);
        let (last, len) = (word & 0x8000_0000 != 0, (word & 0x7fff_ffff) as usize);
        let total = record.len() + len;
        if total > MAX_RECORD {
            return Err(RecordError::TooLarge(total));
        }
        let start = record.len();
        record.resize(total, 0);
        rd.read_exact(&mut record[start..]).await.map_err(RecordError::Io)?;
        if last {
            return Ok(Some(record));
        }
        fragment += 1;
    }
}
