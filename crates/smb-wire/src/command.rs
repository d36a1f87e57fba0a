//! SMB2 command codes (MS-SMB2 2.2.1.2).

/// An SMB2 command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Command {
    Negotiate = 0x00,
    SessionSetup = 0x01,
    Logoff = 0x02,
    TreeConnect = 0x03,
    TreeDisconnect = 0x04,
    Create = 0x05,
    Close = 0x06,
    Flush = 0x07,
    Read = 0x08,
    Write = 0x09,
    Lock = 0x0A,
    Ioctl = 0x0B,
    Cancel = 0x0C,
    Echo = 0x0D,
    QueryDirectory = 0x0E,
    ChangeNotify = 0x0F,
    QueryInfo = 0x10,
    SetInfo = 0x11,
    OplockBreak = 0x12,
}

impl Command {
    /// Decodes a command code; `None` for unknown codes.
    pub fn from_u16(v: u16) -> Option<Command> {
        use Command::*;
        Some(match v {
            0x00 => Negotiate,
            0x01 => SessionSetup,
            0x02 => Logoff,
            0x03 => TreeConnect,
            0x04 => TreeDisconnect,
            0x05 => Create,
            0x06 => Close,
            0x07 => Flush,
            0x08 => Read,
            0x09 => Write,
            0x0A => Lock,
            0x0B => Ioctl,
            0x0C => Cancel,
            0x0D => Echo,
            0x0E => QueryDirectory,
            0x0F => ChangeNotify,
            0x10 => QueryInfo,
            0x11 => SetInfo,
            0x12 => OplockBreak,
            _ => return None,
        })
    }

    /// The command's name as MS-SMB2 spells it (`SMB2 QUERY_DIRECTORY` without the prefix),
    /// for metrics and logs.
    pub fn name(self) -> &'static str {
        use Command::*;
        match self {
            Negotiate => "NEGOTIATE",
            SessionSetup => "SESSION_SETUP",
            Logoff => "LOGOFF",
            TreeConnect => "TREE_CONNECT",
            TreeDisconnect => "TREE_DISCONNECT",
            Create => "CREATE",
            Close => "CLOSE",
            Flush => "FLUSH",
            Read => "READ",
            Write => "WRITE",
            Lock => "LOCK",
            Ioctl => "IOCTL",
            Cancel => "CANCEL",
            Echo => "ECHO",
            QueryDirectory => "QUERY_DIRECTORY",
            ChangeNotify => "CHANGE_NOTIFY",
            QueryInfo => "QUERY_INFO",
            SetInfo => "SET_INFO",
            OplockBreak => "OPLOCK_BREAK",
        }
    }

    /// The fixed StructureSize of this command's request (MS-SMB2 2.2.x).
    pub fn request_structure_size(self) -> u16 {
        use Command::*;
        match self {
            Negotiate => 36,
            SessionSetup => 25,
            Logoff | TreeDisconnect | Cancel | Echo => 4,
            TreeConnect => 9,
            Create => 57,
            Close | Flush => 24,
            Read | Write => 49,
            Lock => 48,
            Ioctl => 57,
            QueryDirectory => 33,
            ChangeNotify => 32,
            QueryInfo => 41,
            SetInfo => 33,
            OplockBreak => 24,
        }
    }
}
