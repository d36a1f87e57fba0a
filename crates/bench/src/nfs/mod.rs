//! The [`Target`]/[`Session`]/[`BenchFile`] traits for NFSv3 (RFC 1813) over TCP: MOUNT for
//! the export's root handle, then LOOKUP/CREATE/MKDIR/REMOVE/RMDIR/READDIRPLUS for paths and
//! READ, WRITE (unstable), COMMIT and SETATTR for data, spread round-robin over `nconnect`
//! connections (Linux's `nconnect=` mount option). The codec is `nfs-wire`'s. [`nlm`] is the
//! `--nlm-lock` workload: NLM v4 lock and unlock pairs on files made here.

mod conn;
pub mod nlm;
pub mod url;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nfs_wire::mount3::{MntArgs, MntRes, MountProc3};
use nfs_wire::nfs3::*;
use nfs_wire::record::Record;
use nfs_wire::rpc::{Auth, AuthSys, MOUNT_VERSION, NFS_VERSION, PROG_MOUNT, PROG_NFS};
use nfs_wire::{XdrReader, XdrWriter};

use self::conn::{results, RpcConn};
pub use self::url::NfsUrl;
use crate::session::{BenchFile, OpenMode, Session, Target};
use crate::BenchError;

/// A server reached over NFSv3.
#[derive(Debug, Clone)]
pub struct NfsTarget {
    url: NfsUrl,
    nconnect: u32,
}

impl NfsTarget {
    /// Resolves the host now so a bad name fails before anything runs.
    pub fn new(url: NfsUrl, nconnect: u32) -> Result<Self, BenchError> {
        url.resolve()?;
        Ok(Self { url, nconnect: nconnect.max(1) })
    }

    fn cred(&self) -> Auth {
        Auth::Sys(AuthSys {
            stamp: 0,
            machine_name: b"braid-bench".to_vec(),
            uid: self.url.uid.unwrap_or_else(|| rustix::process::getuid().as_raw()),
            gid: self.url.gid.unwrap_or_else(|| rustix::process::getgid().as_raw()),
            gids: Vec::new(),
        })
    }

    fn connect_error(&self, msg: String) -> BenchError {
        BenchError::Connect { target: self.url.to_string(), msg }
    }

    async fn mount(&self, conn: &RpcConn) -> Result<NfsFh3, BenchError> {
        let path = self.url.export.as_bytes().to_vec();
        let rec = conn.call(PROG_MOUNT, MOUNT_VERSION, MountProc3::Mnt as u32, |w| MntArgs { dirpath: path }.encode(w)).await?;
        match decode(&rec, MntRes::decode)? {
            MntRes::Ok(ok) => Ok(ok.fhandle),
            MntRes::Fail(s) => Err(self.connect_error(format!("MOUNT of {} refused: {s:?}", self.url.export))),
        }
    }
}

impl Target for NfsTarget {
    type Session = NfsSession;

    fn describe(&self) -> String {
        if self.nconnect > 1 {
            format!("{} (nconnect {})", self.url, self.nconnect)
        } else {
            self.url.to_string()
        }
    }

    async fn connect(&self) -> Result<NfsSession, BenchError> {
        let (addr, mount_addr) = self.url.resolve()?;
        let fail = |e: BenchError| self.connect_error(e.to_string());
        let mut conns = Vec::new();
        for _ in 0..self.nconnect {
            conns.push(RpcConn::connect(addr, self.cred()).await.map_err(fail)?);
        }
        let root = if mount_addr == addr {
            self.mount(&conns[0]).await?
        } else {
            self.mount(&RpcConn::connect(mount_addr, self.cred()).await.map_err(fail)?).await?
        };
        let s = NfsSession { inner: Arc::new(Inner { conns, next: AtomicUsize::new(0), root, dirs: Mutex::default() }), max_io: 0 };
        let info = s.nfs(Proc3::Fsinfo, |w| FsinfoArgs { fsroot: root }.encode(w)).await.map_err(fail)?;
        let max_io = match decode(&info, FsinfoRes::decode).map_err(fail)? {
            FsinfoRes::Ok(i) => i.rtmax.min(i.wtmax),
            FsinfoRes::Fail(st, _) => return Err(self.connect_error(format!("FSINFO: {st:?}"))),
        };
        Ok(NfsSession { max_io: max_io.clamp(4096, 1 << 20), ..s })
    }
}

fn decode<T>(rec: &Record, f: impl FnOnce(&mut XdrReader<'_>) -> nfs_wire::xdr::Result<T>) -> Result<T, BenchError> {
    f(&mut XdrReader::new(results(rec)?)).map_err(|e| BenchError::Io(format!("malformed NFS reply: {e}")))
}

fn failed(what: &str, path: &str, st: Nfsstat3) -> BenchError {
    BenchError::Io(format!("{path}: {what}: {st:?}"))
}

struct Inner {
    conns: Vec<RpcConn>,
    next: AtomicUsize,
    root: NfsFh3,
    /// Handles of the directories used so far, by path.
    dirs: Mutex<HashMap<String, NfsFh3>>,
}

/// A mounted export over `nconnect` connections; clones share them.
#[derive(Clone)]
pub struct NfsSession {
    inner: Arc<Inner>,
    max_io: u32,
}

impl NfsSession {
    async fn nfs(&self, p: Proc3, args: impl FnOnce(&mut XdrWriter<'_>)) -> Result<Record, BenchError> {
        let i = self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.conns.len();
        self.inner.conns[i].call(PROG_NFS, NFS_VERSION, p as u32, args).await
    }

    /// The handle of a directory path ("" is the export's root), looked up once.
    async fn dir(&self, path: &str) -> Result<NfsFh3, BenchError> {
        let mut fh = self.inner.root;
        let mut walked = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            walked = if walked.is_empty() { part.to_string() } else { format!("{walked}/{part}") };
            let known = self.inner.dirs.lock().unwrap_or_else(|p| p.into_inner()).get(&walked).copied();
            fh = match known {
                Some(h) => h,
                None => {
                    let (h, _) = self.lookup(fh, part, &walked).await?;
                    self.inner.dirs.lock().unwrap_or_else(|p| p.into_inner()).insert(walked.clone(), h);
                    h
                }
            };
        }
        Ok(fh)
    }

    /// The parent's handle and the last name of a path.
    async fn parent<'p>(&self, path: &'p str) -> Result<(NfsFh3, &'p str), BenchError> {
        let path = path.trim_matches('/');
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        Ok((self.dir(dir).await?, name))
    }

    async fn lookup(&self, dir: NfsFh3, name: &str, path: &str) -> Result<(NfsFh3, Option<Fattr3>), BenchError> {
        let what = DirOpArgs3 { dir, name: name.as_bytes().to_vec() };
        let rec = self.nfs(Proc3::Lookup, |w| LookupArgs { what }.encode(w)).await?;
        match decode(&rec, LookupRes::decode)? {
            LookupRes::Ok(ok) => Ok((ok.object, ok.obj_attributes.0)),
            LookupRes::Fail(st, _) => Err(failed("LOOKUP", path, st)),
        }
    }

    async fn getattr(&self, object: NfsFh3, path: &str) -> Result<Fattr3, BenchError> {
        let rec = self.nfs(Proc3::Getattr, |w| GetattrArgs { object }.encode(w)).await?;
        match decode(&rec, GetattrRes::decode)? {
            GetattrRes::Ok(ok) => Ok(ok.obj_attributes),
            GetattrRes::Fail(st) => Err(failed("GETATTR", path, st)),
        }
    }

    /// The size of a path, looked up (None if it does not exist).
    async fn size_of(&self, path: &str) -> Result<Option<u64>, BenchError> {
        let (dir, name) = self.parent(path).await?;
        let what = DirOpArgs3 { dir, name: name.as_bytes().to_vec() };
        let rec = self.nfs(Proc3::Lookup, |w| LookupArgs { what }.encode(w)).await?;
        match decode(&rec, LookupRes::decode)? {
            LookupRes::Ok(ok) => match ok.obj_attributes.0 {
                Some(a) => Ok(Some(a.size)),
                None => Ok(Some(self.getattr(ok.object, path).await?.size)),
            },
            LookupRes::Fail(Nfsstat3::Noent, _) => Ok(None),
            LookupRes::Fail(st, _) => Err(failed("LOOKUP", path, st)),
        }
    }

    async fn create(&self, path: &str) -> Result<NfsFh3, BenchError> {
        let (dir, name) = self.parent(path).await?;
        let attrs = Sattr3 { mode: Some(0o644), size: Some(0), ..Sattr3::default() };
        let where_ = DirOpArgs3 { dir, name: name.as_bytes().to_vec() };
        let rec = self.nfs(Proc3::Create, |w| CreateArgs { where_, how: CreateHow3::Unchecked(attrs) }.encode(w)).await?;
        match decode(&rec, CreateRes::decode)? {
            CreateRes::Ok(CreateResOk { obj: PostOpFh3(Some(fh)), .. }) => Ok(fh),
            // The server may leave the handle out: look it up.
            CreateRes::Ok(_) => Ok(self.lookup(dir, name, path).await?.0),
            CreateRes::Fail(st, _) => Err(failed("CREATE", path, st)),
        }
    }

    async fn remove_name(&self, path: &str, p: Proc3) -> Result<(), BenchError> {
        let (dir, name) = self.parent(path).await?;
        let object = DirOpArgs3 { dir, name: name.as_bytes().to_vec() };
        let rec = self.nfs(p, |w| RemoveArgs { object }.encode(w)).await?;
        match decode(&rec, RemoveRes::decode)? {
            RemoveRes::Ok(_) => Ok(()),
            RemoveRes::Fail(st, _) => Err(failed(p.name(), path, st)),
        }
    }
}

impl Session for NfsSession {
    type File = NfsFile;

    async fn bind_channel(&self) -> Result<Self, BenchError> {
        Err(BenchError::NotSupported("NFS has no session channels (use --nconnect for more connections)".into()))
    }

    fn max_io(&self) -> u32 {
        self.max_io
    }

    fn adopt(&self, file: &NfsFile) -> NfsFile {
        file.clone()
    }

    async fn open(&self, path: &str, mode: OpenMode) -> Result<NfsFile, BenchError> {
        let fh = match mode {
            OpenMode::CreateOverwrite => self.create(path).await?,
            OpenMode::Read | OpenMode::ReadWrite => {
                let (dir, name) = self.parent(path).await?;
                self.lookup(dir, name, path).await?.0
            }
        };
        Ok(NfsFile { fh, session: self.clone() })
    }

    async fn file_size(&self, path: &str) -> Result<Option<u64>, BenchError> {
        self.size_of(path).await
    }

    async fn mkdir(&self, path: &str) -> Result<(), BenchError> {
        let (dir, name) = self.parent(path).await?;
        let where_ = DirOpArgs3 { dir, name: name.as_bytes().to_vec() };
        let attributes = Sattr3 { mode: Some(0o755), ..Sattr3::default() };
        let rec = self.nfs(Proc3::Mkdir, |w| MkdirArgs { where_, attributes }.encode(w)).await?;
        match decode(&rec, MkdirRes::decode)? {
            MkdirRes::Ok(_) | MkdirRes::Fail(Nfsstat3::Exist, _) => Ok(()),
            MkdirRes::Fail(st, _) => Err(failed("MKDIR", path, st)),
        }
    }

    async fn remove(&self, path: &str) -> Result<(), BenchError> {
        self.remove_name(path, Proc3::Remove).await
    }

    async fn rmdir(&self, path: &str) -> Result<(), BenchError> {
        self.inner
            .dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| k != path.trim_matches('/') && !k.starts_with(&format!("{}/", path.trim_matches('/'))));
        self.remove_name(path, Proc3::Rmdir).await
    }

    async fn stat(&self, path: &str) -> Result<u64, BenchError> {
        self.size_of(path).await?.ok_or_else(|| failed("LOOKUP", path, Nfsstat3::Noent))
    }

    async fn list(&self, dir: &str) -> Result<u64, BenchError> {
        let fh = self.dir(dir).await?;
        let (mut cookie, mut cookieverf, mut n) = (0u64, [0u8; 8], 0u64);
        loop {
            let args = ReaddirplusArgs { dir: fh, cookie, cookieverf, dircount: 64 << 10, maxcount: 256 << 10 };
            let rec = self.nfs(Proc3::Readdirplus, |w| args.encode(w)).await?;
            let page = decode(&rec, |r| match ReaddirplusRes::decode(r)? {
                DirListRes::Ok(ok) => {
                    let names = ok.entries.iter().filter(|e| e.name != b"." && e.name != b"..").count() as u64;
                    Ok(Ok((names, ok.entries.last().map(|e| e.cookie), ok.cookieverf, ok.eof)))
                }
                DirListRes::Fail(st, _) => Ok(Err(st)),
            })?;
            let (names, last, verf, eof) = page.map_err(|st| failed("READDIRPLUS", dir, st))?;
            n += names;
            match (eof, last) {
                (true, _) => return Ok(n),
                (false, Some(c)) => (cookie, cookieverf) = (c, verf),
                (false, None) => return Err(BenchError::Io(format!("{dir}: READDIRPLUS returned nothing before the end"))),
            }
        }
    }
}

/// A file's handle on a session (NFSv3 has no opens: closing does nothing).
#[derive(Clone)]
pub struct NfsFile {
    fh: NfsFh3,
    session: NfsSession,
}

/// READ's data, kept in the reply it came in (not copied).
pub struct ReadData {
    rec: Record,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for ReadData {
    fn as_ref(&self) -> &[u8] {
        self.rec.get(self.start..self.start + self.len).unwrap_or(&[])
    }
}

impl BenchFile for NfsFile {
    type Data = ReadData;

    async fn read(&self, offset: u64, count: u32) -> Result<ReadData, BenchError> {
        let file = self.fh;
        let rec = self.session.nfs(Proc3::Read, |w| ReadArgs { file, offset, count }.encode(w)).await?;
        let (start, len) = decode(&rec, |r| {
            Ok(match ReadRes::decode(r)? {
                // Where the data sits in the record: its distance from the record's start.
                ReadRes::Ok(_, data) => Ok((data.as_ptr() as usize - rec.as_ptr() as usize, data.len())),
                ReadRes::Fail(st, _) => Err(st),
            })
        })?
        .map_err(|st| BenchError::Io(format!("READ: {st:?}")))?;
        Ok(ReadData { rec, start, len })
    }

    async fn write(&self, offset: u64, data: &[u8]) -> Result<u32, BenchError> {
        let args = WriteArgs { file: self.fh, offset, count: data.len() as u32, stable: StableHow::Unstable, data };
        let rec = self.session.nfs(Proc3::Write, |w| args.encode(w)).await?;
        match decode(&rec, WriteRes::decode)? {
            WriteRes::Ok(ok) => Ok(ok.count),
            WriteRes::Fail(st, _) => Err(BenchError::Io(format!("WRITE: {st:?}"))),
        }
    }

    async fn set_len(&self, len: u64) -> Result<(), BenchError> {
        let args = SetattrArgs { object: self.fh, new_attributes: Sattr3 { size: Some(len), ..Sattr3::default() }, guard: None };
        let rec = self.session.nfs(Proc3::Setattr, |w| args.encode(w)).await?;
        match decode(&rec, SetattrRes::decode)? {
            SetattrRes::Ok(_) => Ok(()),
            SetattrRes::Fail(st, _) => Err(BenchError::Io(format!("SETATTR: {st:?}"))),
        }
    }

    async fn flush(&self) -> Result<(), BenchError> {
        let file = self.fh;
        let rec = self.session.nfs(Proc3::Commit, |w| CommitArgs { file, offset: 0, count: 0 }.encode(w)).await?;
        match decode(&rec, CommitRes::decode)? {
            CommitRes::Ok(_) => Ok(()),
            CommitRes::Fail(st, _) => Err(BenchError::Io(format!("COMMIT: {st:?}"))),
        }
    }

    async fn close(self) -> Result<(), BenchError> {
        Ok(())
    }
}
