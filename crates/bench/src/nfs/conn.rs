//! One ONC RPC connection over TCP (RFC 5531 record marking): calls from many tasks at once,
//! replies matched to their calls by xid by one reader task.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use nfs_wire::record::{reserve_mark, set_mark, Record, RecordReader};
use nfs_wire::rpc::{decode_reply, encode_call, Auth, CallHeader};
use nfs_wire::XdrWriter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::BenchError;

/// The largest reply accepted: a 1 MiB READ and its headers, with room to spare.
const MAX_REPLY: u32 = 4 << 20;

type Waiters = Arc<Mutex<HashMap<u32, oneshot::Sender<Record>>>>;

/// A connection; clones share it.
#[derive(Clone)]
pub(crate) struct RpcConn {
    writer: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
    waiters: Waiters,
    closed: Arc<AtomicBool>,
    next_xid: Arc<AtomicU32>,
    cred: Auth,
}

impl RpcConn {
    pub async fn connect(addr: SocketAddr, cred: Auth) -> Result<RpcConn, BenchError> {
        let stream = TcpStream::connect(addr).await.map_err(|e| BenchError::Io(format!("cannot connect to {addr}: {e}")))?;
        // Latency matters more than packet count for request/response traffic.
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let waiters: Waiters = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        tokio::spawn(read_replies(rd, waiters.clone(), closed.clone()));
        // Start from a value of our own so two runs against one server do not reuse xids
        // (the server's duplicate request cache would answer them).
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.subsec_nanos() ^ (d.as_secs() as u32) << 20);
        Ok(RpcConn { writer: Arc::new(tokio::sync::Mutex::new(wr)), waiters, closed, next_xid: Arc::new(AtomicU32::new(seed)), cred })
    }

    /// Sends one call (`args` appends the arguments) and returns the whole reply record,
    /// checked to be an accepted, successful reply (its results start at [`results`]).
    pub async fn call(&self, prog: u32, vers: u32, proc_: u32, args: impl FnOnce(&mut XdrWriter<'_>)) -> Result<Record, BenchError> {
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
        let mut buf = Vec::with_capacity(256);
        let at = reserve_mark(&mut buf);
        encode_call(&CallHeader { xid, prog, vers, proc_, cred: self.cred.clone(), verf: Auth::None }, &mut buf);
        args(&mut XdrWriter::new(&mut buf));
        set_mark(&mut buf, at);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiters).insert(xid, tx);
        if self.closed.load(Ordering::Acquire) {
            lock(&self.waiters).remove(&xid);
            return Err(BenchError::Io("the connection is closed".into()));
        }
        let sent = self.writer.lock().await.write_all(&buf).await;
        if let Err(e) = sent {
            lock(&self.waiters).remove(&xid);
            return Err(BenchError::Io(format!("sending an RPC call: {e}")));
        }
        let rec = rx.await.map_err(|_| BenchError::Io("the connection closed before the reply".into()))?;
        results(&rec)?;
        Ok(rec)
    }
}

/// The result bytes of a reply record (after [`RpcConn::call`] checked it).
pub(crate) fn results(rec: &Record) -> Result<&[u8], BenchError> {
    match decode_reply(rec) {
        Ok((_, Ok(res))) => Ok(res),
        Ok((_, Err(e))) => Err(BenchError::Io(format!("RPC call refused: {e}"))),
        Err(e) => Err(BenchError::Io(format!("malformed RPC reply: {e}"))),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads records until the connection ends, handing each reply to its caller. At the end
/// every waiting caller gets an error (its sender is dropped).
async fn read_replies(mut rd: OwnedReadHalf, waiters: Waiters, closed: Arc<AtomicBool>) {
    let mut reader = RecordReader::new(MAX_REPLY);
    let mut chunk = vec![0u8; 256 << 10];
    'outer: loop {
        let n = match rd.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        reader.feed(&chunk[..n]);
        loop {
            match reader.next_record() {
                Ok(Some(rec)) => {
                    let xid = rec.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    let waiter = xid.and_then(|x| lock(&waiters).remove(&x));
                    if let Some(tx) = waiter {
                        let _ = tx.send(rec);
                    }
                }
                Ok(None) => break,
                Err(_) => break 'outer,
            }
        }
    }
    closed.store(true, Ordering::Release);
    lock(&waiters).clear();
}
