//! Named streams in CREATE (MS-FSA 2.1.5.1): `file:stream[:$DATA]` opens (or creates) one
//! stream of a file through a [`braid_vfs::StreamHandle`]; the file itself is created if
//! missing, as Windows does. A stream is a file of its own to the file state: its key
//! differs from its file's, so share modes, oplocks and leases of a stream never meet the
//! file's.

use std::sync::Arc;

use braid_filestate::{Access, ShareMode};
use braid_vfs::{CreateMode, FileHandle, OpenOptions, OpenOutcome, StreamHandle};
use smb_wire::msg::create::access;
use smb_wire::NtStatus;

use super::{blocking, DiskPlan, Opened};
use crate::locks::{FileKey, FileTable};
use crate::server::Share;

/// The file-state key of the open: the file's, or for a stream its own (see
/// [`crate::locks::stream_key_id`]).
pub(super) fn key(share: usize, file_id: u64, stream: Option<&str>) -> FileKey {
    (share, stream.map_or(file_id, |name| crate::locks::stream_key_id(file_id, name)))
}

/// Refuses an open of a file with DELETE access while one of its streams is open without
/// FILE_SHARE_DELETE (MS-FSA 2.1.5.1.2: deleting the file deletes every stream).
pub(super) async fn check_delete_shared(files: &FileTable, share: usize, opened: &Opened) -> Result<(), NtStatus> {
    if !files.streams_open() {
        return Ok(());
    }
    let h = opened.handle.clone();
    let names = blocking(move || h.streams()).await?;
    for (name, _) in names {
        if let Some(node) = files.existing(key(share, opened.attrs.file_id, Some(&name))) {
            node.check_share(Access::DELETE, ShareMode::ALL).map_err(crate::status_map::state_status)?;
        }
    }
    Ok(())
}

/// What a stream CREATE does on the backend: the file opened (created if missing and the
/// disposition creates), then the stream found, created or refused as the disposition says.
struct StreamOpen {
    handle: Arc<dyn FileHandle>,
    attrs: braid_vfs::FileAttrs,
    created: bool,
    base_created: bool,
    /// What the file's stored DACL grants (streams have the file's descriptor).
    acl_allowed: Option<u32>,
}

/// Opens stream `name` of the plan's file for a CREATE.
pub(super) async fn open(share: &Share, plan: &DiskPlan, granted: u32, name: &str, token: Vec<smb_fscc::Sid>) -> Result<Opened, NtStatus> {
    let (backend, path, mode, name_owned) = (share.backend.clone(), plan.path.clone(), plan.opts.create, name.to_owned());
    let opened = blocking(move || {
        let base_opts = OpenOptions {
            read: true,
            write: false,
            create: if mode == CreateMode::OpenExisting { CreateMode::OpenExisting } else { CreateMode::OpenOrCreate },
            truncate: false,
            directory: false,
            non_directory: false,
        };
        let (base, outcome) = backend.open(&path, base_opts)?;
        let base: Arc<dyn FileHandle> = Arc::from(base);
        let base_created = outcome == OpenOutcome::Created;
        let acl_allowed = if base_created {
            super::acl::inherit(base.as_ref(), backend.as_ref(), &path, false, &token);
            None
        } else {
            super::acl::allowed(base.as_ref(), backend.as_ref(), &path, &token)
        };
        match find_or_create(&base, &name_owned, mode) {
            Ok((stored, created)) => {
                let handle = crate::afp_info::wrap(Arc::new(StreamHandle::new(base, stored)));
                let attrs = handle.attrs()?;
                Ok(Ok(StreamOpen { handle, attrs, created, base_created, acl_allowed }))
            }
            Err(e) => {
                if base_created {
                    // Nothing of this CREATE stays behind.
                    drop(base);
                    let _ = backend.remove(&path);
                }
                Ok(Err(e))
            }
        }
    })
    .await??;
    let base_readonly = opened.attrs.dos_attributes & braid_vfs::dos::READONLY != 0 && !opened.base_created;
    if base_readonly && (granted & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0 || plan.truncate || plan.delete_on_close) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let path = opened.handle.opened_path().unwrap_or_else(|| plan.path.clone());
    Ok(Opened {
        handle: opened.handle,
        created: opened.created,
        named: opened.base_created,
        attrs: opened.attrs,
        path,
        acl_allowed: opened.acl_allowed,
    })
}

/// Finds stream `name` of `base` or creates it (empty) as `mode` allows: its stored name and
/// whether it was created.
fn find_or_create(base: &Arc<dyn FileHandle>, name: &str, mode: CreateMode) -> Result<(String, bool), NtStatus> {
    let status = crate::storage::storage_status;
    match (base.find_stream(name).map_err(status)?, mode) {
        (Some(_), CreateMode::CreateNew) => Err(NtStatus::OBJECT_NAME_COLLISION),
        (Some((stored, _)), _) => Ok((stored, false)),
        (None, CreateMode::OpenExisting) => Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        (None, _) => {
            base.write_stream(name, Some(&[])).map_err(|e| match e {
                // No user xattrs on this file system: it cannot hold streams.
                braid_vfs::VfsError::Io(ref io) if io.kind() == std::io::ErrorKind::Unsupported => NtStatus::OBJECT_NAME_INVALID,
                e => status(e),
            })?;
            Ok((name.to_owned(), true))
        }
    }
}
