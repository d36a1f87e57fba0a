//! Storage calls from async code: run on the blocking pool, errors mapped to NTSTATUS, and
//! each share's calls bounded ([`StorageGate`]).
//!
//! A backend that stops answering (a hung FUSE or network file system) keeps the threads
//! that called it. So that it stalls only its own share, each share lets at most
//! `storage_threads_per_share` calls run at once, and a request waits at most
//! `storage_timeout` for its call, in line or running: past it the request answers
//! STATUS_IO_TIMEOUT (the thread, stuck, keeps its place until the call returns). The
//! pipeline tells this module which share a request is on ([`on_share`]).

use std::sync::Arc;
#[cfg(test)]
use std::time::Duration;

pub use braid_qos::StorageGate;
use smb_wire::NtStatus;

/// The NTSTATUS for a storage error (logged at debug level).
pub fn storage_status(e: braid_vfs::VfsError) -> NtStatus {
    tracing::debug!(error = %e, "storage error");
    crate::status_map::vfs_status(&e)
}

tokio::task_local! {
    static GATE: Arc<StorageGate>;
}

/// Runs `request` with its storage calls bounded by `gate` (the share its tree is on).
pub async fn on_share<F: std::future::Future>(gate: Arc<StorageGate>, request: F) -> F::Output {
    GATE.scope(gate, request).await
}

/// The gate of the share the current request is on, if any (IPC$ and calls outside a
/// request have none).
pub fn current_gate() -> Option<Arc<StorageGate>> {
    GATE.try_with(Arc::clone).ok()
}

/// Runs `f` on the blocking pool within the current share's bound: at most its number of
/// calls at once, answered within its timeout (IO_TIMEOUT past it).
pub async fn run_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, NtStatus> {
    match current_gate() {
        Some(gate) => gate.run(f).await.map_err(stalled_status),
        None => tokio::task::spawn_blocking(f).await.map_err(|_| NtStatus::INTERNAL_ERROR),
    }
}

/// The answer to a request whose storage did not answer in time.
pub fn stalled_status(s: braid_qos::Stalled) -> NtStatus {
    match s {
        braid_qos::Stalled::TimedOut => NtStatus::IO_TIMEOUT,
        braid_qos::Stalled::Died => NtStatus::INTERNAL_ERROR,
    }
}

/// Runs blocking storage work on the blocking pool, mapping storage errors to NTSTATUS.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> braid_vfs::Result<T> + Send + 'static) -> Result<T, NtStatus> {
    run_blocking(f).await?.map_err(storage_status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_on_a_share_go_through_its_gate() {
        let gate = StorageGate::new("hung", 1, Duration::from_millis(100));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let first = on_share(gate.clone(), run_blocking(move || rx.recv().ok()));
        assert_eq!(first.await.unwrap_err(), NtStatus::IO_TIMEOUT);
        assert_eq!(on_share(gate.clone(), run_blocking(|| 1)).await.unwrap_err(), NtStatus::IO_TIMEOUT, "its one thread is stuck");
        assert_eq!(run_blocking(|| 2).await.unwrap(), 2, "outside a share nothing is bounded");
        tx.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(on_share(gate, run_blocking(|| 3)).await.unwrap(), 3);
    }
}
