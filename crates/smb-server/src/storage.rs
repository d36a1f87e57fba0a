//! Storage calls from async code: run on the blocking pool, errors mapped to NTSTATUS.

use smb_wire::NtStatus;

/// The NTSTATUS for a storage error (logged at debug level).
pub fn storage_status(e: braid_vfs::VfsError) -> NtStatus {
    tracing::debug!(error = %e, "storage error");
    crate::status_map::vfs_status(&e)
}

/// Runs blocking storage work on the blocking pool, mapping storage errors to NTSTATUS.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static) -> Result<T, NtStatus> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(storage_status(e)),
        Err(_) => Err(NtStatus::INTERNAL_ERROR),
    }
}
