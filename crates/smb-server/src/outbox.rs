//! Where finished frames go: the [`Outbox`] a connection offers to code that sends on its
//! own (break notifications), and the file data a response may carry after it ([`Tail`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use smb_wire::SessionId;

/// File data that follows a response on the wire without passing through its buffer.
pub enum Tail {
    /// Sent from the file with sendfile (large reads).
    File(FileTail),
    /// Written from a mapping of a memory-backed file, one copy into the socket; the handle
    /// reads what the mapping can no longer give (the file shrank meanwhile).
    Mapped(braid_vfs::MappedRange, Arc<dyn braid_vfs::FileHandle>),
}

/// File bytes sent straight from the file to the socket after a response (zero copy).
pub struct FileTail {
    pub handle: Arc<dyn braid_vfs::FileHandle>,
    pub offset: u64,
    pub len: usize,
}

/// A channel that finished frames can be sent on. `Connection` implements it; code that
/// only sends (break delivery) depends on this trait rather than on the connection.
pub trait Outbox: Send + Sync + std::fmt::Debug {
    /// The connection id (as in `ServerState::connections`).
    fn id(&self) -> u64;
    /// The peer's address, for logs.
    fn peer(&self) -> std::net::SocketAddr;
    /// Sends one finished frame (bytes 0..4 are the transport header, filled in by the
    /// outbox).
    fn send_frame(&self, frame: Vec<u8>) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + '_>>;
    /// Whether the channel is open and bound to `session` (it may carry its messages).
    fn serves(&self, session: SessionId) -> bool;
    /// Whether the channel is still open.
    fn is_alive(&self) -> bool;
    /// Bytes handed to TCP so far and the retransmission timeout (None where the kernel
    /// cannot tell).
    fn sent_mark(&self) -> Option<(u64, Duration)>;
    /// Bytes the peer's TCP has acknowledged so far.
    fn acked_bytes(&self) -> Option<u64>;
    /// Closes the channel at once (it was found dead).
    fn abort(&self);
}
