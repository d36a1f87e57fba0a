//! Named streams in CREATE (MS-FSA 2.1.5.1): `file:stream[:$DATA]` opens (or creates) one
//! stream of a file through a [`braid_vfs::StreamHandle`]; the file itself is created if
//! missing, as Windows does. A stream is a file of its own to the file state: its key
//! differs from its file's, so share modes, oplocks and leases of a stream never meet the
//! file's.

use std::sync::Arc;

use braid_vfs::{CreateMode, FileHandle, OpenOptions, OpenOutcome, StreamHandle};
use smb_wire::msg::create::access;
use smb_wire::NtStatus;

use super::{blocking, DiskPlan, Opened};
use crate::server::Share;

/// The file-state key id of stream `stream` of the file `file_id` (the file's own id for
/// the main stream): the file id mixed with a hash of the case-folded name, its top bit
/// set, so a stream's key is neither its file's nor (inode numbers being far below 2^63)
/// any other file's.
pub(super) fn key_id(file_id: u64, stream: Option<&str>) -> u64 {
    let Some(name) = stream else { return file_id };
    // FNV-1a over the lower-cased name: stable, and no dependency for eight lines.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.to_lowercase().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    file_id ^ (h | 1 << 63)
}

/// What a stream CREATE does on the backend: the file opened (created if missing and the
/// disposition creates), then the stream found, created or refused as the disposition says.
struct StreamOpen {
    handle: Arc<dyn FileHandle>,
    attrs: braid_vfs::FileAttrs,
    created: bool,
    base_created: bool,
}

/// Opens stream `name` of the plan's file for a CREATE.
pub(super) async fn open(share: &Share, plan: &DiskPlan, granted: u32, name: &str) -> Result<Opened, NtStatus> {
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
        match find_or_create(&base, &name_owned, mode) {
            Ok((stored, created)) => {
                let handle: Arc<dyn FileHandle> = Arc::new(StreamHandle::new(base, stored));
                let attrs = handle.attrs()?;
                Ok(Ok(StreamOpen { handle, attrs, created, base_created }))
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
    Ok(Opened { handle: opened.handle, created: opened.created, attrs: opened.attrs, path })
}

/// Finds stream `name` of `base` or creates it (empty) as `mode` allows: its stored name and
/// whether it was created.
fn find_or_create(base: &Arc<dyn FileHandle>, name: &str, mode: CreateMode) -> Result<(String, bool), NtStatus> {
    let status = crate::storage::storage_status;
    match (base.read_stream(name).map_err(status)?, mode) {
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

#[cfg(test)]
mod tests {
    use super::key_id;

    #[test]
    fn stream_keys_differ_from_the_file_and_ignore_case() {
        assert_eq!(key_id(42, None), 42);
        let k = key_id(42, Some("Zone.Identifier"));
        assert_ne!(k, 42);
        assert_eq!(k, key_id(42, Some("zone.IDENTIFIER")));
        assert_ne!(k, key_id(42, Some("other")));
        assert_ne!(k, key_id(43, Some("Zone.Identifier")));
        assert!(k >= 1 << 63 || 42 >= 1 << 63);
    }
}
