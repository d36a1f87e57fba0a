//! FileRenameInformation with a name starting with `:` on a stream open: renames the
//! stream within its file (MS-FSA 2.1.5.14.11.1). A named stream takes another name,
//! replacing a stream of that name only with ReplaceIfExists and only while nobody has it
//! open. Renames to or from the main stream (`::$DATA`) are not offered: the data would
//! move between the file and a stream.

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
    let Some(target) = parsed.stream else {
        // A named stream renamed to the main stream (`::$DATA`).
        return Err(NtStatus::NOT_SUPPORTED);
    };
    if *is_dir || target.len() > braid_vfs::MAX_STREAM_NAME_LEN || target.chars().count() > 255 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(share) = open.tree.share().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    let server = &cx.conn.server;
    // A target stream someone has open cannot be replaced (as a file cannot).
    let file_key = crate::locks::stream_file_key(*key, opened);
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
    crate::changes::modified(server, share.index, &path, false, what::STREAMS, crate::open::open_origin(open));
    Ok(())
}
