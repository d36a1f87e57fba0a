//! READDIR and READDIRPLUS results (RFC 1813 sections 3.3.16 and 3.3.17): the entry types,
//! whole-result codecs (a client decodes these), and writers that append entries to a reply
//! until the client's byte limits would be exceeded (a server encodes with these).

use super::types::*;
use crate::xdr::{pad_len, Result, Xdr, XdrReader, XdrWriter};

/// entry3; the name is borrowed (from a listing when encoding, from the reply when decoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry3<'a> {
    pub fileid: u64,
    pub name: &'a [u8],
    pub cookie: u64,
}

impl<'a> Xdr<'a> for Entry3<'a> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(Entry3 { fileid: r.u64()?, name: r.string(u32::MAX)?, cookie: r.u64()? })
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.u64(self.fileid);
        w.string(self.name);
        w.u64(self.cookie);
    }
}

/// entryplus3
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPlus3<'a> {
    pub fileid: u64,
    pub name: &'a [u8],
    pub cookie: u64,
    pub name_attributes: PostOpAttr,
    pub name_handle: PostOpFh3,
}

impl<'a> Xdr<'a> for EntryPlus3<'a> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(EntryPlus3 {
            fileid: r.u64()?,
            name: r.string(u32::MAX)?,
            cookie: r.u64()?,
            name_attributes: PostOpAttr::decode(r)?,
            name_handle: PostOpFh3::decode(r)?,
        })
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        w.u64(self.fileid);
        w.string(self.name);
        w.u64(self.cookie);
        self.name_attributes.encode(w);
        self.name_handle.encode(w);
    }
}

/// Bytes of an entry's directory part (its "value follows" word, fileid, name and cookie):
/// what READDIRPLUS's `dircount` limits.
fn dir_part_len(name: &[u8]) -> usize {
    4 + 8 + 4 + name.len() + pad_len(name.len()) + 8
}

/// READDIR3resok / READDIRPLUS3resok: directory attributes, verifier, entries, eof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirListOk<E> {
    pub dir_attributes: PostOpAttr,
    pub cookieverf: CookieVerf3,
    pub entries: Vec<E>,
    pub eof: bool,
}

pub type ReaddirResOk<'a> = DirListOk<Entry3<'a>>;
pub type ReaddirplusResOk<'a> = DirListOk<EntryPlus3<'a>>;

impl<'a, E: Xdr<'a>> Xdr<'a> for DirListOk<E> {
    /// The entry list is decoded without recursion; it grows only with entries present.
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        let dir_attributes = PostOpAttr::decode(r)?;
        let cookieverf = r.array()?;
        let mut entries = Vec::new();
        while r.follows()? {
            entries.push(E::decode_xdr(r)?);
        }
        Ok(DirListOk { dir_attributes, cookieverf, entries, eof: r.bool()? })
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        self.dir_attributes.encode(w);
        w.opaque_fixed(&self.cookieverf);
        for e in &self.entries {
            w.bool(true);
            e.encode_xdr(w);
        }
        w.bool(false);
        w.bool(self.eof);
    }
}

/// READDIR3res / READDIRPLUS3res; the failure arm holds the directory's attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirListRes<E> {
    Ok(DirListOk<E>),
    Fail(Nfsstat3, PostOpAttr),
}

pub type ReaddirRes<'a> = DirListRes<Entry3<'a>>;
pub type ReaddirplusRes<'a> = DirListRes<EntryPlus3<'a>>;

impl<'a, E: Xdr<'a>> DirListRes<E> {
    pub fn status(&self) -> Nfsstat3 {
        match self {
            Self::Ok(_) => Nfsstat3::Ok,
            Self::Fail(s, _) => *s,
        }
    }
    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self> {
        Ok(match Nfsstat3::decode(r)? {
            Nfsstat3::Ok => Self::Ok(DirListOk::decode_xdr(r)?),
            s => Self::Fail(s, PostOpAttr::decode(r)?),
        })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.status().encode(w);
        match self {
            Self::Ok(ok) => ok.encode_xdr(w),
            Self::Fail(_, attrs) => attrs.encode(w),
        }
    }
}

impl<'a, E: Xdr<'a>> Xdr<'a> for DirListRes<E> {
    fn decode_xdr(r: &mut XdrReader<'a>) -> Result<Self> {
        Self::decode(r)
    }
    fn encode_xdr(&self, w: &mut XdrWriter<'_>) {
        self.encode(w)
    }
}

/// What READDIR and READDIRPLUS writers share: a successful result's head written up front,
/// entries appended while they fit, the list's end written by `finish`.
#[derive(Debug)]
struct ListWriter<'a> {
    w: XdrWriter<'a>,
    /// Where the writer began (to cancel) and where the resok begins (to count).
    origin: usize,
    start: usize,
    limit: usize,
    dir_limit: usize,
    dir_used: usize,
    entries: usize,
    full: bool,
}

/// The list's end: a FALSE "value follows" and the eof flag.
const LIST_END: usize = 8;

impl<'a> ListWriter<'a> {
    fn begin(buf: &'a mut Vec<u8>, dir_attributes: &PostOpAttr, verf: CookieVerf3, limit: u32, dir_limit: u32) -> Self {
        let mut w = XdrWriter::new(buf);
        let origin = w.len();
        Nfsstat3::Ok.encode(&mut w);
        let start = w.len();
        dir_attributes.encode(&mut w);
        w.opaque_fixed(&verf);
        let (limit, dir_limit) = (limit as usize, dir_limit as usize);
        ListWriter { w, origin, start, limit, dir_limit, dir_used: 0, entries: 0, full: false }
    }

    /// Appends one entry unless it breaks a limit; after one entry did not fit, no later one
    /// is taken (the list must stay in cookie order without gaps). The first entry is only
    /// held to the total limit, so a small `dircount` never makes an empty listing.
    fn push_with(&mut self, dir_bytes: usize, encode: impl FnOnce(&mut XdrWriter<'_>)) -> bool {
        if self.full {
            return false;
        }
        let before = self.w.len();
        self.w.bool(true);
        encode(&mut self.w);
        let used = self.w.len() - self.start + LIST_END;
        let dir_over = self.entries > 0 && self.dir_used.saturating_add(dir_bytes) > self.dir_limit;
        if used > self.limit || dir_over {
            self.w.truncate(before);
            self.full = true;
            return false;
        }
        self.dir_used += dir_bytes;
        self.entries += 1;
        true
    }

    fn finish(mut self, eof: bool) {
        self.w.bool(false);
        self.w.bool(eof && !self.full);
    }

    fn cancel(mut self) {
        self.w.truncate(self.origin);
    }
}

/// Writes a READDIR3res with status NFS3_OK into a reply, entry by entry, keeping the
/// READDIR3resok within the client's `count`.
///
/// ```
/// # use nfs_wire::nfs3::*;
/// let mut reply = Vec::new();
/// let mut dw = DirWriter::new(&mut reply, &PostOpAttr(None), [0; 8], 4096);
/// assert!(dw.push(&Entry3 { fileid: 7, name: b"a.txt", cookie: 1 }));
/// dw.finish(true);
/// ```
#[derive(Debug)]
pub struct DirWriter<'a>(ListWriter<'a>);

impl<'a> DirWriter<'a> {
    /// Writes the status, the directory's attributes and the cookie verifier.
    pub fn new(buf: &'a mut Vec<u8>, dir_attributes: &PostOpAttr, cookieverf: CookieVerf3, count: u32) -> Self {
        DirWriter(ListWriter::begin(buf, dir_attributes, cookieverf, count, u32::MAX))
    }

    /// Appends an entry; `false` when it did not fit (nothing was written, and nothing more
    /// will be: the caller stops and finishes with `eof = false`).
    pub fn push(&mut self, e: &Entry3<'_>) -> bool {
        self.0.push_with(0, |w| e.encode_xdr(w))
    }

    /// Entries written so far. Zero after a failed push: the reply should be
    /// NFS3ERR_TOOSMALL instead (`cancel`).
    pub fn entries(&self) -> usize {
        self.0.entries
    }

    /// Ends the list; `eof` is sent only if every entry pushed fitted.
    pub fn finish(self, eof: bool) {
        self.0.finish(eof)
    }

    /// Removes everything this writer wrote, so the caller can write a failure instead.
    pub fn cancel(self) {
        self.0.cancel()
    }
}

/// Writes a READDIRPLUS3res with status NFS3_OK into a reply, keeping the
/// READDIRPLUS3resok within `maxcount` bytes and the entries' directory parts (fileid, name,
/// cookie) within `dircount` bytes (a server that ignores `dircount` passes `u32::MAX`).
#[derive(Debug)]
pub struct DirPlusWriter<'a>(ListWriter<'a>);

impl<'a> DirPlusWriter<'a> {
    pub fn new(buf: &'a mut Vec<u8>, dir_attributes: &PostOpAttr, cookieverf: CookieVerf3, dircount: u32, maxcount: u32) -> Self {
        DirPlusWriter(ListWriter::begin(buf, dir_attributes, cookieverf, maxcount, dircount))
    }

    /// As [`DirWriter::push`].
    pub fn push(&mut self, e: &EntryPlus3<'_>) -> bool {
        self.0.push_with(dir_part_len(e.name), |w| e.encode_xdr(w))
    }

    pub fn entries(&self) -> usize {
        self.0.entries
    }

    pub fn finish(self, eof: bool) {
        self.0.finish(eof)
    }

    pub fn cancel(self) {
        self.0.cancel()
    }
}
