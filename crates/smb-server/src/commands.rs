//! The command table: for each SMB2 command, what the pipeline must check before its handler
//! runs (session, tree), where its FileId sits, how much payload it moves for the
//! credit-charge check, and the handler itself. The pipeline reads this table instead of
//! keeping its own lists of commands.

use std::sync::Arc;

use smb_wire::{Command, FileId, HEADER_LEN};

use crate::connection::Connection;
use crate::handlers::{
    change_notify, close, create, echo, flush, ioctl, lock, logoff, negotiate, oplock_break, query_directory, query_info, read, session_setup,
    set_info, tree_connect, tree_disconnect, write,
};
use crate::request::{Ctx, HResult};

/// What the pipeline knows about one command before running its handler.
pub struct Spec {
    pub command: Command,
    /// Runs only in a valid session this connection is a channel of.
    pub needs_session: bool,
    /// Runs only in a tree of that session (the header's TreeId, or the related one's).
    pub needs_tree: bool,
    /// Offset of the request's FileId in the body (after the 64-byte header).
    pub file_id_at: Option<usize>,
    /// Bytes of payload the request moves (MS-SMB2 3.3.5.2.5), from the whole message.
    pub payload: fn(&[u8]) -> u32,
    /// A request that may run without a session although `needs_session` says otherwise
    /// (an unrelated request only).
    pub sessionless: Option<fn(&Ctx<'_>) -> bool>,
    /// The handler may close the connection on tampering (VALIDATE_NEGOTIATE_INFO mismatch,
    /// a second NEGOTIATE); the request then gets no answer (MS-SMB2 3.3.5.15.12).
    pub may_disconnect: bool,
}

/// A u32 at `off` in the body, 0 when the message is too short (the handler rejects it).
fn body_u32(msg: &[u8], off: usize) -> u32 {
    msg.get(HEADER_LEN + off..HEADER_LEN + off + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn no_payload(_: &[u8]) -> u32 {
    0
}

/// READ and WRITE Length, QUERY_INFO and CHANGE_NOTIFY OutputBufferLength, SET_INFO
/// BufferLength: all at body offset 4.
fn length_at_4(msg: &[u8]) -> u32 {
    body_u32(msg, 4)
}

/// QUERY_DIRECTORY OutputBufferLength.
fn query_directory_payload(msg: &[u8]) -> u32 {
    body_u32(msg, 28)
}

/// IOCTL: the larger of InputCount and MaxOutputResponse.
fn ioctl_payload(msg: &[u8]) -> u32 {
    body_u32(msg, 28).max(body_u32(msg, 44))
}

const fn spec(command: Command, needs_session: bool, needs_tree: bool, file_id_at: Option<usize>, payload: fn(&[u8]) -> u32) -> Spec {
    Spec { command, needs_session, needs_tree, file_id_at, payload, sessionless: None, may_disconnect: false }
}

/// Indexed by command code.
static COMMANDS: [Spec; 19] = [
    Spec { may_disconnect: true, ..spec(Command::Negotiate, false, false, None, no_payload) },
    spec(Command::SessionSetup, false, false, None, no_payload),
    spec(Command::Logoff, true, false, None, no_payload),
    spec(Command::TreeConnect, true, false, None, no_payload),
    spec(Command::TreeDisconnect, true, true, None, no_payload),
    spec(Command::Create, true, true, None, no_payload),
    spec(Command::Close, true, true, Some(8), no_payload),
    spec(Command::Flush, true, true, Some(8), no_payload),
    spec(Command::Read, true, true, Some(16), length_at_4),
    spec(Command::Write, true, true, Some(16), length_at_4),
    spec(Command::Lock, true, true, Some(8), no_payload),
    Spec { sessionless: Some(ioctl::sessionless), may_disconnect: true, ..spec(Command::Ioctl, true, true, Some(8), ioctl_payload) },
    spec(Command::Cancel, false, false, None, no_payload),
    spec(Command::Echo, false, false, None, no_payload),
    spec(Command::QueryDirectory, true, true, Some(8), query_directory_payload),
    spec(Command::ChangeNotify, true, true, Some(8), length_at_4),
    spec(Command::QueryInfo, true, true, Some(24), length_at_4),
    spec(Command::SetInfo, true, true, Some(16), length_at_4),
    // An oplock break acknowledgment has its FileId here; a lease break one, its LeaseKey.
    spec(Command::OplockBreak, true, true, Some(8), no_payload),
];

/// The table entry of `cmd`.
pub fn spec_of(cmd: Command) -> &'static Spec {
    let s = &COMMANDS[cmd as usize];
    debug_assert_eq!(s.command, cmd);
    s
}

/// The FileId a request names, as sent (the related-compound id unresolved), for logs.
pub fn file_id(cmd: Command, msg: &[u8]) -> Option<FileId> {
    let at = HEADER_LEN + spec_of(cmd).file_id_at?;
    Some(FileId::from_bytes(msg.get(at..at + 16)?.try_into().ok()?))
}

/// Runs the handler of `cmd`. A `match` rather than a function pointer in [`Spec`]: each
/// handler's future stays unboxed (no allocation per request).
pub async fn dispatch(cx: &mut Ctx<'_>, cmd: Command, out: &mut Vec<u8>) -> HResult {
    match cmd {
        Command::Negotiate => negotiate::handle(cx, out).await,
        Command::SessionSetup => session_setup::handle(cx, out).await,
        Command::Logoff => logoff::handle(cx, out).await,
        Command::TreeConnect => tree_connect::handle(cx, out).await,
        Command::TreeDisconnect => tree_disconnect::handle(cx, out).await,
        Command::Create => create::handle(cx, out).await,
        Command::Close => close::handle(cx, out).await,
        Command::Flush => flush::handle(cx, out).await,
        Command::Read => read::handle(cx, out).await,
        Command::Write => write::handle(cx, out).await,
        Command::Lock => lock::handle(cx, out).await,
        Command::Ioctl => ioctl::handle(cx, out).await,
        Command::Cancel => echo::cancel(cx),
        Command::Echo => echo::handle(cx, out),
        Command::QueryDirectory => query_directory::handle(cx, out).await,
        Command::QueryInfo => query_info::handle(cx, out).await,
        Command::SetInfo => set_info::handle(cx, out).await,
        Command::OplockBreak => oplock_break::handle(cx, out).await,
        Command::ChangeNotify => change_notify::handle(cx, out).await,
    }
}

/// An SMB1 frame: only the SMB1 NEGOTIATE that upgrades to SMB2 is answered.
pub async fn smb1(conn: &Arc<Connection>, frame: &[u8]) {
    negotiate::smb1(conn, frame).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb_wire::msg::ioctl::IoctlRequest;
    use smb_wire::msg::query_directory::QueryDirectoryRequest;
    use smb_wire::msg::read::ReadRequest;
    use smb_wire::msg::write::WriteRequest;
    use smb_wire::{Header, MessageId, SessionId, TreeId};

    const FID: FileId = FileId { persistent: 0x1111_2222_3333_4444, volatile: 0x5555_6666_7777_8888 };

    fn message(cmd: Command, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let h = Header {
            credit_charge: 1,
            status: 0,
            command: cmd as u16,
            credits: 1,
            flags: 0,
            next_command: 0,
            message_id: MessageId(1),
            async_id: 0,
            tree_id: TreeId(1),
            session_id: SessionId(1),
            signature: [0; 16],
        };
        let mut m = Vec::new();
        h.encode(&mut m);
        body(&mut m);
        m
    }

    #[test]
    fn every_command_has_its_own_entry() {
        for code in 0..=0x12u16 {
            let cmd = Command::from_u16(code).expect("known command");
            assert_eq!(spec_of(cmd).command, cmd, "entry {code:#x}");
        }
        assert_eq!(COMMANDS.len(), 0x13);
    }

    #[test]
    fn a_tree_implies_a_session() {
        assert!(COMMANDS.iter().all(|s| !s.needs_tree || s.needs_session));
        let free: Vec<Command> = COMMANDS.iter().filter(|s| !s.needs_session).map(|s| s.command).collect();
        assert_eq!(free, [Command::Negotiate, Command::SessionSetup, Command::Cancel, Command::Echo]);
        let no_tree: Vec<Command> = COMMANDS.iter().filter(|s| s.needs_session && !s.needs_tree).map(|s| s.command).collect();
        assert_eq!(no_tree, [Command::Logoff, Command::TreeConnect]);
    }

    #[test]
    fn only_ioctl_may_run_without_a_session_and_only_negotiate_and_ioctl_disconnect() {
        let sessionless: Vec<Command> = COMMANDS.iter().filter(|s| s.sessionless.is_some()).map(|s| s.command).collect();
        assert_eq!(sessionless, [Command::Ioctl]);
        let drops: Vec<Command> = COMMANDS.iter().filter(|s| s.may_disconnect).map(|s| s.command).collect();
        assert_eq!(drops, [Command::Negotiate, Command::Ioctl]);
    }

    #[test]
    fn read_charge_and_file_id_come_from_the_request_bytes() {
        let r = ReadRequest { flags: 0, length: 3 * 65536 + 1, offset: 7, file_id: FID, minimum_count: 0, channel: 0 };
        let m = message(Command::Read, |m| r.encode(m));
        let s = spec_of(Command::Read);
        assert_eq!((s.payload)(&m), 3 * 65536 + 1);
        assert_eq!(file_id(s.command, &m), Some(FID));
    }

    #[test]
    fn write_charge_and_file_id_come_from_the_request_bytes() {
        let data = vec![7u8; 70_000];
        let w = WriteRequest { offset: 0, file_id: FID, channel: 0, flags: 0, data: &data };
        let m = message(Command::Write, |m| w.encode(m));
        let s = spec_of(Command::Write);
        assert_eq!((s.payload)(&m), 70_000);
        assert_eq!(file_id(s.command, &m), Some(FID));
    }

    #[test]
    fn ioctl_charge_is_the_larger_of_input_and_output() {
        let input = vec![1u8; 100];
        let req = |max_out| IoctlRequest {
            ctl_code: 0x0014_0204,
            file_id: FID,
            input: &input,
            max_input_response: 0,
            max_output_response: max_out,
            flags: 1,
        };
        let s = spec_of(Command::Ioctl);
        let m = message(Command::Ioctl, |m| req(200_000).encode(m));
        assert_eq!((s.payload)(&m), 200_000);
        assert_eq!(file_id(s.command, &m), Some(FID));
        let m = message(Command::Ioctl, |m| req(10).encode(m));
        assert_eq!((s.payload)(&m), 100);
    }

    #[test]
    fn query_directory_charge_is_its_output_buffer() {
        let q = QueryDirectoryRequest { info_class: 37, flags: 0, file_index: 0, file_id: FID, pattern: "*".into(), output_buffer_length: 131_072 };
        let m = message(Command::QueryDirectory, |m| q.encode(m));
        let s = spec_of(Command::QueryDirectory);
        assert_eq!((s.payload)(&m), 131_072);
        assert_eq!(file_id(s.command, &m), Some(FID));
    }

    #[test]
    fn short_messages_charge_nothing() {
        for s in &COMMANDS {
            assert_eq!((s.payload)(&[0u8; HEADER_LEN + 3]), 0, "{:?}", s.command);
        }
    }
}
