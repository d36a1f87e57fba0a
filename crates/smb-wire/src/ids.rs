//! Typed identifiers, so a tree id can never be passed where a session id is meant.

/// MS-SMB2 2.2.1 SessionId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SessionId(pub u64);

/// MS-SMB2 2.2.1 TreeId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TreeId(pub u32);

/// MS-SMB2 2.2.1 MessageId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MessageId(pub u64);

/// MS-SMB2 2.2.14.1 SMB2_FILEID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl FileId {
    /// The all-ones id that, in a compound, means "the file of the previous request".
    pub const RELATED: FileId = FileId { persistent: u64::MAX, volatile: u64::MAX };

    /// Decodes 16 bytes.
    pub fn from_bytes(b: [u8; 16]) -> FileId {
        let mut p = [0u8; 8];
        let mut v = [0u8; 8];
        p.copy_from_slice(&b[..8]);
        v.copy_from_slice(&b[8..]);
        FileId { persistent: u64::from_le_bytes(p), volatile: u64::from_le_bytes(v) }
    }

    /// Encodes to 16 bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.persistent.to_le_bytes());
        b[8..].copy_from_slice(&self.volatile.to_le_bytes());
        b
    }
}
