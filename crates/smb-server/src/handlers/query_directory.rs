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
    let (entries, w, pos) = super::blocking_or_pending(cx, out, move || {
        let pos = fill(&handle, &entries, start, &pattern, single, verify, &mut w);
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
    start: usize,
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
            if !w.push(&e.name, &info) {
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
