//! Sans-IO codec for SMB2/3 messages (MS-SMB2 section 2.2).
//!
//! Requests are decoded from a whole message (header + body) so buffer offsets, which the
//! protocol measures from the start of the header, are checked in one place. Nothing here
//! does I/O, so every parser can be fuzzed and unit-tested without sockets.

pub mod command;
pub mod error;
pub mod frame;
pub mod header;
pub mod ids;
pub mod msg;
pub mod read_ahead;
pub mod reader;
pub mod smb1;
pub mod status;

pub use command::Command;
pub use error::WireError;
pub use header::{Header, HEADER_LEN};
pub use ids::{FileId, MessageId, SessionId, TreeId};
pub use status::NtStatus;

/// Dialect revisions (MS-SMB2 2.2.3).
pub mod dialect {
    pub const SMB202: u16 = 0x0202;
    pub const SMB210: u16 = 0x0210;
    pub const SMB300: u16 = 0x0300;
    pub const SMB302: u16 = 0x0302;
    pub const SMB311: u16 = 0x0311;
    /// "SMB 2.???": the server supports 2.1 or later (answer to a multi-protocol negotiate).
    pub const WILDCARD: u16 = 0x02FF;

    /// Whether the dialect belongs to the SMB 3 family.
    pub fn is_smb3(d: u16) -> bool {
        d >= SMB300 && d != WILDCARD
    }
}
