//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18): a snapshot per enumeration, wildcards, restart and
//! single-entry flags, and pages bounded by the client's buffer.

use braid_vfs::DirEntry;
use smb_fscc::{has_wildcards, wildcard_match, DirWriter, FsccError};
use smb_wire::msg::create::access;
use smb_wire::msg::query_directory::{encode_output_response, flags, QueryDirectoryRequest};
use smb_wire::NtStatus;

use super::{blocking, find_open};
use crate::request::{Ctx, HResult, Reply};

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = QueryDirectoryRequest::decode(cx.msg()).map_err(super::bad("QUERY_DIRECTORY"))?;
    let open = find_open(cx, req.file_id)?;
    let Some(handle) = open.handle().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    if !open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !open.has(access::FILE_READ_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let max = (req.output_buffer_length as usize).min(cx.conn.server.config.max_io_size as usize);
    let mut w = DirWriter::new(req.info_class, max).map_err(|e| match e {
        FsccError::InvalidClass => NtStatus::INVALID_INFO_CLASS,
        _ => NtStatus::INVALID_PARAMETER,
    })?;
    let mut cur = open.dir.lock().await;
    let restart = req.flags & (flags::RESTART_SCANS | flags::REOPEN) != 0;
    // Entries of a listing taken by an earlier request may have been removed since; those
    // are checked before being returned (a fresh listing needs no check).
    let mut verify = true;
    if restart || cur.entries.is_none() {
        verify = false;
        let h = handle.clone();
        let mut entries = blocking(move || {
            let me = h.attrs()?;
            let mut list = vec![DirEntry { name: ".".into(), attrs: me.clone() }, DirEntry { name: "..".into(), attrs: me }];
            list.extend(h.read_dir()?);
            Ok(list)
        })
        .await?;
        entries.shrink_to_fit();
        cur.entries = Some(entries);
        cur.pos = 0;
        cur.returned = false;
        cur.pattern = None;
    }
    if cur.pattern.is_none() || restart {
        let p = if req.pattern.is_empty() { "*".to_string() } else { req.pattern.clone() };
        cur.pattern = Some(p);
    }
    let pattern = cur.pattern.clone().unwrap_or_else(|| "*".into());
    let single = req.flags & flags::RETURN_SINGLE_ENTRY != 0;
    let entries = cur.entries.take().unwrap_or_default();
    let start = cur.pos;
    let mac = MacLookup::for_listing(cx, &open, req.info_class);
    let (entries, w, pos) = super::blocking_or_pending(cx, out, move || {
        let pos = fill(&handle, &entries, (start, mac.as_ref()), &pattern, single, verify, &mut w);
        (entries, w, pos)
    })
    .await?;
    let entries_len = entries.len();
    cur.entries = Some(entries);
    let done_without_output = w.is_empty();
    let had_more = pos < entries_len;
    cur.pos = pos;
    if done_without_output {
        if had_more {
            // The next entry alone does not fit the client's buffer.
            return Err(NtStatus::BUFFER_TOO_SMALL);
        }
        return Err(if cur.returned { NtStatus::NO_MORE_FILES } else { NtStatus::NO_SUCH_FILE });
    }
    cur.returned = true;
    drop(cur);
    let data = w.finish();
    encode_output_response(out, &data);
    Ok(Reply::success())
}

/// Adds the entries matching `pattern` from `start` on to `w` until it is full (or after one
/// with `single`); returns the position to resume from. With `verify`, entries removed since
/// the listing was taken are skipped.
fn fill(
    handle: &std::sync::Arc<dyn braid_vfs::FileHandle>,
    entries: &[DirEntry],
    (start, mac): (usize, Option<&MacLookup>),
    pattern: &str,
    single: bool,
    verify: bool,
    w: &mut DirWriter,
) -> usize {
    let exact = !has_wildcards(pattern);
    let mut pos = start;
    while pos < entries.len() {
        let e = &entries[pos];
        let matches = if exact { e.name.eq_ignore_ascii_case(pattern) || e.name == pattern } else { wildcard_match(pattern, &e.name) };
        let gone = || verify && e.name != "." && e.name != ".." && matches!(handle.has_child(&e.name), Ok(false));
        if matches && !gone() {
            let info = super::attrs_info(&e.attrs);
            let apple = mac.map(|m| m.entry(&e.name, &e.attrs));
            if !w.push_with(&e.name, &info, apple.as_ref()) {
                break;
            }
            if single {
                pos += 1;
                break;
            }
        }
        pos += 1;
    }
    pos
}

/// What a macOS client with readdir attributes (`create/aapl.rs`) gets in each entry of a
/// FileIdBothDirectoryInformation listing: looked up per entry, one open and two xattr
/// reads, as Samba's `vfs_fruit` does.
struct MacLookup {
    backend: std::sync::Arc<dyn braid_vfs::Backend>,
    dir: braid_vfs::SharePath,
    max_access: u32,
}

impl MacLookup {
    fn for_listing(cx: &Ctx<'_>, open: &crate::open::Open, class: u8) -> Option<MacLookup> {
        let caps = *cx.conn.apple.get()?;
        if caps & smb_wire::msg::aapl::SUPPORTS_READ_DIR_ATTR == 0 || class != smb_fscc::class::FILE_ID_BOTH_DIRECTORY_INFORMATION {
            return None;
        }
        let share = open.tree.share()?;
        Some(MacLookup { backend: share.backend.clone(), dir: crate::sync::lock(&open.path).clone(), max_access: open.tree.maximal_access })
    }

    fn entry(&self, name: &str, attrs: &braid_vfs::FileAttrs) -> smb_fscc::AppleDirInfo {
        let mut a = smb_fscc::AppleDirInfo { max_access: self.max_access, unix_mode: st_mode(&attrs.posix) as u16, ..Default::default() };
        // The date added defaults to the AppleDouble epoch (2000-01-01), big-endian.
        a.finder_info[12..16].copy_from_slice(&APPLE_EPOCH_DATE.to_be_bytes());
        if name == "." || name == ".." {
            return a;
        }
        let Ok(path) = self.dir.join(name) else { return a };
        let Ok((h, _)) = self.backend.open(&path, braid_vfs::OpenOptions::METADATA) else { return a };
        if let Ok(Some((_, size))) = h.find_stream(AFP_RESOURCE) {
            a.rfork_size = size;
        }
        if let Ok(Some((_, info))) = h.read_stream(AFP_AFPINFO) {
            compress_finder_info(&info, attrs, &mut a.finder_info);
        }
        a
    }
}

/// The POSIX mode with its file type bits, as stat(2) gives it (S_IFREG, S_IFDIR…).
pub(crate) fn st_mode(p: &braid_vfs::Posix) -> u32 {
    use braid_vfs::FileKind;
    let kind = match p.kind {
        FileKind::File => 0o100_000,
        FileKind::Dir => 0o040_000,
        FileKind::Symlink => 0o120_000,
        FileKind::Block => 0o060_000,
        FileKind::Char => 0o020_000,
        FileKind::Fifo => 0o010_000,
        FileKind::Socket => 0o140_000,
    };
    kind | (p.mode & 0o7777)
}

/// The streams macOS keeps Finder info and resource forks in.
const AFP_AFPINFO: &str = "AFP_AfpInfo";
const AFP_RESOURCE: &str = "AFP_Resource";
/// 2000-01-01 as AppleDouble dates count it (seconds from then): zero.
const APPLE_EPOCH_DATE: u32 = 0;
/// Seconds from the Unix epoch to 2000-01-01.
const APPLE_EPOCH_UNIX: u64 = 946_684_800;

/// Packs an AfpInfo's FinderInfo (32 bytes at offset 16 of the 60-byte stream) as readdir
/// attributes carry it: type and creator (files only), flags, extended flags, and the
/// creation date in seconds from 2000 (big-endian).
fn compress_finder_info(afpinfo: &[u8], attrs: &braid_vfs::FileAttrs, out: &mut [u8; 16]) {
    let Some(fi) = afpinfo.get(16..48) else { return };
    if !attrs.is_dir {
        out[..8].copy_from_slice(&fi[..8]);
    }
    out[8..10].copy_from_slice(&fi[8..10]);
    out[10..12].copy_from_slice(&fi[24..26]);
    let created = attrs.created.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let date = u32::try_from(created.saturating_sub(APPLE_EPOCH_UNIX)).unwrap_or(u32::MAX);
    out[12..16].copy_from_slice(&date.to_be_bytes());
}
