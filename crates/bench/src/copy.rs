//! `braid bench copy`: one file copied to another on the same share, either inside the
//! server (server-side copy: FSCTL_SRV_COPYCHUNK_WRITE, 16 chunks of 1 MiB per request,
//! the most Windows and Samba accept) or through the client (READ then WRITE of each
//! block), with a number of requests in flight; the figure is the whole copy's time.

use std::sync::Arc;
use std::time::Instant;

use smb_client::{CopyChunk, CreateOptions, File, NtStatus};
use tokio::task::JoinSet;

use crate::smb::SmbTarget;
use crate::{BenchError, Target};

/// Bytes per chunk and chunks per request of a server-side copy.
const CHUNK: u64 = 1 << 20;
const CHUNKS_PER_REQUEST: u64 = 16;

/// How to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyMode {
    /// FSCTL_SRV_COPYCHUNK_WRITE: no data crosses the network.
    ServerSide,
    /// READ and WRITE through the client, block by block.
    ClientSide,
}

/// The result of one copy.
#[derive(Debug, Clone, Copy)]
pub struct CopyResult {
    pub bytes: u64,
    pub seconds: f64,
}

impl CopyResult {
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.seconds.max(1e-9)
    }
}

fn io(what: &str) -> impl Fn(smb_client::ClientError) -> BenchError + '_ {
    move |e| BenchError::Io(format!("{what}: {e}"))
}

/// Copies `from` to `to` (created or overwritten) on `target`'s share with `depth`
/// requests in flight. The timer runs from the first copy request to the last answer.
pub async fn copy_file(target: &SmbTarget, from: &str, to: &str, mode: CopyMode, depth: u32) -> Result<CopyResult, BenchError> {
    let session = target.connect().await?;
    let tree = session.tree();
    let src = tree.create(from, &CreateOptions::open_read()).await.map_err(io(from))?;
    let dst = tree.create(to, &CreateOptions::create_overwrite()).await.map_err(io(to))?;
    let size = src.size_at_open();
    let start = Instant::now();
    match mode {
        CopyMode::ServerSide => server_side(&src, &dst, size, depth).await?,
        CopyMode::ClientSide => client_side(&src, &dst, size, depth).await?,
    }
    let seconds = start.elapsed().as_secs_f64();
    src.close().await.map_err(io(from))?;
    dst.close().await.map_err(io(to))?;
    Ok(CopyResult { bytes: size, seconds })
}

/// Runs `job(offset)` for every `step` of `size`, `depth` at a time.
async fn in_flight<F, Fut>(size: u64, step: u64, depth: u32, job: F) -> Result<(), BenchError>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), BenchError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    let mut next = 0u64;
    loop {
        while next < size && set.len() < depth.max(1) as usize {
            set.spawn(job(next));
            next += step;
        }
        match set.join_next().await {
            None => return Ok(()),
            Some(r) => r.map_err(|e| BenchError::Io(format!("copy task: {e}")))??,
        }
    }
}

async fn server_side(src: &File, dst: &File, size: u64, depth: u32) -> Result<(), BenchError> {
    let key = src.resume_key().await.map_err(io("resume key"))?;
    let dst = Arc::new(dst.clone());
    in_flight(size, CHUNK * CHUNKS_PER_REQUEST, depth, move |at| {
        let dst = dst.clone();
        async move {
            let chunks: Vec<CopyChunk> = (0..CHUNKS_PER_REQUEST)
                .map(|i| at + i * CHUNK)
                .take_while(|&o| o < size)
                .map(|o| CopyChunk { source_offset: o, target_offset: o, length: (size - o).min(CHUNK) as u32 })
                .collect();
            let want: u64 = chunks.iter().map(|c| u64::from(c.length)).sum();
            let (status, got) = dst.copy_chunks(key, &chunks).await.map_err(io("copy chunk"))?;
            if status != NtStatus::SUCCESS || u64::from(got.total_bytes_written) != want {
                return Err(BenchError::Io(format!("copy chunk at {at}: {status:?}, {} of {want} bytes", got.total_bytes_written)));
            }
            Ok(())
        }
    })
    .await
}

async fn client_side(src: &File, dst: &File, size: u64, depth: u32) -> Result<(), BenchError> {
    let block = u64::from(src.tree().client().max_read().min(dst.tree().client().max_write())).min(CHUNK);
    let (src, dst) = (Arc::new(src.clone()), Arc::new(dst.clone()));
    in_flight(size, block, depth, move |at| {
        let (src, dst) = (src.clone(), dst.clone());
        async move {
            let n = (size - at).min(block) as u32;
            let data = src.read(at, n).await.map_err(io("read"))?;
            if data.len() != n as usize {
                return Err(BenchError::Io(format!("short read at {at}: {} of {n}", data.len())));
            }
            dst.write_bytes(at, data).await.map_err(io("write"))?;
            Ok(())
        }
    })
    .await
}
