//! [`Client`]: connection + session, tree connect, logoff, channel binding.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use smb_crypto::{Cipher, Sealer, SessionKeys, Signer, SigningAlgorithm};
use smb_wire::dialect::{self, SMB210, SMB300, SMB302, SMB311};
use smb_wire::msg::ioctl::{self, fsctl, IoctlRequest, FLAG_IS_FSCTL};
use smb_wire::msg::negotiate::{cap, SIGNING_REQUIRED};
use smb_wire::msg::session_setup::{SESSION_FLAG_ENCRYPT_DATA, SESSION_FLAG_IS_GUEST, SESSION_FLAG_IS_NULL};
use smb_wire::msg::simple;
use smb_wire::msg::tree::{share_flags, TreeConnectRequest, TreeConnectResponse};
use smb_wire::{Command, FileId};
use tokio::net::{TcpSocket, TcpStream};

use crate::conn::{Conn, Request, Response, Security, SendOpts};
use crate::session::{self, Authenticated, Negotiated};
use crate::{ClientError, NetworkInterface, Tree};

/// Deliberate deviations for [`Client::bind_channel_with`] (tests only).
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct BindTweaks {
    /// Authenticate the binding as this (user, password).
    pub credentials: Option<(String, String)>,
    /// Send the binding SESSION_SETUP unsigned.
    pub unsigned: bool,
    /// Negotiate these dialects on the new connection (and accept what comes).
    pub dialects: Option<Vec<u16>>,
    /// Use this ClientGuid instead of the session's.
    pub client_guid: Option<[u8; 16]>,
}

/// Everything needed to connect and log on.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// User name for NTLMv2.
    pub user: String,
    /// Clear-text password (only its NT hash is used).
    pub password: String,
    /// Domain (or workgroup) of the user; may be empty.
    pub domain: String,
    /// Dialects to offer (MS-SMB2 2.2.3); default 2.1, 3.0, 3.0.2, 3.1.1. 2.0.2 works but
    /// has no LARGE_MTU.
    pub dialects: Vec<u16>,
    /// Require signing: send SIGNING_REQUIRED and refuse unsigned responses. Requests of an
    /// authenticated (non-guest) session are signed either way.
    pub sign: bool,
    /// Encrypt every request after SESSION_SETUP (SMB 3.x only).
    pub encrypt: bool,
    /// Cipher preference for 3.1.1 (MS-SMB2 2.2.3.1.2); empty = AES-128-GCM, AES-128-CCM,
    /// AES-256-GCM, AES-256-CCM.
    pub ciphers: Vec<Cipher>,
    /// Cap on the negotiated read/write size in bytes.
    pub max_io: u32,
    /// Credits to keep requesting until granted: bounds requests in flight.
    pub credits_target: u16,
    /// Local address the connections are made from (None: the system picks). A load
    /// generator gives each client its own, e.g. one of 127.0.0.0/8 on loopback, so a server
    /// sees many hosts and applies its per-address limits to each.
    pub local_addr: Option<IpAddr>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            user: String::new(),
            password: String::new(),
            domain: String::new(),
            dialects: vec![SMB210, SMB300, SMB302, SMB311],
            sign: false,
            encrypt: false,
            ciphers: session::DEFAULT_CIPHERS.to_vec(),
            max_io: 8 << 20,
            credits_target: 512,
            local_addr: None,
        }
    }
}

impl ClientConfig {
    /// A TCP connection to `addr` from [`ClientConfig::local_addr`], if set.
    pub(crate) async fn dial(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let Some(local) = self.local_addr else { return TcpStream::connect(addr).await };
        let socket = if local.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        socket.bind(SocketAddr::new(local, 0))?;
        socket.connect(addr).await
    }

    pub(crate) fn effective_dialects(&self) -> Vec<u16> {
        if self.dialects.is_empty() {
            vec![SMB210, SMB300, SMB302, SMB311]
        } else {
            self.dialects.clone()
        }
    }
}

/// Session state shared by every channel of the session (MS-SMB2 3.2.1.3).
#[derive(Debug)]
pub(crate) struct SessionState {
    pub id: u64,
    /// Session.SigningKey (used to sign channel-binding requests).
    signing_key: Vec<u8>,
    /// Whether every request is signed: when either side requires signing. Like Windows and
    /// Samba's client, an unrequired session signs only what the protocol demands (the 3.1.1
    /// TREE_CONNECT), so servers can use their zero-copy paths.
    pub signed: bool,
    /// The session has a key (not guest or anonymous): it can sign and verify.
    pub keyed: bool,
    /// Session.EncryptData: every request is sealed.
    pub encrypt: bool,
    pub require_signed: bool,
    encryptor: Option<Arc<Sealer>>,
    decryptor: Option<Arc<Sealer>>,
}

#[derive(Debug)]
struct Inner {
    conn: Conn,
    cfg: ClientConfig,
    client_guid: [u8; 16],
    neg: Negotiated,
    session: Arc<SessionState>,
    max_read: u32,
    max_write: u32,
    max_transact: u32,
}

/// One TCP connection with one authenticated session. Clone it freely: clones share the
/// connection, and requests from any number of tasks run concurrently.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Biggest I/O a request carries whatever the server offers (MS-SMB2 suggests 8 MiB).
const MAX_IO: u32 = 8 << 20;
/// Without LARGE_MTU every request is single-credit: 64 KiB at most (MS-SMB2 3.2.4.1.5).
const SMALL_MTU: u32 = 64 * 1024;

impl Client {
    /// Connects, negotiates (3.1.1 contexts: SHA-512 preauth, ciphers, signing algorithms),
    /// authenticates with NTLMv2, derives the session keys and turns signing (and, if asked
    /// or required by the server, encryption) on (MS-SMB2 3.2.4.2).
    pub async fn connect(addr: SocketAddr, cfg: &ClientConfig) -> Result<Client, ClientError> {
        Client::connect_as(addr, cfg, rand::random(), 0).await
    }

    /// A new connection and session of this client after its connection was lost: the same
    /// configuration and ClientGuid, the old session named as PreviousSessionId so the
    /// server ends it at once, keeping its durable opens for [`crate::Tree::reconnect`]
    /// (MS-SMB2 3.2.4.2.3).
    pub async fn connect_again(&self, addr: SocketAddr) -> Result<Client, ClientError> {
        Client::connect_as(addr, &self.inner.cfg, self.inner.client_guid, self.inner.session.id).await
    }

    async fn connect_as(addr: SocketAddr, cfg: &ClientConfig, client_guid: [u8; 16], previous: u64) -> Result<Client, ClientError> {
        let stream = cfg.dial(addr).await?;
        let conn = Conn::start(stream, cfg.credits_target.max(io_credits(cfg.max_io)));
        let neg = session::negotiate(&conn, cfg, client_guid).await?;
        let (max_read, max_write, max_transact) = limits(&neg, cfg);
        conn.set_limits(neg.large_mtu(), max_read.max(max_write).max(max_transact));
        if cfg.encrypt && (!dialect::is_smb3(neg.dialect) || neg.cipher.is_none()) {
            return Err(ClientError::NotSupported("encryption: no SMB 3 dialect or no common cipher"));
        }

        let auth = session::authenticate(&conn, &neg, cfg, None, previous).await?;
        let guest = auth.session_flags & (SESSION_FLAG_IS_GUEST | SESSION_FLAG_IS_NULL) != 0;
        let keys = derive(&neg, &auth);
        if !guest {
            verify_final(&neg, &auth, &keys.signing)?;
        } else if cfg.sign || cfg.encrypt {
            return Err(ClientError::NotSupported("the server logged us on as guest: no signing or encryption"));
        }
        let encrypt = cfg.encrypt || auth.session_flags & SESSION_FLAG_ENCRYPT_DATA != 0;
        let (encryptor, decryptor) = sealers(&neg, &keys)?;
        let session = Arc::new(SessionState {
            id: auth.session_id,
            signing_key: keys.signing.clone(),
            signed: !guest && (cfg.sign || neg.security_mode & SIGNING_REQUIRED != 0),
            keyed: !guest,
            encrypt,
            require_signed: !guest && (cfg.sign || neg.security_mode & SIGNING_REQUIRED != 0),
            encryptor,
            decryptor,
        });
        conn.set_security(Some(Arc::new(security(&session, &neg, &keys.signing))));
        Ok(Client { inner: Arc::new(Inner { conn, cfg: cfg.clone(), client_guid, neg, session, max_read, max_write, max_transact }) })
    }

    /// The negotiated dialect, e.g. 0x0311.
    pub fn dialect(&self) -> u16 {
        self.inner.neg.dialect
    }

    /// Largest READ this client sends: the server's MaxReadSize capped by `max_io`.
    pub fn max_read(&self) -> u32 {
        self.inner.max_read
    }

    /// Largest WRITE this client sends: the server's MaxWriteSize capped by `max_io`.
    pub fn max_write(&self) -> u32 {
        self.inner.max_write
    }

    /// Whether requests of this session are encrypted.
    pub fn is_encrypted(&self) -> bool {
        self.inner.session.encrypt
    }

    /// The cipher negotiated for this connection, if any.
    pub fn cipher(&self) -> Option<Cipher> {
        self.inner.neg.cipher
    }

    /// The signing algorithm of this connection (MS-SMB2 3.1.4.1).
    pub fn signing_algorithm(&self) -> SigningAlgorithm {
        self.inner.neg.signing
    }

    /// Connects to `\\server\share` (MS-SMB2 3.2.4.2.4).
    pub async fn tree_connect(&self, share: &str) -> Result<Tree, ClientError> {
        let path = format!("\\\\{}\\{}", self.server_name(), share);
        let mut r = self.request(Command::TreeConnect, 0, false);
        TreeConnectRequest { flags: 0, path }.encode(r.body());
        let resp = self.call(r, "TREE_CONNECT").await?;
        let tc = TreeConnectResponse::decode(resp.msg())?;
        Ok(Tree::new(self.clone(), resp.hdr.tree_id.0, tc.share_flags & share_flags::ENCRYPT_DATA != 0, tc.share_type))
    }

    /// Ends the session (MS-SMB2 3.2.4.3). Other clones of this client fail afterwards.
    pub async fn logoff(self) -> Result<(), ClientError> {
        let r = self.request(Command::Logoff, 0, false);
        let mut r = r;
        simple::encode_empty_request(r.body());
        let resp = self.call(r, "LOGOFF").await?;
        simple::decode_empty_response(resp.msg())?;
        Ok(())
    }

    /// Binds one more channel to this session on a new connection to `addr`
    /// (multichannel, MS-SMB2 3.2.4.2.3 / 3.2.5.3): same ClientGuid and dialect, a
    /// SESSION_SETUP with SMB2_SESSION_FLAG_BINDING signed with Session.SigningKey, then a
    /// per-channel signing key (3.1.1: derived from the channel's own preauth hash). The
    /// returned client shares the session (and its trees) with `self`.
    ///
    /// Fails with [`ClientError::NotSupported`] if the server did not announce
    /// MULTI_CHANNEL or the dialect is below 3.0.
    pub async fn bind_channel(&self, addr: SocketAddr) -> Result<Client, ClientError> {
        self.bind_channel_with(addr, &BindTweaks::default()).await
    }

    /// Test hook: [`Client::bind_channel`] with deliberate deviations, to check that a
    /// server refuses bad bindings.
    #[doc(hidden)]
    pub async fn bind_channel_with(&self, addr: SocketAddr, tweaks: &BindTweaks) -> Result<Client, ClientError> {
        let me = &self.inner;
        if !dialect::is_smb3(me.neg.dialect) || me.neg.capabilities & cap::MULTI_CHANNEL == 0 {
            return Err(ClientError::NotSupported("the server does not support multichannel"));
        }
        if !me.session.keyed {
            return Err(ClientError::NotSupported("guest sessions cannot be bound"));
        }
        let stream = me.cfg.dial(addr).await?;
        let conn = Conn::start(stream, me.cfg.credits_target.max(io_credits(me.cfg.max_io)));
        let mut cfg = me.cfg.clone();
        // The channel must use the session's dialect (MS-SMB2 3.3.5.5.2).
        cfg.dialects = tweaks.dialects.clone().unwrap_or_else(|| vec![me.neg.dialect]);
        if let Some((user, password)) = &tweaks.credentials {
            cfg.user.clone_from(user);
            cfg.password.clone_from(password);
        }
        let client_guid = tweaks.client_guid.unwrap_or(me.client_guid);
        let neg = session::negotiate(&conn, &cfg, client_guid).await?;
        if tweaks.dialects.is_none() && (neg.dialect != me.neg.dialect || neg.signing != me.neg.signing || neg.cipher != me.neg.cipher) {
            return Err(ClientError::Protocol("second channel negotiated different parameters"));
        }
        let (max_read, max_write, max_transact) = limits(&neg, &cfg);
        conn.set_limits(neg.large_mtu(), max_read.max(max_write).max(max_transact));
        // Binding requests are signed with Session.SigningKey.
        conn.set_security(Some(Arc::new(Security {
            session_id: me.session.id,
            signer: (!tweaks.unsigned).then(|| Signer::new(neg.signing, &me.session.signing_key)),
            encryptor: None,
            decryptor: None,
            require_signed: false,
        })));
        let auth = session::authenticate(&conn, &neg, &cfg, Some(me.session.id), 0).await?;
        if auth.session_id != me.session.id {
            return Err(ClientError::Protocol("binding answered for another session"));
        }
        // Channel.SigningKey comes from this authentication's key and, for 3.1.1, the
        // channel's preauth hash (MS-SMB2 3.2.5.3.1).
        let channel_keys = derive(&neg, &auth);
        verify_final(&neg, &auth, &channel_keys.signing)?;
        conn.set_security(Some(Arc::new(security(&me.session, &neg, &channel_keys.signing))));
        Ok(Client { inner: Arc::new(Inner { conn, cfg, client_guid, neg, session: me.session.clone(), max_read, max_write, max_transact }) })
    }

    /// Test hook: kills this client's connection (all clones of it), as if the network
    /// failed. Other channels of the session are not touched.
    #[doc(hidden)]
    pub fn abort_connection(&self) {
        self.inner.conn.abort();
    }

    /// Lists the server's network interfaces with FSCTL_QUERY_NETWORK_INTERFACE_INFO
    /// (MS-SMB2 2.2.32.5), sent on `tree` (usually IPC$).
    pub async fn query_interfaces(&self, tree: &Tree) -> Result<Vec<NetworkInterface>, ClientError> {
        let mut r = self.request(Command::Ioctl, tree.id(), tree.encrypts());
        IoctlRequest {
            ctl_code: fsctl::QUERY_NETWORK_INTERFACE_INFO,
            // This FSCTL is not about a file: FileId is all ones (MS-SMB2 3.2.4.20.10).
            file_id: FileId::RELATED,
            input: &[],
            max_input_response: 0,
            max_output_response: 64 * 1024,
            flags: FLAG_IS_FSCTL,
        }
        .encode(r.body());
        let resp = self.call(r, "IOCTL").await?;
        Ok(ioctl::decode_network_interfaces(ioctl::decode_response(resp.msg())?)?)
    }

    // ---- crate-internal request plumbing ----------------------------------------------

    fn server_name(&self) -> String {
        // The IP literal is what UNC paths to an address use; the server ignores the name.
        match self.inner.conn_peer() {
            Some(a) => a.ip().to_string(),
            None => "server".into(),
        }
    }

    /// Whether a request to a tree (share flag `tree_encrypt`) is sealed.
    pub(crate) fn encrypts(&self, tree_encrypt: bool) -> bool {
        self.inner.session.encrypt || (tree_encrypt && self.inner.session.decryptor.is_some())
    }

    /// Starts a request to `tree_id`.
    pub(crate) fn request(&self, command: Command, tree_id: u32, tree_encrypt: bool) -> Request {
        Request::new(command, tree_id, self.encrypts(tree_encrypt))
    }

    /// [`Client::request`] with room for a body of `body` bytes.
    pub(crate) fn request_with_room(&self, command: Command, tree_id: u32, tree_encrypt: bool, body: usize) -> Request {
        Request::with_body_room(command, tree_id, self.encrypts(tree_encrypt), body)
    }

    fn opts(&self, encrypted: bool) -> SendOpts {
        SendOpts { encrypt: encrypted, sign: self.inner.session.signed, verify: true, capture: false, session_id: None }
    }

    /// Sends one request and returns its response, an error status becoming
    /// [`ClientError::Status`].
    pub(crate) async fn call(&self, req: Request, command: &'static str) -> Result<Response, ClientError> {
        self.call_raw(req).await?.check(command)
    }

    /// Sends one request and returns its response whatever the status.
    pub(crate) async fn call_raw(&self, req: Request) -> Result<Response, ClientError> {
        let mut opts = self.opts(req.encrypted());
        // MS-SMB2 3.2.4.1.1: a 3.1.1 TREE_CONNECT is signed whenever the session can sign.
        if req.command == Command::TreeConnect && self.inner.neg.dialect == dialect::SMB311 && self.inner.session.keyed {
            opts.sign = true;
        }
        Ok(self.inner.conn.call(req, opts).await?.0)
    }

    /// Sends `req` followed by `payload` written from the caller's buffer, when the request
    /// needs neither signing nor sealing; otherwise the payload is appended and sent as usual.
    pub(crate) async fn call_payload(&self, mut req: Request, payload: bytes::Bytes, command: &'static str) -> Result<Response, ClientError> {
        let opts = self.opts(req.encrypted());
        if opts.encrypt {
            return self.call_sealed(req, &payload, command).await;
        }
        if opts.sign {
            req.body().extend_from_slice(&payload);
            return self.call(req, command).await;
        }
        self.inner.conn.call_with_payload(req, payload, opts).await?.check(command)
    }

    /// Sends a sealed request whose last bytes are `payload`, encrypted straight from it
    /// (see `Conn::call_sealed_payload`).
    pub(crate) async fn call_sealed(&self, req: Request, payload: &[u8], command: &'static str) -> Result<Response, ClientError> {
        let opts = self.opts(req.encrypted());
        self.inner.conn.call_sealed_payload(req, payload, opts).await?.check(command)
    }

    /// Sends a WRITE built in the caller's frame (see `Conn::call_framed`): plain or signed,
    /// never sealed.
    pub(crate) async fn call_framed(&self, req: Request, frame: &mut bytes::BytesMut, command: &'static str) -> Result<Response, ClientError> {
        let opts = self.opts(req.encrypted());
        self.inner.conn.call_framed(req, frame, opts).await?.check(command)
    }

    /// Sends related requests as one compound frame.
    pub(crate) async fn call_compound(&self, reqs: Vec<Request>) -> Result<Vec<Result<Response, ClientError>>, ClientError> {
        let encrypted = reqs.first().is_some_and(|r| r.encrypted());
        self.inner.conn.call_compound(reqs, self.opts(encrypted)).await
    }

    /// Credits a request moving `bytes` costs (MS-SMB2 3.2.4.1.5).
    pub(crate) fn charge(&self, bytes: u32) -> u16 {
        if self.inner.neg.large_mtu() {
            (bytes.div_ceil(64 * 1024).max(1)).min(u32::from(u16::MAX)) as u16
        } else {
            1
        }
    }

    pub(crate) fn max_transact(&self) -> u32 {
        self.inner.max_transact
    }
}

impl Inner {
    fn conn_peer(&self) -> Option<SocketAddr> {
        self.conn.peer()
    }
}

/// Read/write/transact sizes: the server's, capped by `max_io`, 8 MiB, and 64 KiB
/// without LARGE_MTU.
fn limits(neg: &Negotiated, cfg: &ClientConfig) -> (u32, u32, u32) {
    let cap = if neg.large_mtu() { cfg.max_io.clamp(SMALL_MTU, MAX_IO) } else { SMALL_MTU };
    let f = |v: u32| v.min(cap).max(1);
    (f(neg.max_read), f(neg.max_write), f(neg.max_transact))
}

/// Credits one maximal I/O needs, so the credit target can always cover it.
fn io_credits(max_io: u32) -> u16 {
    (max_io.min(MAX_IO).div_ceil(64 * 1024) + 2) as u16
}

fn derive(neg: &Negotiated, auth: &Authenticated) -> SessionKeys {
    let preauth = auth.preauth.as_ref().map(|p| *p.value());
    SessionKeys::derive(neg.dialect, &auth.session_key, preauth.as_ref(), neg.cipher)
}

/// The final SESSION_SETUP response must be signed with the new key (MS-SMB2 3.2.5.3.1);
/// 3.1.1 servers always sign it, older dialects when signing is in use.
fn verify_final(neg: &Negotiated, auth: &Authenticated, key: &[u8]) -> Result<(), ClientError> {
    let resp = &auth.final_response;
    if resp.hdr.is_signed() {
        let mut msg = resp.msg().to_vec();
        if !Signer::new(neg.signing, key).verify(&mut msg) {
            return Err(ClientError::Protocol("final SESSION_SETUP response signature does not verify"));
        }
    } else if neg.dialect == SMB311 {
        return Err(ClientError::Protocol("final SESSION_SETUP response is not signed"));
    }
    Ok(())
}

/// Client sealers: SessionKeys are named from the server's side, so the client encrypts
/// with the server's decryption key and decrypts with its encryption key.
/// (encryptor, decryptor) of a session.
type Sealers = (Option<Arc<Sealer>>, Option<Arc<Sealer>>);

fn sealers(neg: &Negotiated, keys: &SessionKeys) -> Result<Sealers, ClientError> {
    // Keys exist whenever a cipher was agreed, so a share that demands encryption can get it
    // even if the session does not.
    let Some(cipher) = neg.cipher.filter(|_| dialect::is_smb3(neg.dialect)) else { return Ok((None, None)) };
    if keys.decrypt_c2s.len() != cipher.key_len() {
        return Ok((None, None));
    }
    Ok((Some(Arc::new(Sealer::new(cipher, &keys.decrypt_c2s)?)), Some(Arc::new(Sealer::new(cipher, &keys.encrypt_s2c)?))))
}

fn security(session: &SessionState, neg: &Negotiated, signing_key: &[u8]) -> Security {
    Security {
        session_id: session.id,
        signer: session.keyed.then(|| Signer::new(neg.signing, signing_key)),
        encryptor: session.encryptor.clone(),
        decryptor: session.decryptor.clone(),
        require_signed: session.require_signed,
    }
}
