//! FileRenameInformation with a name starting with `:` on a stream open: renames the
//! stream within its file (MS-FSA 2.1.5.14.11.1). A named stream takes another name,
//! replacing a stream of that name only with ReplaceIfExists and only while nobody has it
//! open. A named stream renamed to `::$DATA` becomes the file's main stream (its content
//! copied there) when that is empty or ReplaceIfExists is set and nobody has the file
//! itself open; the main stream renamed to a named one is not offered.

use braid_vfs::{what, VfsError};
use smb_wire::NtStatus;

use crate::open::{Open, OpenKind};
use crate::request::Ctx;

/// Renames the stream of `open` to `new` (`:name[:$DATA]`).
pub(super) async fn rename(cx: &mut Ctx<'_>, open: &Open, replace: bool, new: &str) -> Result<(), NtStatus> {
    let parsed = smb_fscc::split_stream_path(new).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if !parsed.file.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let OpenKind::File { handle, key, is_dir, .. } = &open.kind else { return Err(NtStatus::INVALID_PARAMETER) };
    let (Some(opened), Some(current)) = (handle.stream_name(), handle.stream_current_name()) else {
        // The main stream renamed to a named one.
        return Err(NtStatus::NOT_SUPPORTED);
    };
    if *is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(share) = open.tree.share().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    let server = &cx.conn.server;
    let file_key = crate::locks::stream_file_key(*key, opened);
    let Some(target) = parsed.stream else {
        // `::$DATA`: the stream becomes the file's main stream.
        return to_main(cx, open, &share, file_key, current, replace).await;
    };
    if target.len() > braid_vfs::MAX_STREAM_NAME_LEN || target.chars().count() > 255 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // A target stream someone has open cannot be replaced (as a file cannot).
    let target_key = (file_key.0, crate::locks::stream_key_id(file_key.1, target));
    let own = target.to_lowercase() == current.to_lowercase();
    if !own && server.files.existing(target_key).is_some() {
        return Err(if replace { NtStatus::ACCESS_DENIED } else { NtStatus::OBJECT_NAME_COLLISION });
    }
    let (h, to) = (handle.clone(), target.to_owned());
    let r = crate::storage::blocking(move || match h.rename_stream(&current, &to, replace) {
        Err(VfsError::Exists) => Ok(Err(NtStatus::OBJECT_NAME_COLLISION)),
        r => r.map(Ok),
    })
    .await;
    r??;
    let path = crate::sync::lock(&open.path).clone();
    crate::changes::modified(server, share.index, &path, false, what::STREAMS, crate::open::open_origin(open)).send(server).await;
    Ok(())
}

/// Renames the stream `current` of `open` to the file's main stream: its content replaces
/// the main stream's, the stream goes, and the open reads the main stream (its file handle
/// is open for reading only, so writes through it are refused).
async fn to_main(
    cx: &mut Ctx<'_>,
    open: &Open,
    share: &crate::server::Share,
    file_key: crate::locks::FileKey,
    current: String,
    replace: bool,
) -> Result<(), NtStatus> {
    let server = &cx.conn.server;
    let busy = server.sessions.values().iter().flat_map(|s| s.opens()).any(|o| {
        o.id != open.id && o.tree.share().is_some_and(|s| s.index == share.index) && matches!(&o.kind, OpenKind::File { key, .. } if *key == file_key)
    });
    if busy {
        return Err(NtStatus::SHARING_VIOLATION);
    }
    let Some(h) = open.handle().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    let (backend, path) = (share.backend.clone(), crate::sync::lock(&open.path).clone());
    let r = crate::storage::blocking(move || {
        if h.file_attrs()?.size != 0 && !replace {
            return Ok(Err(NtStatus::OBJECT_NAME_COLLISION));
        }
        let opts = braid_vfs::OpenOptions {
            read: true,
            write: true,
            create: braid_vfs::CreateMode::OpenExisting,
            truncate: false,
            directory: false,
            non_directory: true,
        };
        let (main, _) = backend.open(&path, opts)?;
        let (len, mut buf, mut at) = (h.size()?, vec![0u8; 1 << 20], 0u64);
        while at < len {
            let n = h.read_at(&mut buf, at)?;
            if n == 0 {
                break;
            }
            main.write_at(&buf[..n], at)?;
            at += n as u64;
        }
        main.set_len(at)?;
        h.rename_stream(&current, "", replace).map(Ok)
    })
    .await;
    r??;
    let path = crate::sync::lock(&open.path).clone();
    let bits = what::STREAMS | what::SIZE | what::LAST_WRITE;
    crate::changes::modified(server, share.index, &path, false, bits, crate::open::open_origin(open)).send(server).await;
    Ok(())
}
