//! The [`Target`]/[`Session`]/[`BenchFile`] traits for Braid's SMB client.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use smb_client::{Client, ClientConfig, ClientError, CreateOptions, NtStatus, Tree};
use smb_crypto::Cipher;

use crate::session::{BenchFile, OpenMode, Session, Target};
use crate::url::TargetUrl;
use crate::BenchError;

/// How long connecting, negotiating and logging on may take before we give up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Security options of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmbOptions {
    /// Sign every request.
    pub sign: bool,
    /// Encrypt every request.
    pub encrypt: bool,
    /// The only cipher offered (None: the client's default list).
    pub cipher: Option<Cipher>,
    /// Ask for a durable v2 open (DH2Q with a batch oplock) on every file open.
    pub durable: bool,
    /// With `durable`: ask for persistent handles (a continuously available share).
    pub persistent: bool,
}

/// Parses `aes-128-gcm`, `aes-128-ccm`, `aes-256-gcm` or `aes-256-ccm`.
pub fn parse_cipher(s: &str) -> Result<Cipher, BenchError> {
    match s.to_ascii_lowercase().as_str() {
        "aes-128-gcm" | "aes128gcm" => Ok(Cipher::Aes128Gcm),
        "aes-128-ccm" | "aes128ccm" => Ok(Cipher::Aes128Ccm),
        "aes-256-gcm" | "aes256gcm" => Ok(Cipher::Aes256Gcm),
        "aes-256-ccm" | "aes256ccm" => Ok(Cipher::Aes256Ccm),
        _ => Err(BenchError::BadInput(format!("--cipher {s:?}: expected aes-128-gcm, aes-128-ccm, aes-256-gcm or aes-256-ccm"))),
    }
}

/// A server reached through Braid's SMB client.
#[derive(Debug, Clone)]
pub struct SmbTarget {
    url: TargetUrl,
    addr: SocketAddr,
    cfg: ClientConfig,
    durable: bool,
    persistent: bool,
}

impl SmbTarget {
    /// Resolves the host now so a bad name fails before anything runs.
    pub fn new(url: TargetUrl, password: String, opts: SmbOptions) -> Result<Self, BenchError> {
        let addr = url.resolve()?;
        let mut cfg = ClientConfig {
            user: url.user.clone(),
            password,
            domain: url.domain.clone().unwrap_or_default(),
            sign: opts.sign,
            encrypt: opts.encrypt,
            ..ClientConfig::default()
        };
        if let Some(c) = opts.cipher {
            cfg.ciphers = vec![c];
        }
        Ok(Self { url, addr, cfg, durable: opts.durable || opts.persistent, persistent: opts.persistent })
    }

    fn connect_error(&self, e: ClientError) -> BenchError {
        let hint = match e.status() {
            Some(NtStatus::LOGON_FAILURE) => " (wrong user name or password)",
            Some(NtStatus::BAD_NETWORK_NAME) => " (no such share)",
            Some(NtStatus::ACCESS_DENIED) => " (access denied)",
            _ => "",
        };
        let msg = match e {
            ClientError::Io(io) => format!("cannot connect to {}: {io}", self.addr),
            e => format!("{e}{hint}"),
        };
        BenchError::Connect { target: self.url.to_string(), msg }
    }
}

/// One channel of a session and the share's tree on it.
#[derive(Clone)]
pub struct SmbSession {
    client: Client,
    tree: Tree,
    addr: SocketAddr,
    durable: bool,
    persistent: bool,
    /// With --durable: how the session comes back after losing its connection.
    link: Option<Arc<Link>>,
}

impl SmbSession {
    /// The share's tree on this session's channel.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }
}

fn io_err(e: ClientError) -> BenchError {
    match e {
        ClientError::NotSupported(m) => BenchError::NotSupported(m.to_string()),
        e => BenchError::Io(e.to_string()),
    }
}

fn io_err_at(path: &str) -> impl Fn(ClientError) -> BenchError + '_ {
    move |e| match io_err(e) {
        BenchError::Io(m) => BenchError::Io(format!("{path}: {m}")),
        other => other,
    }
}

impl Target for SmbTarget {
    type Session = SmbSession;

    fn describe(&self) -> String {
        self.url.to_string()
    }

    async fn connect(&self) -> Result<SmbSession, BenchError> {
        self.connect_from(None).await
    }

    async fn connect_from(&self, source: Option<IpAddr>) -> Result<SmbSession, BenchError> {
        let cfg = ClientConfig { local_addr: source.or(self.cfg.local_addr), ..self.cfg.clone() };
        let work = async {
            let client = Client::connect(self.addr, &cfg).await.map_err(|e| self.connect_error(e))?;
            let tree = client.tree_connect(&self.url.share).await.map_err(|e| self.connect_error(e))?;
            let link = self.durable.then(|| {
                Arc::new(Link {
                    target: self.clone(),
                    cur: RwLock::new((tree.clone(), 0)),
                    renewing: tokio::sync::Mutex::new(()),
                    reconnects: AtomicU64::new(0),
                })
            });
            Ok(SmbSession { client, tree, addr: self.addr, durable: self.durable, persistent: self.persistent, link })
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, work).await {
            Ok(r) => r,
            Err(_) => Err(BenchError::Connect {
                target: self.url.to_string(),
                msg: format!("timed out after {}s connecting to {}", CONNECT_TIMEOUT.as_secs(), self.addr),
            }),
        }
    }
}

fn not_found(e: &ClientError) -> bool {
    matches!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::OBJECT_PATH_NOT_FOUND))
}

impl Session for SmbSession {
    type File = SmbFile;

    async fn bind_channel(&self) -> Result<Self, BenchError> {
        let ch = self.client.bind_channel(self.addr).await.map_err(io_err)?;
        Ok(SmbSession { tree: self.tree.on_channel(&ch), client: ch, ..self.clone() })
    }

    fn max_io(&self) -> u32 {
        self.client.max_read().min(self.client.max_write())
    }

    fn adopt(&self, file: &SmbFile) -> SmbFile {
        match file {
            SmbFile::Plain(f) => SmbFile::Plain(f.on_channel(&self.client)),
            // --durable runs on one channel.
            SmbFile::Durable(d) => SmbFile::Durable(d.clone()),
        }
    }

    fn reconnects(&self) -> u64 {
        self.link.as_ref().map_or(0, |l| l.reconnects.load(Ordering::Relaxed))
    }

    async fn open(&self, path: &str, mode: OpenMode) -> Result<SmbFile, BenchError> {
        let mut opts = match mode {
            OpenMode::Read => CreateOptions::open_read(),
            OpenMode::ReadWrite => CreateOptions::open_rw(),
            OpenMode::CreateOverwrite => CreateOptions::create_overwrite(),
        };
        if self.durable {
            opts.durable = Some(smb_client::new_create_guid());
            opts.persistent = self.persistent;
        }
        let (f, gen) = match &self.link {
            Some(link) => link.create(path, &opts).await,
            None => self.tree.create(path, &opts).await.map(|f| (f, 0)),
        }
        .map_err(io_err_at(path))?;
        Ok(match (&self.link, f.create_guid()) {
            (Some(link), Some(guid)) => SmbFile::Durable(Arc::new(DurableFile {
                link: link.clone(),
                path: path.to_string(),
                opts,
                guid,
                cur: RwLock::new((f, gen)),
                reclaiming: tokio::sync::Mutex::new(()),
            })),
            _ => SmbFile::Plain(f),
        })
    }

    async fn file_size(&self, path: &str) -> Result<Option<u64>, BenchError> {
        match self.tree.stat(path).await {
            Ok(st) => Ok(Some(st.size)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(io_err_at(path)(e)),
        }
    }

    async fn mkdir(&self, path: &str) -> Result<(), BenchError> {
        match self.tree.mkdir(path).await {
            Err(e) if e.status() != Some(NtStatus::OBJECT_NAME_COLLISION) => Err(io_err_at(path)(e)),
            _ => Ok(()),
        }
    }

    async fn remove(&self, path: &str) -> Result<(), BenchError> {
        self.tree.remove(path).await.map_err(io_err_at(path))
    }

    async fn rmdir(&self, path: &str) -> Result<(), BenchError> {
        self.tree.rmdir(path).await.map_err(io_err_at(path))
    }

    async fn stat(&self, path: &str) -> Result<u64, BenchError> {
        self.tree.stat(path).await.map(|s| s.size).map_err(io_err_at(path))
    }

    async fn list(&self, dir: &str) -> Result<u64, BenchError> {
        let d = self.tree.create(dir, &CreateOptions::open_dir()).await.map_err(io_err_at(dir))?;
        let listed = d.list("*").await;
        // Closed whatever the listing did, so a failed listing leaks no handle.
        let closed = d.close().await;
        let entries = listed.map_err(io_err_at(dir))?;
        closed.map_err(io_err_at(dir))?;
        Ok(entries.iter().filter(|e| e.name != "." && e.name != "..").count() as u64)
    }
}

/// The connection of a --durable session: the current tree and its generation, replaced by a
/// new connection (NEGOTIATE, SESSION_SETUP as the same user, TREE_CONNECT) when it is lost.
pub struct Link {
    target: SmbTarget,
    cur: RwLock<(Tree, u64)>,
    /// One reconnect at a time; the others wait and use its result.
    renewing: tokio::sync::Mutex<()>,
    reconnects: AtomicU64,
}

/// How many times an operation is retried after a lost connection.
const RECONNECT_TRIES: u32 = 3;

impl Link {
    /// A tree on a connection newer than generation `seen`, connecting one if needed.
    async fn renew(&self, seen: u64) -> Result<(Tree, u64), ClientError> {
        let _one = self.renewing.lock().await;
        let cur = self.cur.read().unwrap_or_else(|e| e.into_inner()).clone();
        if cur.1 > seen {
            return Ok(cur);
        }
        // The same client again (ClientGuid), naming the lost session so the server hands
        // its durable opens over at once.
        let client = cur.0.client().connect_again(self.target.addr).await?;
        let tree = client.tree_connect(&self.target.url.share).await?;
        let next = (tree, cur.1 + 1);
        *self.cur.write().unwrap_or_else(|e| e.into_inner()) = next.clone();
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        Ok(next)
    }

    /// A CREATE on the current connection; when that connection is lost before the answer,
    /// sent again on a new one as a replay (same CreateGuid: the server answers with the
    /// open the first CREATE made, if it made one). Returns the open and its generation.
    async fn create(&self, path: &str, opts: &CreateOptions) -> Result<(smb_client::File, u64), ClientError> {
        let mut tries = 0;
        loop {
            let (tree, gen) = self.cur.read().unwrap_or_else(|e| e.into_inner()).clone();
            let r = if tries == 0 { tree.create(path, opts).await } else { tree.create_replay(path, opts).await };
            match r {
                Err(ClientError::Disconnected | ClientError::Io(_)) if tries < RECONNECT_TRIES => {
                    tries += 1;
                    if self.renew(gen).await.is_err() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                r => return r.map(|f| (f, gen)),
            }
        }
    }
}

/// A durable v2 open that follows its session onto a new connection (DH2C).
pub struct DurableFile {
    link: Arc<Link>,
    path: String,
    opts: CreateOptions,
    guid: [u8; 16],
    /// The open and the generation of the connection it is on.
    cur: RwLock<(smb_client::File, u64)>,
    reclaiming: tokio::sync::Mutex<()>,
}

impl DurableFile {
    fn current(&self) -> (smb_client::File, u64) {
        self.cur.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Moves the open, last used on connection `seen`, onto a newer connection.
    async fn reclaim(&self, seen: u64) -> Result<(), ClientError> {
        let _one = self.reclaiming.lock().await;
        let (old, gen) = self.current();
        if gen > seen {
            return Ok(());
        }
        let (tree, gen) = self.link.renew(seen).await?;
        let f = tree.reconnect(&self.path, &self.opts, old.file_id(), self.guid).await?;
        *self.cur.write().unwrap_or_else(|e| e.into_inner()) = (f, gen);
        Ok(())
    }

    /// Runs `op` on the open, reclaiming it on a new connection and running it again when the
    /// connection is lost: reads and writes at a given offset are idempotent.
    async fn retry<T, Fut>(&self, op: impl Fn(smb_client::File) -> Fut) -> Result<T, BenchError>
    where
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let mut tries = 0;
        loop {
            let (f, gen) = self.current();
            // A retry may repeat what the server already did: it says so (3.x), as the
            // replay rules want (MS-SMB2 3.2.4.1.1).
            let f = if tries > 0 { f.replaying() } else { f };
            match op(f).await {
                Err(ClientError::Disconnected | ClientError::Io(_)) if tries < RECONNECT_TRIES => {
                    tries += 1;
                    if self.reclaim(gen).await.is_err() {
                        // The server may still hold the open for the old connection.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                r => return r.map_err(io_err),
            }
        }
    }
}

/// An open file of an [`SmbSession`]: plain, or durable and reconnecting.
#[derive(Clone)]
pub enum SmbFile {
    Plain(smb_client::File),
    Durable(Arc<DurableFile>),
}

impl BenchFile for SmbFile {
    type Data = Bytes;

    async fn read(&self, offset: u64, len: u32) -> Result<Bytes, BenchError> {
        match self {
            SmbFile::Plain(f) => f.read(offset, len).await.map_err(io_err),
            SmbFile::Durable(d) => d.retry(|f| async move { f.read(offset, len).await }).await,
        }
    }

    async fn write(&self, offset: u64, data: &[u8]) -> Result<u32, BenchError> {
        match self {
            SmbFile::Plain(f) => f.write(offset, data).await.map_err(io_err),
            SmbFile::Durable(d) => d.retry(|f| async move { f.write(offset, data).await }).await,
        }
    }

    const WRITE_ROOM: usize = smb_client::WRITE_FRAME_ROOM;

    async fn write_framed(&self, offset: u64, frame: &mut bytes::BytesMut) -> Result<u32, BenchError> {
        match self {
            SmbFile::Plain(f) => f.write_framed(offset, frame).await.map_err(io_err),
            // A framed write gives its buffer to the connection, which a lost connection
            // keeps: the payload is copied instead, so a retry still has it.
            SmbFile::Durable(_) => self.write(offset, &frame[Self::WRITE_ROOM..]).await,
        }
    }

    async fn set_len(&self, len: u64) -> Result<(), BenchError> {
        match self {
            SmbFile::Plain(f) => f.set_len(len).await.map_err(io_err),
            SmbFile::Durable(d) => d.retry(|f| async move { f.set_len(len).await }).await,
        }
    }

    async fn flush(&self) -> Result<(), BenchError> {
        match self {
            SmbFile::Plain(f) => f.flush().await.map_err(io_err),
            SmbFile::Durable(d) => d.retry(|f| async move { f.flush().await }).await,
        }
    }

    async fn close(self) -> Result<(), BenchError> {
        match self {
            SmbFile::Plain(f) => f.close().await.map_err(io_err),
            SmbFile::Durable(d) => d.retry(|f| async move { f.close().await }).await,
        }
    }
}
