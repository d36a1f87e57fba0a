//! Frames through [`process_frame`] on a connection whose writer is memory: the whole
//! request path (credits, authentication, signing, encryption, compounds, handlers) without
//! a socket.

use std::sync::Arc;

use smb_auth::NtlmClient;
use smb_crypto::{Cipher, Sealer, SessionKeys, Signer, SigningAlgorithm, TRANSFORM_HEADER_LEN};
use smb_wire::header::{flags, offset};
use smb_wire::msg::close::CloseRequest;
use smb_wire::msg::create::CreateRequest;
use smb_wire::msg::negotiate::{cap, NegotiateRequest, NegotiateResponse};
use smb_wire::msg::read::ReadRequest;
use smb_wire::msg::session_setup::{SessionSetupRequest, SessionSetupResponse};
use smb_wire::msg::tree::TreeConnectRequest;
use smb_wire::msg::write::WriteRequest;
use smb_wire::{Command, FileId, Header, MessageId, NtStatus, SessionId, TreeId, HEADER_LEN};

use super::process_frame;
use crate::config::{ServerConfig, ShareConfig, ShareStorage, UserConfig};
use crate::connection::{Connection, Writer};
use crate::server::ServerState;

const USER: &str = "alice";
const PASSWORD: &str = "Pipeline-1";

/// A client speaking to one in-memory connection, one frame at a time.
struct Peer {
    conn: Arc<Connection>,
    next_mid: u64,
    session: u64,
    tree: u32,
    signer: Option<Signer>,
    keys: Option<SessionKeys>,
}

/// A server with one share, `data`, held in memory (`braid_vfs::MemoryBackend`).
fn server() -> Arc<ServerState> {
    let config = ServerConfig {
        users: vec![UserConfig { name: USER.into(), nt_hash: smb_auth::nt_hash(PASSWORD) }],
        shares: vec![ShareConfig::new("data", ShareStorage::Memory { capacity: 16 << 20 })],
        ..ServerConfig::default()
    };
    Arc::new(ServerState::new(config).expect("server state"))
}

impl Peer {
    fn new(server: &Arc<ServerState>) -> Peer {
        let conn = Arc::new(Connection::new(server.clone(), 1, "127.0.0.1:1".parse().expect("addr"), Writer::Memory(Vec::new()), -1));
        Peer { conn, next_mid: 0, session: 0, tree: 0, signer: None, keys: None }
    }

    /// One request message (header and body), with the next MessageId.
    fn message(&mut self, cmd: Command, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let h = Header {
            credit_charge: 1,
            status: 0,
            command: cmd as u16,
            credits: 32,
            flags: 0,
            next_command: 0,
            message_id: MessageId(self.next_mid),
            async_id: 0,
            tree_id: TreeId(self.tree),
            session_id: SessionId(self.session),
            signature: [0; 16],
        };
        self.next_mid += 1;
        let mut m = Vec::new();
        h.encode(&mut m);
        body(&mut m);
        m
    }

    /// Chains messages into one frame (8-byte aligned, NextCommand set), signing each when
    /// the peer has a key.
    fn frame(&self, msgs: Vec<Vec<u8>>) -> Vec<u8> {
        let mut out = Vec::new();
        let n = msgs.len();
        for (i, mut m) in msgs.into_iter().enumerate() {
            if i + 1 < n {
                while m.len() % 8 != 0 {
                    m.push(0);
                }
                let len = u32::try_from(m.len()).expect("len");
                m[offset::NEXT_COMMAND..offset::NEXT_COMMAND + 4].copy_from_slice(&len.to_le_bytes());
            }
            if let Some(s) = &self.signer {
                set_flag(&mut m, flags::SIGNED);
                s.sign(&mut m);
            }
            out.extend_from_slice(&m);
        }
        out
    }

    /// Sends one frame; returns the messages of every frame the server sent back.
    async fn exchange(&mut self, frame: Vec<u8>) -> Vec<Vec<u8>> {
        process_frame(&self.conn, frame, None, 0).await;
        let sent = self.conn.take_sent().await;
        let mut msgs = Vec::new();
        let mut pos = 0;
        while pos + 4 <= sent.len() {
            let len = u32::from_be_bytes([0, sent[pos + 1], sent[pos + 2], sent[pos + 3]]) as usize;
            let mut f = sent[pos + 4..pos + 4 + len].to_vec();
            pos += 4 + len;
            if f.starts_with(&[0xFD, b'S', b'M', b'B']) {
                let keys = self.keys.as_ref().expect("keys for an encrypted response");
                let opener = Sealer::new(Cipher::Aes128Ccm, &keys.encrypt_s2c).expect("sealer");
                let r = opener.open(&mut f).expect("response decrypts");
                f = f[r].to_vec();
            }
            let mut at = 0;
            loop {
                let next = u32::from_le_bytes(f[at + offset::NEXT_COMMAND..at + offset::NEXT_COMMAND + 4].try_into().expect("4")) as usize;
                let end = if next == 0 { f.len() } else { at + next };
                msgs.push(f[at..end].to_vec());
                if next == 0 {
                    break;
                }
                at = end;
            }
        }
        msgs
    }

    async fn call(&mut self, cmd: Command, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let m = self.message(cmd, body);
        let f = self.frame(vec![m]);
        let mut r = self.exchange(f).await;
        assert_eq!(r.len(), 1, "one response to {cmd:?}");
        r.remove(0)
    }

    /// NEGOTIATE 3.0.2 (with encryption), NTLM SESSION_SETUP, TREE_CONNECT to `data`.
    async fn logon(&mut self) {
        let neg =
            NegotiateRequest { security_mode: 1, capabilities: cap::ENCRYPTION, client_guid: [7; 16], dialects: vec![0x0302], contexts: Vec::new() };
        let r = self.call(Command::Negotiate, |m| neg.encode(m)).await;
        assert_eq!(status(&r), NtStatus::SUCCESS);
        let nr = NegotiateResponse::decode(&r).expect("negotiate response");
        assert_eq!(nr.dialect, 0x0302);
        assert_ne!(nr.capabilities & cap::ENCRYPTION, 0, "encryption offered");

        let mut ntlm = NtlmClient::new(USER, "", PASSWORD);
        let first = ntlm.initial_token();
        let r = self.call(Command::SessionSetup, |m| setup(&first).encode(m)).await;
        assert_eq!(status(&r), NtStatus::MORE_PROCESSING_REQUIRED);
        self.session = u64::from_le_bytes(r[offset::SESSION_ID..offset::SESSION_ID + 8].try_into().expect("8"));
        let challenge = SessionSetupResponse::decode(&r).expect("challenge").security_buffer.to_vec();
        let auth = ntlm.step(&challenge).expect("ntlm step").expect("authenticate token");
        let mut r = self.call(Command::SessionSetup, |m| setup(&auth).encode(m)).await;
        assert_eq!(status(&r), NtStatus::SUCCESS);
        let keys = SessionKeys::derive(0x0302, &ntlm.session_key().expect("session key"), None, None);
        let signer = Signer::new(SigningAlgorithm::AesCmac, &keys.signing);
        assert!(flag(&r, flags::SIGNED) && signer.verify(&mut r), "final SESSION_SETUP is signed with the session key");
        self.signer = Some(signer);
        self.keys = Some(keys);

        let tc = TreeConnectRequest { flags: 0, path: "\\\\BRAID\\data".into() };
        let mut r = self.call(Command::TreeConnect, |m| tc.encode(m)).await;
        assert_eq!(status(&r), NtStatus::SUCCESS);
        assert!(self.signer.as_ref().is_some_and(|s| s.verify(&mut r)), "TREE_CONNECT response signed");
        self.tree = u32::from_le_bytes(r[offset::TREE_ID..offset::TREE_ID + 4].try_into().expect("4"));
    }
}

fn setup(token: &[u8]) -> SessionSetupRequest<'_> {
    SessionSetupRequest { flags: 0, security_mode: 1, capabilities: 0, previous_session_id: 0, security_buffer: token }
}

fn create(name: &str) -> CreateRequest<'static> {
    CreateRequest {
        security_flags: 0,
        oplock_level: 0,
        impersonation_level: 2,
        desired_access: 0x0012_019F,
        file_attributes: 0x80,
        share_access: 7,
        create_disposition: 5, // FILE_OVERWRITE_IF
        create_options: 0x40,  // FILE_NON_DIRECTORY_FILE
        name: name.into(),
        contexts: Vec::new(),
    }
}

fn status(msg: &[u8]) -> NtStatus {
    NtStatus(u32::from_le_bytes(msg[offset::STATUS..offset::STATUS + 4].try_into().expect("4")))
}

fn flag(msg: &[u8], f: u32) -> bool {
    u32::from_le_bytes(msg[offset::FLAGS..offset::FLAGS + 4].try_into().expect("4")) & f != 0
}

fn set_flag(msg: &mut [u8], f: u32) {
    let old = u32::from_le_bytes(msg[offset::FLAGS..offset::FLAGS + 4].try_into().expect("4"));
    msg[offset::FLAGS..offset::FLAGS + 4].copy_from_slice(&(old | f).to_le_bytes());
}

/// The FileId of a CREATE response (body offset 64).
fn created_id(msg: &[u8]) -> FileId {
    FileId::from_bytes(msg[HEADER_LEN + 64..HEADER_LEN + 80].try_into().expect("16"))
}

/// What the share's backend holds for `name`, read outside SMB.
fn stored(server: &ServerState, name: &str) -> Vec<u8> {
    let path = braid_vfs::SharePath::from_smb(name).expect("path");
    let opts = braid_vfs::OpenOptions {
        read: true,
        write: false,
        create: braid_vfs::CreateMode::OpenExisting,
        truncate: false,
        directory: false,
        non_directory: true,
    };
    let (h, _) = server.shares.get(0).expect("share").backend.open(&path, opts).expect("stored file");
    let mut buf = vec![0; 4096];
    let n = h.read_at(&mut buf, 0).expect("read");
    buf.truncate(n);
    buf
}

/// The data of a READ response (DataOffset at body byte 2, DataLength at 4).
fn read_data(msg: &[u8]) -> &[u8] {
    let off = usize::from(msg[HEADER_LEN + 2]);
    let len = u32::from_le_bytes(msg[HEADER_LEN + 4..HEADER_LEN + 8].try_into().expect("4")) as usize;
    &msg[off..off + len]
}

#[tokio::test]
async fn logon_create_write_read_close() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let r = p.call(Command::Create, |m| create("hello.txt").encode(m)).await;
    assert_eq!(status(&r), NtStatus::SUCCESS);
    let fid = created_id(&r);
    let w = WriteRequest { offset: 0, file_id: fid, channel: 0, flags: 0, data: b"pipeline bytes" };
    let r = p.call(Command::Write, |m| w.encode(m)).await;
    assert_eq!(status(&r), NtStatus::SUCCESS);
    assert_eq!(u32::from_le_bytes(r[HEADER_LEN + 4..HEADER_LEN + 8].try_into().expect("4")), 14, "WRITE Count");
    let rd = ReadRequest { flags: 0, length: 100, offset: 0, file_id: fid, minimum_count: 0, channel: 0 };
    let mut r = p.call(Command::Read, |m| rd.encode(m)).await;
    assert_eq!(status(&r), NtStatus::SUCCESS);
    assert_eq!(read_data(&r), b"pipeline bytes");
    assert!(p.signer.as_ref().is_some_and(|s| s.verify(&mut r)), "READ response signed");
    let r = p.call(Command::Close, |m| CloseRequest { flags: 0, file_id: fid }.encode(m)).await;
    assert_eq!(status(&r), NtStatus::SUCCESS);
    assert_eq!(stored(&server, "hello.txt"), b"pipeline bytes");
    assert!(!p.conn.is_closed());
}

#[tokio::test]
async fn related_compound_create_write_close() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let c = p.message(Command::Create, |m| create("chain.txt").encode(m));
    let w = WriteRequest { offset: 0, file_id: FileId::RELATED, channel: 0, flags: 0, data: b"chained" };
    let mut wm = p.message(Command::Write, |m| w.encode(m));
    let mut cm = p.message(Command::Close, |m| CloseRequest { flags: 0, file_id: FileId::RELATED }.encode(m));
    set_flag(&mut wm, flags::RELATED_OPERATIONS);
    set_flag(&mut cm, flags::RELATED_OPERATIONS);
    let f = p.frame(vec![c, wm, cm]);
    let r = p.exchange(f).await;
    let cmds: Vec<u16> = r.iter().map(|m| u16::from_le_bytes([m[offset::COMMAND], m[offset::COMMAND + 1]])).collect();
    assert_eq!(cmds, [Command::Create as u16, Command::Write as u16, Command::Close as u16], "one compound response, in order");
    assert!(r.iter().all(|m| status(m) == NtStatus::SUCCESS), "{:?}", r.iter().map(|m| status(m)).collect::<Vec<_>>());
    assert!(r.iter().all(|m| flag(m, flags::SIGNED)), "each element signed");
    assert_eq!(stored(&server, "chain.txt"), b"chained");
}

#[tokio::test]
async fn each_answered_request_is_counted_once_with_its_result() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let r = p.call(Command::Create, |m| create("counted.txt").encode(m)).await;
    let fid = created_id(&r);
    // A compound counts each element; the failed CREATE (no such directory) is an error.
    let c = p.message(Command::Create, |m| create("no-such-dir/x.txt").encode(m));
    let mut cm = p.message(Command::Close, |m| CloseRequest { flags: 0, file_id: FileId::RELATED }.encode(m));
    set_flag(&mut cm, flags::RELATED_OPERATIONS);
    let f = p.frame(vec![c, cm]);
    p.exchange(f).await;
    p.call(Command::Close, |m| CloseRequest { flags: 0, file_id: fid }.encode(m)).await;
    let snap = server.ops.snapshot();
    let get = |op: &str| snap.iter().find(|s| s.op == op).map(|s| (s.count(), s.errors));
    assert_eq!(get("CREATE"), Some((2, 1)), "{snap:?}");
    assert_eq!(get("CLOSE"), Some((2, 1)), "the related CLOSE failed as its CREATE did");
    assert_eq!(get("NEGOTIATE"), Some((1, 0)));
    // The intermediate SESSION_SETUP (MORE_PROCESSING_REQUIRED) is not an error.
    assert_eq!(get("SESSION_SETUP"), Some((2, 0)));
    assert_eq!(get("READ"), None, "unseen commands have no series");
}

#[tokio::test]
async fn a_message_id_outside_the_credit_window_closes_the_connection() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    p.next_mid += 10_000;
    let m = p.message(Command::Echo, |m| m.extend_from_slice(&[4, 0, 0, 0]));
    let f = p.frame(vec![m]);
    let r = p.exchange(f).await;
    assert!(r.is_empty(), "no answer");
    assert!(p.conn.is_closed());
}

#[tokio::test]
async fn a_bad_signature_closes_the_connection() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let m = p.message(Command::Echo, |m| m.extend_from_slice(&[4, 0, 0, 0]));
    let mut f = p.frame(vec![m]);
    f[offset::SIGNATURE] ^= 1;
    let r = p.exchange(f).await;
    assert!(r.is_empty(), "no answer");
    assert!(p.conn.is_closed());
}

#[tokio::test]
async fn an_encrypted_request_gets_an_encrypted_answer() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let m = p.message(Command::Echo, |m| m.extend_from_slice(&[4, 0, 0, 0]));
    let keys = p.keys.as_ref().expect("keys");
    let mut f = vec![0u8; TRANSFORM_HEADER_LEN];
    f.extend_from_slice(&m);
    Sealer::new(Cipher::Aes128Ccm, &keys.decrypt_c2s).expect("sealer").seal(p.session, &mut f).expect("seal");
    process_frame(&p.conn, f, None, 0).await;
    let sent = p.conn.take_sent().await;
    assert_eq!(&sent[4..8], &[0xFD, b'S', b'M', b'B'], "the answer is a TRANSFORM_HEADER frame");
    let mut body = sent[4..].to_vec();
    let opener = Sealer::new(Cipher::Aes128Ccm, &keys.encrypt_s2c).expect("sealer");
    let r = opener.open(&mut body).expect("decrypts");
    let msg = &body[r];
    assert_eq!(status(msg), NtStatus::SUCCESS);
    assert_eq!(u16::from_le_bytes([msg[offset::COMMAND], msg[offset::COMMAND + 1]]), Command::Echo as u16);
    assert!(!flag(msg, flags::SIGNED), "encryption replaces signing");
    assert!(!p.conn.is_closed());
}

#[tokio::test]
async fn a_cancel_that_overtakes_its_change_notify_cancels_it() {
    use smb_wire::msg::notify::{filter, NotifyRequest};
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let mut dir = create("watched");
    dir.create_options = 0x1; // FILE_DIRECTORY_FILE
    dir.create_disposition = 3; // FILE_OPEN_IF
    dir.desired_access = 0x0012_0089; // FILE_LIST_DIRECTORY, READ_EA, READ_ATTRIBUTES, READ_CONTROL, SYNCHRONIZE
    let r = p.call(Command::Create, |m| dir.encode(m)).await;
    assert_eq!(status(&r), NtStatus::SUCCESS);
    let fid = created_id(&r);
    // The CANCEL names the MessageId the CHANGE_NOTIFY will carry, and arrives first (as
    // when both are sent back to back and the CANCEL's task runs before the other's).
    let cancel = p.message(Command::Cancel, |m| m.extend_from_slice(&[4, 0, 0, 0]));
    p.next_mid -= 1;
    let f = p.frame(vec![cancel]);
    assert!(p.exchange(f).await.is_empty(), "CANCEL has no response");
    let n = NotifyRequest { flags: 0, output_buffer_length: 1024, file_id: fid, completion_filter: filter::FILE_NAME };
    let m = p.message(Command::ChangeNotify, |m| n.encode(m));
    let f = p.frame(vec![m]);
    let r = tokio::time::timeout(std::time::Duration::from_secs(5), p.exchange(f)).await.expect("answered, not left waiting");
    assert_eq!(r.iter().map(|m| status(m)).collect::<Vec<_>>(), [NtStatus::CANCELLED], "no interim response either");
    assert!(!p.conn.is_closed());
}

#[tokio::test]
async fn a_close_that_overtakes_a_change_notify_sent_before_it_ends_it_with_cleanup() {
    use smb_wire::msg::notify::{filter, NotifyRequest};
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    let mut dir = create("watched");
    dir.create_options = 0x1; // FILE_DIRECTORY_FILE
    dir.create_disposition = 3; // FILE_OPEN_IF
    dir.desired_access = 0x0012_0089;
    let r = p.call(Command::Create, |m| dir.encode(m)).await;
    let fid = created_id(&r);
    // The client sent CHANGE_NOTIFY (MessageId n), then CLOSE (n + 1); the CLOSE ran first.
    let n = p.next_mid;
    p.next_mid = n + 1;
    let r = p.call(Command::Close, |m| CloseRequest { flags: 0, file_id: fid }.encode(m)).await;
    assert_eq!(status(&r), NtStatus::SUCCESS);
    let after = p.next_mid;
    p.next_mid = n;
    let notify = NotifyRequest { flags: 0, output_buffer_length: 1024, file_id: fid, completion_filter: filter::FILE_NAME };
    let r = p.call(Command::ChangeNotify, |m| notify.encode(m)).await;
    assert_eq!(status(&r), NtStatus::NOTIFY_CLEANUP);
    // One sent after the CLOSE finds the handle closed.
    p.next_mid = after;
    let r = p.call(Command::ChangeNotify, |m| notify.encode(m)).await;
    assert_eq!(status(&r), NtStatus::FILE_CLOSED);
}

#[tokio::test]
async fn an_answer_waits_for_the_breaks_of_a_frame_that_arrived_before_it() {
    let server = server();
    let mut p = Peer::new(&server);
    p.logon().await;
    // Frame 5 (a rename, say) has not sent its breaks yet; frame 6 is an ECHO.
    p.conn.break_order.hold(5);
    let m = p.message(Command::Echo, |m| m.extend_from_slice(&[4, 0, 0, 0]));
    let f = p.frame(vec![m]);
    let conn = p.conn.clone();
    let echo = tokio::spawn(async move { process_frame(&conn, f, None, 6).await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(!echo.is_finished(), "the ECHO's answer waits");
    assert!(p.conn.take_sent().await.is_empty(), "nothing sent yet");
    p.conn.break_order.pass(5);
    tokio::time::timeout(std::time::Duration::from_secs(1), echo).await.expect("answered").expect("task");
    assert!(!p.conn.take_sent().await.is_empty(), "the answer went out");
}
