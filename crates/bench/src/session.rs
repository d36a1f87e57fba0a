//! What a benchmark needs from an SMB server, as traits: [`Target`] connects, [`Session`]
//! is one channel with a tree connected, [`BenchFile`] an open file. The real client and the
//! in-memory [`mock`] implement them, so the whole engine is testable without a network.

use std::future::Future;
use std::net::IpAddr;

use crate::BenchError;

/// How [`Session::open`] opens a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Existing file, read only.
    Read,
    /// Existing file, read and write.
    ReadWrite,
    /// Create or truncate, read and write.
    CreateOverwrite,
}

/// A server to benchmark.
pub trait Target: Send + Sync {
    /// One channel of a session, with the share connected.
    type Session: Session;

    /// The target as shown in reports (no password).
    fn describe(&self) -> String;

    /// Connects, authenticates and connects the share.
    fn connect(&self) -> impl Future<Output = Result<Self::Session, BenchError>> + Send;

    /// [`Target::connect`] from local address `source` (None: the system picks), so many
    /// clients of one machine look like many hosts to the server (`--source-ips`).
    fn connect_from(&self, source: Option<IpAddr>) -> impl Future<Output = Result<Self::Session, BenchError>> + Send {
        async move {
            match source {
                None => self.connect().await,
                Some(ip) => Err(BenchError::NotSupported(format!("{}: cannot choose the source address ({ip})", self.describe()))),
            }
        }
    }
}

/// One channel of an authenticated session with the share connected. Clones share the
/// channel; many requests may be in flight at once from many tasks.
pub trait Session: Clone + Send + Sync + 'static {
    /// An open file.
    type File: BenchFile;

    /// Adds a channel to the same session (SMB 3 multichannel). Returns
    /// [`BenchError::NotSupported`] when the server or dialect cannot.
    fn bind_channel(&self) -> impl Future<Output = Result<Self, BenchError>> + Send;

    /// Largest READ/WRITE payload the server accepts.
    fn max_io(&self) -> u32;

    /// The same open, used through this channel (an SMB 3 FileId belongs to the session, so
    /// a file opened on one channel may be read and written on any channel of the session).
    fn adopt(&self, file: &Self::File) -> Self::File;

    /// Opens (or creates) a file.
    fn open(&self, path: &str, mode: OpenMode) -> impl Future<Output = Result<Self::File, BenchError>> + Send;

    /// Size of a file, or None if it does not exist.
    fn file_size(&self, path: &str) -> impl Future<Output = Result<Option<u64>, BenchError>> + Send;

    /// Creates a directory; an existing one is not an error.
    fn mkdir(&self, path: &str) -> impl Future<Output = Result<(), BenchError>> + Send;

    /// Deletes a file.
    fn remove(&self, path: &str) -> impl Future<Output = Result<(), BenchError>> + Send;

    /// Deletes an empty directory.
    fn rmdir(&self, path: &str) -> impl Future<Output = Result<(), BenchError>> + Send;

    /// Queries a path's metadata (the `stat` of the metadata mix); returns its size.
    fn stat(&self, path: &str) -> impl Future<Output = Result<u64, BenchError>> + Send;

    /// Lists a directory to its end (the `list` of the metadata mix); returns the number of
    /// entries other than `.` and `..`.
    fn list(&self, dir: &str) -> impl Future<Output = Result<u64, BenchError>> + Send;

    /// Times the session came back on a new connection after losing one.
    fn reconnects(&self) -> u64 {
        0
    }
}

/// An open file. Clones share the handle.
pub trait BenchFile: Clone + Send + Sync + 'static {
    /// What a read returns (the client's own buffer type, so nothing is copied).
    type Data: AsRef<[u8]> + Send + 'static;

    /// Reads up to `len` bytes at `offset`.
    fn read(&self, offset: u64, len: u32) -> impl Future<Output = Result<Self::Data, BenchError>> + Send;

    /// Writes `data` at `offset`; returns the bytes written.
    fn write(&self, offset: u64, data: &[u8]) -> impl Future<Output = Result<u32, BenchError>> + Send;

    /// Bytes a [`BenchFile::write_framed`] buffer keeps before its payload.
    const WRITE_ROOM: usize = 0;

    /// [`BenchFile::write`] of the payload after the first [`BenchFile::WRITE_ROOM`] bytes of
    /// `frame`, room in which a client may build the request so the payload is not copied.
    /// `frame` is handed back for the next write (after an error it may be empty).
    fn write_framed(&self, offset: u64, frame: &mut bytes::BytesMut) -> impl Future<Output = Result<u32, BenchError>> + Send {
        async move { self.write(offset, &frame[Self::WRITE_ROOM..]).await }
    }

    /// Sets the end of file.
    fn set_len(&self, len: u64) -> impl Future<Output = Result<(), BenchError>> + Send;

    /// Flushes to stable storage.
    fn flush(&self) -> impl Future<Output = Result<(), BenchError>> + Send;

    /// Closes the handle (other clones become invalid).
    fn close(self) -> impl Future<Output = Result<(), BenchError>> + Send;
}

pub mod mock {
    //! An in-memory server for tests: files and directories in maps, optional per-request
    //! delay, optional corruption and channel refusal.

    use std::collections::{BTreeSet, HashMap};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, RwLock};
    use std::time::Duration;

    use super::*;

    #[derive(Default)]
    struct Fs {
        files: HashMap<String, Arc<RwLock<Vec<u8>>>>,
        dirs: BTreeSet<String>,
    }

    /// Knobs of the mock.
    #[derive(Debug, Clone, Default)]
    pub struct MockConfig {
        /// Delay of every data request (simulates a network round trip).
        pub delay: Option<Duration>,
        /// Refuse `bind_channel` with NotSupported.
        pub no_multichannel: bool,
        /// After this many writes, flip one byte of every later write (tests `--verify`).
        pub corrupt_after_writes: Option<u64>,
        /// Fail connect with this message (tests error lines).
        pub connect_error: Option<String>,
        /// Largest I/O.
        pub max_io: Option<u32>,
    }

    /// An in-memory target; clones share the same files.
    #[derive(Clone, Default)]
    pub struct MockTarget {
        fs: Arc<Mutex<Fs>>,
        cfg: Arc<MockConfig>,
        writes: Arc<AtomicU64>,
        name: String,
        /// Which channel of the session this is (0: the first connection).
        channel: usize,
        /// Reads and writes served per channel (index: channel).
        channel_ops: Arc<Mutex<Vec<u64>>>,
    }

    impl MockTarget {
        /// A mock named `name` (shown in reports).
        pub fn new(name: &str, cfg: MockConfig) -> Self {
            Self { fs: Arc::default(), cfg: Arc::new(cfg), writes: Arc::default(), name: name.into(), channel: 0, channel_ops: Arc::default() }
        }

        /// Reads and writes served on each channel (index: channel; 0 is the first one).
        pub fn ops_per_channel(&self) -> Vec<u64> {
            self.channel_ops.lock().map(|v| v.clone()).unwrap_or_default()
        }

        fn count_op(&self) {
            if let Ok(mut v) = self.channel_ops.lock() {
                if v.len() <= self.channel {
                    v.resize(self.channel + 1, 0);
                }
                v[self.channel] += 1;
            }
        }

        /// A copy of a file's contents.
        pub fn contents(&self, path: &str) -> Option<Vec<u8>> {
            let fs = self.fs.lock().ok()?;
            let f = fs.files.get(path)?;
            let data = f.read().ok()?.clone();
            Some(data)
        }

        /// Paths of all files.
        pub fn file_names(&self) -> Vec<String> {
            self.fs.lock().map(|fs| fs.files.keys().cloned().collect()).unwrap_or_default()
        }

        /// Number of writes served.
        pub fn writes(&self) -> u64 {
            self.writes.load(Ordering::Relaxed)
        }
    }

    impl Target for MockTarget {
        type Session = MockTarget;

        fn describe(&self) -> String {
            self.name.clone()
        }

        async fn connect(&self) -> Result<MockTarget, BenchError> {
            match &self.cfg.connect_error {
                Some(m) => Err(BenchError::Connect { target: self.name.clone(), msg: m.clone() }),
                None => Ok(self.clone()),
            }
        }
    }

    fn poisoned() -> BenchError {
        BenchError::Io("mock lock poisoned".into())
    }

    impl MockTarget {
        async fn pause(&self) {
            if let Some(d) = self.cfg.delay {
                tokio::time::sleep(d).await;
            }
        }

        fn parent_exists(fs: &Fs, path: &str) -> bool {
            match path.rsplit_once('/') {
                Some((dir, _)) => fs.dirs.contains(dir),
                None => true,
            }
        }
    }

    impl Session for MockTarget {
        type File = MockFile;

        async fn bind_channel(&self) -> Result<Self, BenchError> {
            if self.cfg.no_multichannel {
                return Err(BenchError::NotSupported("the server does not support multichannel".into()));
            }
            let mut v = self.channel_ops.lock().map_err(|_| poisoned())?;
            let channel = v.len().max(1);
            v.resize(channel + 1, 0);
            Ok(MockTarget { channel, ..self.clone() })
        }

        fn max_io(&self) -> u32 {
            self.cfg.max_io.unwrap_or(8 << 20)
        }

        fn adopt(&self, file: &MockFile) -> MockFile {
            MockFile { data: file.data.clone(), target: self.clone() }
        }

        async fn open(&self, path: &str, mode: OpenMode) -> Result<MockFile, BenchError> {
            self.pause().await;
            let mut fs = self.fs.lock().map_err(|_| poisoned())?;
            if !Self::parent_exists(&fs, path) {
                return Err(BenchError::Io(format!("{path}: parent directory not found")));
            }
            let data = match (mode, fs.files.get(path)) {
                (OpenMode::CreateOverwrite, Some(f)) => {
                    f.write().map_err(|_| poisoned())?.clear();
                    f.clone()
                }
                (OpenMode::CreateOverwrite, None) => fs.files.entry(path.into()).or_default().clone(),
                (_, Some(f)) => f.clone(),
                (_, None) => return Err(BenchError::Io(format!("{path}: not found"))),
            };
            Ok(MockFile { data, target: self.clone() })
        }

        async fn file_size(&self, path: &str) -> Result<Option<u64>, BenchError> {
            let fs = self.fs.lock().map_err(|_| poisoned())?;
            match fs.files.get(path) {
                Some(f) => Ok(Some(f.read().map_err(|_| poisoned())?.len() as u64)),
                None => Ok(None),
            }
        }

        async fn mkdir(&self, path: &str) -> Result<(), BenchError> {
            self.pause().await;
            let mut fs = self.fs.lock().map_err(|_| poisoned())?;
            fs.dirs.insert(path.into());
            Ok(())
        }

        async fn remove(&self, path: &str) -> Result<(), BenchError> {
            self.pause().await;
            let mut fs = self.fs.lock().map_err(|_| poisoned())?;
            fs.files.remove(path).map(|_| ()).ok_or_else(|| BenchError::Io(format!("{path}: not found")))
        }

        async fn rmdir(&self, path: &str) -> Result<(), BenchError> {
            self.pause().await;
            let mut fs = self.fs.lock().map_err(|_| poisoned())?;
            let prefix = format!("{path}/");
            if fs.files.keys().chain(fs.dirs.iter()).any(|k| k.starts_with(&prefix)) {
                return Err(BenchError::Io(format!("{path}: directory not empty")));
            }
            if fs.dirs.remove(path) {
                Ok(())
            } else {
                Err(BenchError::Io(format!("{path}: not found")))
            }
        }

        async fn stat(&self, path: &str) -> Result<u64, BenchError> {
            self.pause().await;
            let fs = self.fs.lock().map_err(|_| poisoned())?;
            if fs.dirs.contains(path) {
                return Ok(0);
            }
            let f = fs.files.get(path).ok_or_else(|| BenchError::Io(format!("{path}: not found")))?;
            let len = f.read().map_err(|_| poisoned())?.len() as u64;
            Ok(len)
        }

        async fn list(&self, dir: &str) -> Result<u64, BenchError> {
            self.pause().await;
            let fs = self.fs.lock().map_err(|_| poisoned())?;
            if !fs.dirs.contains(dir) {
                return Err(BenchError::Io(format!("{dir}: not found")));
            }
            let prefix = format!("{dir}/");
            let child = |k: &&String| k.strip_prefix(&prefix).is_some_and(|rest| !rest.contains('/'));
            Ok((fs.files.keys().filter(child).count() + fs.dirs.iter().filter(child).count()) as u64)
        }
    }

    /// An open mock file.
    #[derive(Clone)]
    pub struct MockFile {
        data: Arc<RwLock<Vec<u8>>>,
        target: MockTarget,
    }

    impl BenchFile for MockFile {
        type Data = Vec<u8>;

        async fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, BenchError> {
            self.target.pause().await;
            self.target.count_op();
            let d = self.data.read().map_err(|_| poisoned())?;
            let start = (offset as usize).min(d.len());
            let end = (start + len as usize).min(d.len());
            Ok(d[start..end].to_vec())
        }

        async fn write(&self, offset: u64, data: &[u8]) -> Result<u32, BenchError> {
            self.target.pause().await;
            self.target.count_op();
            let n = self.target.writes.fetch_add(1, Ordering::Relaxed);
            let mut d = self.data.write().map_err(|_| poisoned())?;
            let end = offset as usize + data.len();
            if d.len() < end {
                d.resize(end, 0);
            }
            d[offset as usize..end].copy_from_slice(data);
            if self.target.cfg.corrupt_after_writes.is_some_and(|c| n >= c) && !data.is_empty() {
                d[offset as usize + data.len() / 2] ^= 0x40;
            }
            Ok(data.len() as u32)
        }

        async fn set_len(&self, len: u64) -> Result<(), BenchError> {
            self.data.write().map_err(|_| poisoned())?.resize(len as usize, 0);
            Ok(())
        }

        async fn flush(&self) -> Result<(), BenchError> {
            Ok(())
        }

        async fn close(self) -> Result<(), BenchError> {
            Ok(())
        }
    }
}
