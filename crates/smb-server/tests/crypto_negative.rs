//! Byte-level negative tests of SMB3 signing and encryption against the real `braid` binary.
//!
//! Interop clients never send a tampered signature or ciphertext, so these tests drive a tiny
//! hand-written SMB2 client (requests built byte by byte, NTLM from `smb_auth`, keys, signing
//! and sealing from `smb_crypto`) and check that the server drops the connection without
//! acting on the request, refuses what it must refuse, and keeps serving everyone else.
//!
//! The binary is `$BRAID_BIN`, else `braid` next to this test's target directory (build it
//! first: `cargo build -p braid`), else `$CARGO_TARGET_DIR` or the workspace `target/`.

mod common;
use common::{add_user, braid_bin, free_port, serve, unique};

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use smb_auth::NtlmClient;
use smb_crypto::{Cipher, PreauthHash, Sealer, SessionKeys, Signer, SigningAlgorithm};

const USER: &str = "tester";
const PASSWORD: &str = "Crypto-Negative-1";

// Commands, flags and statuses (MS-SMB2 2.2.1, MS-ERREF).
const NEGOTIATE: u16 = 0;
const SESSION_SETUP: u16 = 1;
const TREE_CONNECT: u16 = 3;
const CREATE: u16 = 5;
const CLOSE: u16 = 6;
const WRITE: u16 = 9;
const IOCTL: u16 = 11;
const FLAG_RESPONSE: u32 = 0x1;
const FLAG_SIGNED: u32 = 0x8;
const SUCCESS: u32 = 0;
const MORE_PROCESSING_REQUIRED: u32 = 0xC000_0016;
const ACCESS_DENIED: u32 = 0xC000_0022;
const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
const CAP_LARGE_MTU: u32 = 0x4;
const CAP_ENCRYPTION: u32 = 0x40;
const SHAREFLAG_ENCRYPT_DATA: u32 = 0x8000;

// ---------------------------------------------------------------------------------------------
// the server under test
// ---------------------------------------------------------------------------------------------

/// A braid process on a free port with shares `plain` and `enc` (encrypt = true), stopped and
/// cleaned up on drop.
struct Braid {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Braid {
    /// Starts braid with `server_extra` appended to its `[server]` section, its shares in
    /// the temporary directory, or in /dev/shm (memory files: other write paths) when
    /// `server_extra` starts with `TMPFS`.
    fn start(server_extra: &str) -> Braid {
        let bin = braid_bin();
        let (base, server_extra) = match server_extra.strip_prefix(TMPFS) {
            Some(rest) => (PathBuf::from("/dev/shm"), rest),
            None => (std::env::temp_dir(), server_extra),
        };
        let dir = base.join(format!("braid-crypto-neg-{}-{}", std::process::id(), unique()));
        for share in ["plain", "enc"] {
            std::fs::create_dir_all(dir.join(share)).expect("share dir");
        }
        let port = free_port();
        let config = dir.join("braid.toml");
        let toml = format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n{server_extra}\n\n\
             [[share]]\nname = \"plain\"\npath = \"{plain}\"\n\n\
             [[share]]\nname = \"enc\"\npath = \"{enc}\"\nencrypt = true\n",
            plain = dir.join("plain").display(),
            enc = dir.join("enc").display(),
        );
        std::fs::write(&config, toml).expect("write config");
        add_user(&bin, &config, USER, PASSWORD);
        let child = serve(&bin, &config, &dir.join("braid.log"), port);
        Braid { child, port, dir }
    }

    fn path(&self, share: &str, name: &str) -> PathBuf {
        self.dir.join(share).join(name)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("braid.log")).unwrap_or_default()
    }

    /// The server is alive and serves a fresh client.
    fn assert_serving(&mut self) {
        assert!(self.child.try_wait().expect("try_wait").is_none(), "braid exited; log:\n{}", self.log());
        let _c = Client::on_share(self.port, "plain");
        assert!(!self.log().contains("panicked"), "braid panicked; log:\n{}", self.log());
    }
}

impl Drop for Braid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// a minimal SMB2 client
// ---------------------------------------------------------------------------------------------

fn put16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// One response: status and the whole message (header included).
struct Resp {
    status: u32,
    msg: Vec<u8>,
}

impl Resp {
    fn body(&self) -> &[u8] {
        &self.msg[64..]
    }
}

/// How a request is protected on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prot {
    Plain,
    Signed,
    Sealed,
}

/// What to do to a request after it has been protected.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tamper {
    None,
    /// Flip a bit of the signature (signed) or of the ciphertext (sealed).
    Bits,
    /// Put this session id in the TRANSFORM_HEADER instead of the sealing session's.
    TransformSession(u64),
}

/// Keys of one authenticated session.
struct Keys {
    signer: Signer,
    /// Client-to-server sealer (the server's decryption key) and server-to-client opener.
    seal: Option<Sealer>,
    open: Option<Sealer>,
}

struct Client {
    sock: TcpStream,
    mid: u64,
    dialect: u16,
    cipher: Option<Cipher>,
    signing: SigningAlgorithm,
    preauth: PreauthHash,
    sid: u64,
    tid: u32,
    keys: Option<Keys>,
    /// What NEGOTIATE sent, for VALIDATE_NEGOTIATE_INFO.
    capabilities: u32,
    guid: [u8; 16],
    security_mode: u16,
    dialects: Vec<u16>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let sock = common::connect(port);
        sock.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        sock.set_nodelay(true).expect("nodelay");
        Client {
            sock,
            mid: 0,
            dialect: 0,
            cipher: None,
            signing: SigningAlgorithm::AesCmac,
            preauth: PreauthHash::new(),
            sid: 0,
            tid: 0,
            keys: None,
            capabilities: 0,
            guid: [0x5A; 16],
            security_mode: 1,
            dialects: Vec::new(),
        }
    }

    /// A client with a 3.1.1 session (AES-128-GCM offered) and a tree connected to `share`.
    fn on_share(port: u16, share: &str) -> Client {
        let mut c = Client::connect(port);
        c.negotiate_311(&[Cipher::Aes128Gcm]);
        c.session_setup();
        c.tree_connect(share);
        c
    }

    /// A 64-byte sync header for the next message id.
    fn header(&mut self, cmd: u16, flags: u32) -> Vec<u8> {
        let mut h = Vec::with_capacity(64);
        h.extend_from_slice(&[0xFE, b'S', b'M', b'B']);
        put16(&mut h, 64);
        put16(&mut h, 1); // CreditCharge
        put32(&mut h, 0); // Status
        put16(&mut h, cmd);
        put16(&mut h, 64); // Credits requested
        put32(&mut h, flags);
        put32(&mut h, 0); // NextCommand
        put64(&mut h, self.mid);
        put32(&mut h, 0); // Reserved (ProcessId)
        put32(&mut h, self.tid);
        put64(&mut h, self.sid);
        h.extend_from_slice(&[0; 16]);
        self.mid += 1;
        h
    }

    fn send_frame(&mut self, payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("frame size");
        let mut f = len.to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        self.sock.write_all(&f).expect("send");
    }

    /// Sends one request (header + body), protected and tampered with as asked.
    fn send(&mut self, cmd: u16, body: &[u8], prot: Prot, tamper: Tamper) -> Vec<u8> {
        let flags = if prot == Prot::Signed { FLAG_SIGNED } else { 0 };
        let mut msg = self.header(cmd, flags);
        msg.extend_from_slice(body);
        match prot {
            Prot::Plain => {}
            Prot::Signed => {
                self.keys.as_ref().expect("keys").signer.sign(&mut msg);
                if tamper == Tamper::Bits {
                    msg[50] ^= 0x01;
                }
            }
            Prot::Sealed => {
                let mut buf = vec![0u8; 52];
                buf.extend_from_slice(&msg);
                self.keys.as_ref().and_then(|k| k.seal.as_ref()).expect("cipher keys").seal(self.sid, &mut buf).expect("seal");
                match tamper {
                    Tamper::None => {}
                    Tamper::Bits => {
                        let last = buf.len() - 1;
                        buf[last] ^= 0x80;
                    }
                    Tamper::TransformSession(sid) => buf[44..52].copy_from_slice(&sid.to_le_bytes()),
                }
                self.send_frame(&buf);
                return msg;
            }
        }
        self.send_frame(&msg);
        msg
    }

    /// Reads one frame; None when the server closed the connection.
    fn recv_frame(&mut self) -> Option<Vec<u8>> {
        let mut len = [0u8; 4];
        match self.sock.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => return None,
            Err(e) => panic!("reading a response: {e}"),
        }
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        self.sock.read_exact(&mut buf).ok()?;
        Some(buf)
    }

    /// Reads one (non-compound) response, decrypting and checking signatures.
    fn recv(&mut self) -> Resp {
        let mut msg = self.recv_frame().expect("the server closed the connection");
        if msg[..4] == [0xFD, b'S', b'M', b'B'] {
            let range = self.keys.as_ref().and_then(|k| k.open.as_ref()).expect("cipher keys").open(&mut msg).expect("decrypt response");
            msg = msg[range].to_vec();
        } else if get32(&msg, 16) & FLAG_SIGNED != 0 {
            if let Some(k) = &self.keys {
                assert!(k.signer.verify(&mut msg), "bad signature on a response");
            }
        }
        assert_eq!(msg[..4], [0xFE, b'S', b'M', b'B']);
        assert_ne!(get32(&msg, 16) & FLAG_RESPONSE, 0);
        Resp { status: get32(&msg, 8), msg }
    }

    fn call(&mut self, cmd: u16, body: &[u8], prot: Prot) -> Resp {
        self.send(cmd, body, prot, Tamper::None);
        self.recv()
    }

    /// The server must drop the connection without answering.
    fn assert_dropped(&mut self, what: &str) {
        if let Some(f) = self.recv_frame() {
            panic!("{what}: expected the connection to be dropped, got a {}-byte response", f.len());
        }
    }

    /// The usual protection once a session exists.
    fn prot(&self) -> Prot {
        if self.keys.is_some() {
            Prot::Signed
        } else {
            Prot::Plain
        }
    }

    // -- NEGOTIATE ------------------------------------------------------------------------

    fn negotiate_body(&mut self, dialects: &[u16], capabilities: u32, contexts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        self.capabilities = capabilities;
        self.dialects = dialects.to_vec();
        let mut b = Vec::new();
        put16(&mut b, 36);
        put16(&mut b, u16::try_from(dialects.len()).expect("dialects"));
        put16(&mut b, self.security_mode);
        put16(&mut b, 0);
        put32(&mut b, capabilities);
        b.extend_from_slice(&self.guid);
        let ctx_at = b.len();
        put32(&mut b, 0); // NegotiateContextOffset, patched below
        put16(&mut b, u16::try_from(contexts.len()).expect("contexts"));
        put16(&mut b, 0);
        for d in dialects {
            put16(&mut b, *d);
        }
        if !contexts.is_empty() {
            for (i, (t, data)) in contexts.iter().enumerate() {
                while (64 + b.len()) % 8 != 0 {
                    b.push(0);
                }
                if i == 0 {
                    let off = u32::try_from(64 + b.len()).expect("offset");
                    b[ctx_at..ctx_at + 4].copy_from_slice(&off.to_le_bytes());
                }
                put16(&mut b, *t);
                put16(&mut b, u16::try_from(data.len()).expect("context"));
                put32(&mut b, 0);
                b.extend_from_slice(data);
            }
        }
        b
    }

    /// Negotiates 3.1.1 offering `ciphers` and AES-CMAC/HMAC signing.
    fn negotiate_311(&mut self, ciphers: &[Cipher]) {
        let mut preauth = Vec::new();
        put16(&mut preauth, 1);
        put16(&mut preauth, 32);
        put16(&mut preauth, 1); // SHA-512
        preauth.extend_from_slice(&[0x11; 32]);
        let mut enc = Vec::new();
        put16(&mut enc, u16::try_from(ciphers.len()).expect("ciphers"));
        for c in ciphers {
            put16(&mut enc, c.id());
        }
        let mut sign = Vec::new();
        put16(&mut sign, 2);
        put16(&mut sign, SigningAlgorithm::AesCmac.id());
        put16(&mut sign, SigningAlgorithm::HmacSha256.id());
        let body = self.negotiate_body(&[0x0300, 0x0302, 0x0311], CAP_LARGE_MTU | CAP_ENCRYPTION, &[(1, preauth), (2, enc), (8, sign)]);
        let req = self.send(NEGOTIATE, &body, Prot::Plain, Tamper::None);
        let resp = self.recv();
        assert_eq!(resp.status, SUCCESS, "NEGOTIATE");
        self.preauth.update(&req);
        self.preauth.update(&resp.msg);
        self.read_negotiate(&resp);
        assert_eq!(self.dialect, 0x0311);
    }

    /// Negotiates 3.0.2 (no contexts); AES-128-CCM when the server offers encryption.
    fn negotiate_302(&mut self) {
        let body = self.negotiate_body(&[0x0202, 0x0210, 0x0300, 0x0302], CAP_LARGE_MTU | CAP_ENCRYPTION, &[]);
        let resp = self.call(NEGOTIATE, &body, Prot::Plain);
        assert_eq!(resp.status, SUCCESS, "NEGOTIATE");
        self.read_negotiate(&resp);
        assert_eq!(self.dialect, 0x0302);
        if get32(resp.body(), 24) & CAP_ENCRYPTION != 0 {
            self.cipher = Some(Cipher::Aes128Ccm);
        }
    }

    fn read_negotiate(&mut self, resp: &Resp) {
        let b = resp.body();
        self.dialect = get16(b, 4);
        if self.dialect != 0x0311 {
            return;
        }
        let count = usize::from(get16(b, 6));
        let mut at = get32(b, 60) as usize;
        for _ in 0..count {
            while at % 8 != 0 {
                at += 1;
            }
            let m = &resp.msg;
            let (t, len) = (get16(m, at), usize::from(get16(m, at + 2)));
            let data = &m[at + 8..at + 8 + len];
            match t {
                2 => self.cipher = Cipher::from_id(get16(data, 2)),
                8 => self.signing = SigningAlgorithm::from_id(get16(data, 2)).expect("signing algorithm"),
                _ => {}
            }
            at += 8 + len;
        }
    }

    // -- SESSION_SETUP --------------------------------------------------------------------

    /// Authenticates a new session on this connection and makes it current.
    fn session_setup(&mut self) {
        self.sid = 0;
        self.keys = None;
        let mut ntlm = NtlmClient::new(USER, "", PASSWORD);
        let mut token = ntlm.initial_token();
        let mut preauth = self.preauth.clone();
        loop {
            let mut body = Vec::new();
            put16(&mut body, 25);
            body.push(0); // Flags
            body.push(1); // SecurityMode: signing enabled
            put32(&mut body, 0);
            put32(&mut body, 0);
            put16(&mut body, 64 + 24);
            put16(&mut body, u16::try_from(token.len()).expect("token"));
            put64(&mut body, 0);
            body.extend_from_slice(&token);
            let req = self.send(SESSION_SETUP, &body, Prot::Plain, Tamper::None);
            // The final response is signed with keys not derived yet: read it raw.
            let mut resp = self.recv_frame().expect("SESSION_SETUP response");
            let status = get32(&resp, 8);
            preauth.update(&req);
            self.sid = get64(&resp, 40);
            let b = &resp[64..];
            let server_token = resp[usize::from(get16(b, 4))..usize::from(get16(b, 4)) + usize::from(get16(b, 6))].to_vec();
            if status == MORE_PROCESSING_REQUIRED {
                preauth.update(&resp);
                token = ntlm.step(&server_token).expect("NTLM").expect("AUTHENTICATE token");
                continue;
            }
            assert_eq!(status, SUCCESS, "SESSION_SETUP");
            assert!(ntlm.step(&server_token).expect("NTLM final").is_none());
            let key = ntlm.session_key().expect("session key");
            let keys = SessionKeys::derive(self.dialect, &key, (self.dialect == 0x0311).then_some(preauth.value()), self.cipher);
            let algo = if self.dialect == 0x0311 { self.signing } else { SigningAlgorithm::AesCmac };
            let signer = Signer::new(algo, &keys.signing);
            // The server signs the final response: this checks our key derivation.
            assert!(signer.verify(&mut resp), "final SESSION_SETUP signature");
            let (seal, open) = match self.cipher {
                Some(c) => (Some(Sealer::new(c, &keys.decrypt_c2s).expect("key")), Some(Sealer::new(c, &keys.encrypt_s2c).expect("key"))),
                None => (None, None),
            };
            self.keys = Some(Keys { signer, seal, open });
            return;
        }
    }

    // -- TREE_CONNECT, CREATE, WRITE, CLOSE, IOCTL ---------------------------------------------

    fn tree_connect_body(share: &str) -> Vec<u8> {
        let path = utf16(&format!("\\\\127.0.0.1\\{share}"));
        let mut b = Vec::new();
        put16(&mut b, 9);
        put16(&mut b, 0);
        put16(&mut b, 64 + 8);
        put16(&mut b, u16::try_from(path.len()).expect("path"));
        b.extend_from_slice(&path);
        b
    }

    /// Connects to `share` and makes it the current tree; returns its ShareFlags.
    fn tree_connect(&mut self, share: &str) -> u32 {
        let prot = self.prot();
        let resp = self.call(TREE_CONNECT, &Self::tree_connect_body(share), prot);
        assert_eq!(resp.status, SUCCESS, "TREE_CONNECT {share}");
        self.tid = get32(&resp.msg, 36);
        get32(resp.body(), 4)
    }

    fn create_body(name: &str) -> Vec<u8> {
        let name = utf16(name);
        let mut b = Vec::new();
        put16(&mut b, 57);
        b.push(0); // SecurityFlags
        b.push(0); // RequestedOplockLevel
        put32(&mut b, 2); // Impersonation
        put64(&mut b, 0);
        put64(&mut b, 0);
        put32(&mut b, 0x0012_019F); // GENERIC read/write as file rights
        put32(&mut b, 0x80); // FILE_ATTRIBUTE_NORMAL
        put32(&mut b, 7); // share read/write/delete
        put32(&mut b, 3); // FILE_OPEN_IF
        put32(&mut b, 0x40); // FILE_NON_DIRECTORY_FILE
        put16(&mut b, 64 + 56);
        put16(&mut b, u16::try_from(name.len()).expect("name"));
        put32(&mut b, 0);
        put32(&mut b, 0);
        b.extend_from_slice(&name);
        b
    }

    fn create(&mut self, name: &str, prot: Prot) -> Result<[u8; 16], u32> {
        let resp = self.call(CREATE, &Self::create_body(name), prot);
        if resp.status != SUCCESS {
            return Err(resp.status);
        }
        Ok(resp.body()[64..80].try_into().expect("FileId"))
    }

    fn write_body(fid: &[u8; 16], offset: u64, data: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        put16(&mut b, 49);
        put16(&mut b, 64 + 48);
        put32(&mut b, u32::try_from(data.len()).expect("data"));
        put64(&mut b, offset);
        b.extend_from_slice(fid);
        put32(&mut b, 0);
        put32(&mut b, 0);
        put16(&mut b, 0);
        put16(&mut b, 0);
        put32(&mut b, 0);
        b.extend_from_slice(data);
        b
    }

    fn close(&mut self, fid: &[u8; 16], prot: Prot) {
        let mut b = Vec::new();
        put16(&mut b, 24);
        put16(&mut b, 0);
        put32(&mut b, 0);
        b.extend_from_slice(fid);
        assert_eq!(self.call(CLOSE, &b, prot).status, SUCCESS, "CLOSE");
    }

    /// FSCTL_VALIDATE_NEGOTIATE_INFO with the given values.
    fn validate_negotiate_body(capabilities: u32, guid: &[u8; 16], security_mode: u16, dialects: &[u16]) -> Vec<u8> {
        let mut input = Vec::new();
        put32(&mut input, capabilities);
        input.extend_from_slice(guid);
        put16(&mut input, security_mode);
        put16(&mut input, u16::try_from(dialects.len()).expect("dialects"));
        for d in dialects {
            put16(&mut input, *d);
        }
        let mut b = Vec::new();
        put16(&mut b, 57);
        put16(&mut b, 0);
        put32(&mut b, FSCTL_VALIDATE_NEGOTIATE_INFO);
        b.extend_from_slice(&[0xFF; 16]);
        put32(&mut b, 64 + 56); // InputOffset
        put32(&mut b, u32::try_from(input.len()).expect("input"));
        put32(&mut b, 0);
        put32(&mut b, 0);
        put32(&mut b, 0);
        put32(&mut b, 24); // MaxOutputResponse
        put32(&mut b, 1); // SMB2_0_IOCTL_IS_FSCTL
        put32(&mut b, 0);
        b.extend_from_slice(&input);
        b
    }
}

/// A fresh file in `share` holding `content`, through an open handle of the current session.
fn prepared_file(c: &mut Client, name: &str, content: &[u8], prot: Prot) -> [u8; 16] {
    let fid = c.create(name, prot).expect("CREATE");
    let resp = c.call(WRITE, &Client::write_body(&fid, 0, content), prot);
    assert_eq!(resp.status, SUCCESS, "WRITE");
    fid
}

// ---------------------------------------------------------------------------------------------
// the tests
// ---------------------------------------------------------------------------------------------

#[test]
fn tampered_signature_drops_connection_and_writes_nothing() {
    let mut srv = Braid::start("");
    let mut c = Client::on_share(srv.port, "plain");
    let fid = prepared_file(&mut c, "f.txt", b"GOOD", Prot::Signed);
    assert_eq!(std::fs::read(srv.path("plain", "f.txt")).expect("file"), b"GOOD");
    c.send(WRITE, &Client::write_body(&fid, 0, b"EVIL"), Prot::Signed, Tamper::Bits);
    c.assert_dropped("tampered signature");
    assert_eq!(std::fs::read(srv.path("plain", "f.txt")).expect("file"), b"GOOD");
    srv.assert_serving();
}

#[test]
fn tampered_ciphertext_drops_connection_and_writes_nothing() {
    for cipher in [Cipher::Aes128Ccm, Cipher::Aes128Gcm, Cipher::Aes256Ccm, Cipher::Aes256Gcm] {
        let mut srv = Braid::start(&format!("ciphers = [\"{}\"]", cipher_name(cipher)));
        let mut c = Client::connect(srv.port);
        c.negotiate_311(&[cipher]);
        assert_eq!(c.cipher, Some(cipher));
        c.session_setup();
        assert_ne!(c.tree_connect("enc") & SHAREFLAG_ENCRYPT_DATA, 0, "enc share flags");
        let fid = prepared_file(&mut c, "f.txt", b"GOOD", Prot::Sealed);
        c.send(WRITE, &Client::write_body(&fid, 0, b"EVIL"), Prot::Sealed, Tamper::Bits);
        c.assert_dropped("tampered ciphertext");
        assert_eq!(std::fs::read(srv.path("enc", "f.txt")).expect("file"), b"GOOD", "{cipher:?}");
        srv.assert_serving();
    }
}

fn cipher_name(c: Cipher) -> &'static str {
    match c {
        Cipher::Aes128Ccm => "aes-128-ccm",
        Cipher::Aes128Gcm => "aes-128-gcm",
        Cipher::Aes256Ccm => "aes-256-ccm",
        Cipher::Aes256Gcm => "aes-256-gcm",
    }
}

#[test]
fn transform_header_naming_an_unknown_session_drops_connection() {
    let mut srv = Braid::start("");
    let mut c = Client::on_share(srv.port, "enc");
    let fid = prepared_file(&mut c, "f.txt", b"GOOD", Prot::Sealed);
    let other = c.sid ^ 0x0100_0000;
    c.send(WRITE, &Client::write_body(&fid, 0, b"EVIL"), Prot::Sealed, Tamper::TransformSession(other));
    c.assert_dropped("transform header with an unknown session id");
    assert_eq!(std::fs::read(srv.path("enc", "f.txt")).expect("file"), b"GOOD");
    srv.assert_serving();
}

#[test]
fn encrypted_request_naming_another_session_drops_connection() {
    let mut srv = Braid::start("");
    let mut c = Client::connect(srv.port);
    c.negotiate_311(&[Cipher::Aes128Gcm]);
    // Session A, whose keys the attacker has; then session B on the same connection.
    c.session_setup();
    let (a_sid, a_keys) = (c.sid, c.keys.take());
    c.session_setup();
    c.tree_connect("enc");
    let fid = prepared_file(&mut c, "f.txt", b"GOOD", Prot::Sealed);
    // A WRITE in B's session and tree, sealed with A's key and A's id in the transform header.
    let b_sid = c.sid;
    let b_keys = std::mem::replace(&mut c.keys, a_keys);
    let mut msg = c.header(WRITE, 0);
    msg[40..48].copy_from_slice(&b_sid.to_le_bytes());
    msg.extend_from_slice(&Client::write_body(&fid, 0, b"EVIL"));
    let mut buf = vec![0u8; 52];
    buf.extend_from_slice(&msg);
    c.keys.as_ref().and_then(|k| k.seal.as_ref()).expect("keys").seal(a_sid, &mut buf).expect("seal");
    c.send_frame(&buf);
    c.assert_dropped("sealed by one session, addressed to another");
    drop(b_keys);
    assert_eq!(std::fs::read(srv.path("enc", "f.txt")).expect("file"), b"GOOD");
    srv.assert_serving();
}

#[test]
fn unencrypted_request_to_encrypted_share_is_denied() {
    let mut srv = Braid::start("");
    let mut c = Client::connect(srv.port);
    c.negotiate_311(&[Cipher::Aes256Gcm, Cipher::Aes128Ccm]);
    c.session_setup();
    c.tree_connect("enc");
    // Signed but not encrypted: refused, and the connection stays usable.
    assert_eq!(c.create("clear.txt", Prot::Signed), Err(ACCESS_DENIED));
    assert!(!srv.path("enc", "clear.txt").exists());
    let fid = prepared_file(&mut c, "sealed.txt", b"OK", Prot::Sealed);
    c.close(&fid, Prot::Sealed);
    assert_eq!(std::fs::read(srv.path("enc", "sealed.txt")).expect("file"), b"OK");
    // An open handle on the encrypted share cannot be written in the clear either.
    let fid = c.create("sealed.txt", Prot::Sealed).expect("CREATE");
    assert_eq!(c.call(WRITE, &Client::write_body(&fid, 0, b"XX"), Prot::Signed).status, ACCESS_DENIED);
    assert_eq!(std::fs::read(srv.path("enc", "sealed.txt")).expect("file"), b"OK");
    srv.assert_serving();
}

#[test]
fn negotiate_311_without_preauth_context_is_refused() {
    let mut srv = Braid::start("");
    let mut c = Client::connect(srv.port);
    let mut enc = Vec::new();
    put16(&mut enc, 1);
    put16(&mut enc, Cipher::Aes128Gcm.id());
    let body = c.negotiate_body(&[0x0311], CAP_ENCRYPTION, &[(2, enc)]);
    c.send(NEGOTIATE, &body, Prot::Plain, Tamper::None);
    match c.recv_frame() {
        None => {}
        Some(f) => {
            let status = get32(&f, 8);
            assert_ne!(status, SUCCESS, "3.1.1 NEGOTIATE without preauth integrity accepted");
            // Not negotiated: a SESSION_SETUP must not be served.
            let mut s = Vec::new();
            put16(&mut s, 25);
            s.extend_from_slice(&[0; 22]);
            c.send(SESSION_SETUP, &s, Prot::Plain, Tamper::None);
            assert!(c.recv_frame().is_none_or(|f| get32(&f, 8) != SUCCESS && get32(&f, 8) != MORE_PROCESSING_REQUIRED));
        }
    }
    srv.assert_serving();
}

/// Connects on 3.0.2 with a signed session and a tree, ready for VALIDATE_NEGOTIATE_INFO.
fn validate_negotiate_client(port: u16) -> Client {
    let mut c = Client::connect(port);
    c.negotiate_302();
    c.session_setup();
    c.tree_connect("plain");
    c
}

/// Builds an altered VALIDATE_NEGOTIATE_INFO body from what a client really negotiated.
type Alteration = fn(&Client) -> Vec<u8>;

#[test]
fn validate_negotiate_detects_downgrade() {
    let mut srv = Braid::start("");
    // The truth passes (so the failures below are the alterations' doing).
    let mut c = validate_negotiate_client(srv.port);
    let body = Client::validate_negotiate_body(c.capabilities, &c.guid, c.security_mode, &c.dialects);
    let resp = c.call(IOCTL, &body, Prot::Signed);
    assert_eq!(resp.status, SUCCESS, "VALIDATE_NEGOTIATE_INFO with the real values");
    assert_eq!(get16(&resp.msg, 64 + 48 + 22), 0x0302, "validated dialect");

    // A man in the middle stripped 3.x from the dialects, or cleared the capabilities, or
    // the security mode.
    let alterations: [(&str, Alteration); 4] = [
        ("dialects", |c| Client::validate_negotiate_body(c.capabilities, &c.guid, c.security_mode, &[0x0202, 0x0210])),
        ("capabilities", |c| Client::validate_negotiate_body(c.capabilities & !CAP_ENCRYPTION, &c.guid, c.security_mode, &c.dialects)),
        ("security mode", |c| Client::validate_negotiate_body(c.capabilities, &c.guid, 0, &c.dialects)),
        ("client guid", |c| Client::validate_negotiate_body(c.capabilities, &[0; 16], c.security_mode, &c.dialects)),
    ];
    for (what, body) in alterations {
        let mut c = validate_negotiate_client(srv.port);
        let body = body(&c);
        c.send(IOCTL, &body, Prot::Signed, Tamper::None);
        c.assert_dropped(&format!("VALIDATE_NEGOTIATE_INFO with altered {what}"));
    }
    srv.assert_serving();
}

#[test]
fn signing_required_refuses_unsigned_tree_connect() {
    let mut srv = Braid::start("signing = \"required\"");
    let mut c = Client::connect(srv.port);
    c.negotiate_311(&[Cipher::Aes128Gcm]);
    c.session_setup();
    let resp = c.call(TREE_CONNECT, &Client::tree_connect_body("plain"), Prot::Plain);
    assert_eq!(resp.status, ACCESS_DENIED, "unsigned TREE_CONNECT");
    // The same request signed is served.
    assert_eq!(c.call(TREE_CONNECT, &Client::tree_connect_body("plain"), Prot::Signed).status, SUCCESS);
    // And a tampered one ends the connection.
    c.send(TREE_CONNECT, &Client::tree_connect_body("plain"), Prot::Signed, Tamper::Bits);
    c.assert_dropped("tampered TREE_CONNECT");
    srv.assert_serving();
}

// ---------------------------------------------------------------------------------------------
// zero-copy WRITE receive: a large unsigned WRITE's payload goes from the socket into a pipe
// before any check ran; it must reach the file only when every check passes.
// ---------------------------------------------------------------------------------------------

/// A payload large enough for the server's splice path (above 256 KiB).
fn big_payload(seed: u8) -> Vec<u8> {
    (0..(1usize << 20) + 3).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

impl Client {
    /// Sends an unsigned, unencrypted WRITE with the credit charge its size needs; with
    /// `cut` it sends only that many payload bytes and then stops sending.
    fn send_big_write(&mut self, fid: &[u8; 16], offset: u64, data: &[u8], cut: Option<usize>) {
        let f = self.big_write_frame(fid, offset, data);
        match cut {
            None => self.sock.write_all(&f).expect("send"),
            Some(n) => {
                self.sock.write_all(&f[..4 + 112 + n]).expect("send");
                self.sock.shutdown(std::net::Shutdown::Write).expect("shutdown");
            }
        }
    }

    /// The same WRITE sent in `pieces` parts with a pause after each, as a slow or
    /// congested client would: the server must wait for the rest and answer once it is in.
    fn send_big_write_slowly(&mut self, fid: &[u8; 16], offset: u64, data: &[u8], pieces: usize) {
        let f = self.big_write_frame(fid, offset, data);
        for part in f.chunks(f.len().div_ceil(pieces)) {
            self.sock.write_all(part).expect("send");
            self.sock.flush().expect("flush");
            std::thread::sleep(std::time::Duration::from_millis(60));
        }
    }

    fn big_write_frame(&mut self, fid: &[u8; 16], offset: u64, data: &[u8]) -> Vec<u8> {
        let charge = u16::try_from(data.len().div_ceil(65536)).expect("charge");
        let mut msg = self.header(WRITE, 0);
        msg[6..8].copy_from_slice(&charge.to_le_bytes());
        self.mid += u64::from(charge) - 1;
        msg.extend_from_slice(&Client::write_body(fid, offset, data));
        let mut f = u32::try_from(msg.len()).expect("frame").to_be_bytes().to_vec();
        f.extend_from_slice(&msg);
        f
    }
}

/// Marks a `Braid::start` argument whose shares live in /dev/shm.
const TMPFS: &str = "TMPFS";

/// Every receive path: the default (spliced into pipes), buffered while a connection is
/// alone (`splice_min_concurrent = 2`), and splicing off; and a spliced payload that
/// overwrites a memory file, which is copied into it through a mapping.
const RECEIVE_PATHS: [&str; 4] = ["", "splice_min_concurrent = 2", "splice_writes = false", "TMPFS"];

#[test]
fn large_plain_write_lands_whole() {
    for extra in RECEIVE_PATHS {
        large_plain_write_lands_whole_with(extra);
    }
}

fn large_plain_write_lands_whole_with(extra: &str) {
    let mut srv = Braid::start(extra);
    let mut c = Client::on_share(srv.port, "plain");
    let fid = prepared_file(&mut c, "big.bin", b"HEAD", Prot::Signed);
    // The first WRITE extends the file, the next ones overwrite it (through a mapping on
    // tmpfs), each with other bytes; each moves the last-write time as a write does.
    let mut mtime = None;
    for seed in 7..10 {
        // 1 MiB: all of it in one pipe, so no part goes through the write path.
        let data = big_payload(seed)[..1 << 20].to_vec();
        c.send_big_write(&fid, 4, &data, None);
        let resp = c.recv();
        assert_eq!(resp.status, SUCCESS, "large WRITE ({extra:?})");
        assert_eq!(get32(resp.body(), 4) as usize, data.len(), "Count");
        let on_disk = std::fs::read(srv.path("plain", "big.bin")).expect("file");
        assert_eq!(&on_disk[..4], b"HEAD");
        assert!(on_disk[4..] == data[..], "payload {seed} differs on disk ({extra:?})");
        let m = std::fs::metadata(srv.path("plain", "big.bin")).and_then(|m| m.modified()).expect("mtime");
        assert!(mtime.is_none_or(|t| m > t), "WRITE {seed} left the last-write time ({extra:?})");
        mtime = Some(m);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    srv.assert_serving();
}

/// Many large WRITEs in flight on one connection at once (a deep queue, spliced as well as
/// buffered): each lands whole at its own offset of an existing file, and every one is
/// answered.
#[test]
fn deep_queue_of_large_writes_lands_whole() {
    const WRITES: usize = 16;
    const ECHO: u16 = 13;
    for extra in RECEIVE_PATHS {
        let mut srv = Braid::start(extra);
        let mut c = Client::on_share(srv.port, "plain");
        let fid = prepared_file(&mut c, "deep.bin", b"X", Prot::Signed);
        let block = 1usize << 20;
        std::fs::write(srv.path("plain", "deep.bin"), vec![0xEE; WRITES * block]).expect("content");
        // Credits for all of them at once (each ECHO asks for 64 more).
        for _ in 0..8 {
            assert_eq!(c.call(ECHO, &[4, 0, 0, 0], Prot::Plain).status, SUCCESS, "ECHO");
        }
        let data: Vec<Vec<u8>> = (0..WRITES).map(|i| big_payload(i as u8 + 40)[..block].to_vec()).collect();
        for (i, d) in data.iter().enumerate() {
            c.send_big_write(&fid, (i * block) as u64, d, None);
        }
        for _ in 0..WRITES {
            let resp = c.recv();
            assert_eq!(resp.status, SUCCESS, "a WRITE of the deep queue ({extra:?})");
            assert_eq!(get32(resp.body(), 4) as usize, block, "Count ({extra:?})");
        }
        let on_disk = std::fs::read(srv.path("plain", "deep.bin")).expect("file");
        assert_eq!(on_disk.len(), WRITES * block);
        for (i, d) in data.iter().enumerate() {
            assert!(on_disk[i * block..(i + 1) * block] == d[..], "block {i} differs ({extra:?})");
        }
        srv.assert_serving();
    }
}

/// Small and large WRITEs back to back in one send, so that frames of every size start
/// and end inside what the server read ahead of them (a large WRITE whose first bytes were
/// read ahead is received into a buffer; the next one may be spliced): each lands whole.
#[test]
fn small_and_large_writes_in_one_stream_land_whole() {
    const ECHO: u16 = 13;
    let sizes = [100, 1 << 20, 4096, 300 << 10, 7, 20_000, 1 << 20, 1 << 20, 60, 16_300, 300 << 10];
    for extra in RECEIVE_PATHS {
        let mut srv = Braid::start(extra);
        let mut c = Client::on_share(srv.port, "plain");
        let fid = prepared_file(&mut c, "mixed.bin", b"X", Prot::Signed);
        for _ in 0..2 {
            assert_eq!(c.call(ECHO, &[4, 0, 0, 0], Prot::Plain).status, SUCCESS, "ECHO");
        }
        let mut stream = Vec::new();
        let mut expect = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let data = big_payload(i as u8 + 70)[..n].to_vec();
            stream.extend(c.big_write_frame(&fid, expect.len() as u64, &data));
            expect.extend(data);
        }
        c.sock.write_all(&stream).expect("send");
        // Responses may come back in any order.
        let mut counts: Vec<usize> = (0..sizes.len())
            .map(|_| {
                let resp = c.recv();
                assert_eq!(resp.status, SUCCESS, "a WRITE ({extra:?})");
                get32(resp.body(), 4) as usize
            })
            .collect();
        counts.sort_unstable();
        let mut want = sizes.to_vec();
        want.sort_unstable();
        assert_eq!(counts, want, "Counts ({extra:?})");
        let on_disk = std::fs::read(srv.path("plain", "mixed.bin")).expect("file");
        assert!(on_disk == expect, "the file differs from what was written ({extra:?})");
        srv.assert_serving();
    }
}

/// A large WRITE that trickles in: the server raises the socket's low-water mark to what
/// is missing while it waits, and must still wake for each remainder, the frame's last
/// bytes included, on both receive paths.
#[test]
fn large_write_sent_in_pieces_is_answered() {
    for extra in RECEIVE_PATHS {
        let mut srv = Braid::start(extra);
        let mut c = Client::on_share(srv.port, "plain");
        let fid = prepared_file(&mut c, "slow.bin", b"X", Prot::Signed);
        let data = big_payload(9);
        for pieces in [2, 5, 17] {
            c.send_big_write_slowly(&fid, 0, &data, pieces);
            // A reader that slept past the rest would leave recv to time out.
            let resp = c.recv();
            assert_eq!(resp.status, SUCCESS, "WRITE in {pieces} pieces ({extra:?})");
        }
        assert!(std::fs::read(srv.path("plain", "slow.bin")).expect("file") == data, "payload differs ({extra:?})");
        srv.assert_serving();
    }
}

#[test]
fn large_unsigned_write_is_refused_where_protection_is_required() {
    // An encrypt = true share: the unencrypted WRITE is denied and its payload discarded.
    let mut srv = Braid::start("");
    let mut c = Client::on_share(srv.port, "enc");
    let fid = prepared_file(&mut c, "f.bin", b"GOOD", Prot::Sealed);
    c.send_big_write(&fid, 0, &big_payload(1), None);
    assert_eq!(c.recv().status, ACCESS_DENIED, "unencrypted large WRITE to an encrypted share");
    assert_eq!(std::fs::read(srv.path("enc", "f.bin")).expect("file"), b"GOOD");
    // The connection stays in step: the next (sealed) request is served.
    c.close(&fid, Prot::Sealed);
    srv.assert_serving();

    // A server that requires signing: the unsigned WRITE is refused, nothing written.
    let mut srv = Braid::start("signing = \"required\"");
    let mut c = Client::on_share(srv.port, "plain");
    let fid = prepared_file(&mut c, "f.bin", b"GOOD", Prot::Signed);
    c.send_big_write(&fid, 0, &big_payload(2), None);
    if let Some(f) = c.recv_frame() {
        assert_ne!(get32(&f, 8), SUCCESS, "unsigned large WRITE on a signing-required session");
    }
    assert_eq!(std::fs::read(srv.path("plain", "f.bin")).expect("file"), b"GOOD");
    srv.assert_serving();
}

#[test]
fn large_write_cut_short_writes_nothing() {
    for extra in RECEIVE_PATHS {
        large_write_cut_short_writes_nothing_with(extra);
    }
}

fn large_write_cut_short_writes_nothing_with(extra: &str) {
    let mut srv = Braid::start(extra);
    let mut c = Client::on_share(srv.port, "plain");
    let fid = prepared_file(&mut c, "f.bin", b"GOOD", Prot::Signed);
    // Long enough that the WRITE would overwrite, not extend (the mapped path on tmpfs).
    let good: Vec<u8> = b"GOOD".iter().copied().cycle().take((1 << 20) + 8).collect();
    std::fs::write(srv.path("plain", "f.bin"), &good).expect("content");
    c.send_big_write(&fid, 0, &big_payload(3), Some(700 * 1024));
    c.assert_dropped("a WRITE whose payload never arrives");
    assert!(std::fs::read(srv.path("plain", "f.bin")).expect("file") == good, "a cut-off WRITE changed the file ({extra:?})");
    srv.assert_serving();
}
