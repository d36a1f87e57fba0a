//! NTSTATUS values used by the server (MS-ERREF 2.3).

/// An NTSTATUS code.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NtStatus(pub u32);

macro_rules! statuses {
    ($($name:ident = $val:expr,)*) => {
        impl NtStatus {
            $(pub const $name: NtStatus = NtStatus($val);)*

            /// The symbolic name, for logs.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

statuses! {
    SUCCESS = 0x0000_0000,
    PENDING = 0x0000_0103,
    NOTIFY_CLEANUP = 0x0000_010B,
    NOTIFY_ENUM_DIR = 0x0000_010C,
    BUFFER_OVERFLOW = 0x8000_0005,
    NO_MORE_FILES = 0x8000_0006,
    UNSUCCESSFUL = 0xC000_0001,
    NOT_IMPLEMENTED = 0xC000_0002,
    INVALID_INFO_CLASS = 0xC000_0003,
    INFO_LENGTH_MISMATCH = 0xC000_0004,
    INVALID_HANDLE = 0xC000_0008,
    INVALID_PARAMETER = 0xC000_000D,
    NO_SUCH_FILE = 0xC000_000F,
    INVALID_DEVICE_REQUEST = 0xC000_0010,
    END_OF_FILE = 0xC000_0011,
    MORE_PROCESSING_REQUIRED = 0xC000_0016,
    NO_MEMORY = 0xC000_0017,
    ACCESS_DENIED = 0xC000_0022,
    BUFFER_TOO_SMALL = 0xC000_0023,
    OBJECT_NAME_INVALID = 0xC000_0033,
    OBJECT_NAME_NOT_FOUND = 0xC000_0034,
    OBJECT_NAME_COLLISION = 0xC000_0035,
    OBJECT_PATH_INVALID = 0xC000_0039,
    OBJECT_PATH_NOT_FOUND = 0xC000_003A,
    OBJECT_PATH_SYNTAX_BAD = 0xC000_003B,
    SHARING_VIOLATION = 0xC000_0043,
    DELETE_PENDING = 0xC000_0056,
    PRIVILEGE_NOT_HELD = 0xC000_0061,
    LOGON_FAILURE = 0xC000_006D,
    ACCOUNT_RESTRICTION = 0xC000_006E,
    RANGE_NOT_LOCKED = 0xC000_007E,
    DISK_FULL = 0xC000_007F,
    ALLOTTED_SPACE_EXCEEDED = 0xC000_0099,
    FILE_IS_A_DIRECTORY = 0xC000_00BA,
    NOT_SUPPORTED = 0xC000_00BB,
    NETWORK_NAME_DELETED = 0xC000_00C9,
    BAD_NETWORK_NAME = 0xC000_00CC,
    REQUEST_NOT_ACCEPTED = 0xC000_00D0,
    INTERNAL_ERROR = 0xC000_00E5,
    DIRECTORY_NOT_EMPTY = 0xC000_0101,
    NOT_A_DIRECTORY = 0xC000_0103,
    CANCELLED = 0xC000_0120,
    CANNOT_DELETE = 0xC000_0121,
    FILE_CLOSED = 0xC000_0128,
    FILE_FORCED_CLOSED = 0xC000_00B6,
    IO_TIMEOUT = 0xC000_00B5,
    INSUFFICIENT_RESOURCES = 0xC000_009A,
    MEDIA_WRITE_PROTECTED = 0xC000_00A2,
    FILE_LOCK_CONFLICT = 0xC000_0054,
    LOCK_NOT_GRANTED = 0xC000_0055,
    INVALID_LOCK_RANGE = 0xC000_01A1,
    NETWORK_SESSION_EXPIRED = 0xC000_035C,
    USER_SESSION_DELETED = 0xC000_0203,
    NOT_FOUND = 0xC000_0225,
    INVALID_DEVICE_STATE = 0xC000_0184,
    FILE_TOO_LARGE = 0xC000_0904,
    NETWORK_ACCESS_DENIED = 0xC000_00CA,
    BAD_IMPERSONATION_LEVEL = 0xC000_00A5,
    INVALID_OPLOCK_PROTOCOL = 0xC000_00E3,
    FS_DRIVER_REQUIRED = 0xC000_019C,
    STOPPED_ON_SYMLINK = 0x8000_002D,
    EAS_NOT_SUPPORTED = 0xC000_004F,
    OBJECT_NAME_EXISTS = 0x4000_0000,
    USER_MAPPED_FILE = 0xC000_0243,
    NOT_SAME_DEVICE = 0xC000_00D4,
    INVALID_NETWORK_RESPONSE = 0xC000_00C3,
    NO_SUCH_USER = 0xC000_0064,
    WRONG_PASSWORD = 0xC000_006A,
    PASSWORD_EXPIRED = 0xC000_0071,
    TOO_MANY_OPENED_FILES = 0xC000_011F,
    DUPLICATE_OBJECTID = 0xC000_022A,
    NO_EAS_ON_FILE = 0xC000_0052,
    NONEXISTENT_EA_ENTRY = 0xC000_0051,
    INVALID_SECURITY_DESCR = 0xC000_0079,
    EA_TOO_LARGE = 0xC000_0050,
    INVALID_EA_NAME = 0x8000_0013,
    INVALID_VIEW_SIZE = 0xC000_001F,
    EA_LIST_INCONSISTENT = 0x8000_0014,
    NO_MORE_EAS = 0x8000_0012,
    REQUEST_OUT_OF_SEQUENCE = 0xC000_042A,
    FILE_NOT_AVAILABLE = 0xC000_0467,
}

impl NtStatus {
    /// True for success and informational codes (severity 0 or 1).
    pub fn is_success(self) -> bool {
        self.0 >> 30 <= 1
    }
}

impl std::fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "NtStatus({:#010x})", self.0),
        }
    }
}

impl std::fmt::Display for NtStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
