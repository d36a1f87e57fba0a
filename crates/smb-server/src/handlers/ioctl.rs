//! IOCTL (MS-SMB2 3.3.5.15): validate-negotiate, pipe transceive, and the few file FSCTLs
//! clients need; everything else answers as Windows does for an unsupported control.

use std::time::Duration;

use smb_wire::msg::ioctl::{encode_network_interfaces, encode_response, fsctl, interface_caps, IoctlRequest, NetworkInterfaceInfo, FLAG_IS_FSCTL};
use smb_wire::reader::{PutLe, Reader};
use smb_wire::{dialect, FileId, NtStatus};

mod block_clone;
mod copy;
mod sparse;

use super::{find_open, rpc_context};
use crate::durable::Grant;
use crate::open::{Open, OpenKind};
use crate::request::{Ctx, HResult, Reply};
use crate::sync::lock;

/// Whether this IOCTL may come without a session: only smbtorture's channel-failure
/// control, and only when the configuration allows the test controls (as Samba does
/// with `smbd:FSCTL_SMBTORTURE`).
pub fn sessionless(cx: &Ctx<'_>) -> bool {
    // CtlCode follows the 64-byte header, StructureSize and Reserved.
    let msg = &cx.frame[cx.range.clone()];
    cx.conn.server.config.smbtorture_hooks && msg.get(68..72).is_some_and(|c| c == fsctl::SMBTORTURE_FORCE_UNACKED_TIMEOUT.to_le_bytes())
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = IoctlRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("IOCTL"))?;
    if req.flags != FLAG_IS_FSCTL {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if req.ctl_code == fsctl::SMBTORTURE_FORCE_UNACKED_TIMEOUT {
        return force_unacked(cx, &req, out);
    }
    let max_out = req.max_output_response.min(cx.conn.server.config.max_io_size) as usize;
    match req.ctl_code {
        fsctl::VALIDATE_NEGOTIATE_INFO => return validate_negotiate(cx, &req, out),
        fsctl::DFS_GET_REFERRALS | fsctl::DFS_GET_REFERRALS_EX => return Err(NtStatus::FS_DRIVER_REQUIRED),
        fsctl::QUERY_NETWORK_INTERFACE_INFO => return network_interfaces(cx, &req, out),
        fsctl::PIPE_WAIT => return Err(NtStatus::NOT_SUPPORTED),
        fsctl::SMBTORTURE_IOCTL_RESPONSE_BODY_PADDING8 | fsctl::SMBTORTURE_GLOBAL_READ_RESPONSE_BODY_PADDING8 => {
            return torture_padding(cx, &req, max_out, out)
        }
        _ => {}
    }
    let open = find_open(cx, req.file_id)?;
    let _seq = super::channel_sequence(cx, &open)?;
    match (&open.kind, req.ctl_code) {
        (OpenKind::Pipe(p), fsctl::PIPE_TRANSCEIVE) => {
            let rpc = rpc_context(&cx.conn.server);
            let (data, more) = lock(p).transceive(req.input, max_out, &rpc.ctx()).map_err(|e| {
                tracing::debug!(error = %e, "RPC pipe error");
                NtStatus::INVALID_PARAMETER
            })?;
            encode_response(out, req.ctl_code, open.id, &data);
            Ok(Reply::new(if more { NtStatus::BUFFER_OVERFLOW } else { NtStatus::SUCCESS }))
        }
        (OpenKind::Pipe(_), _) => Err(NtStatus::NOT_SUPPORTED),
        (OpenKind::File { .. }, fsctl::SET_SPARSE) => sparse::set_sparse(cx, &req, &open, out).await,
        (OpenKind::File { .. }, fsctl::SET_ZERO_DATA) => sparse::set_zero_data(cx, &req, open.clone(), out).await,
        (OpenKind::File { .. }, fsctl::QUERY_ALLOCATED_RANGES) => sparse::query_allocated_ranges(&req, &open, max_out, out).await,
        (OpenKind::File { .. }, fsctl::GET_COMPRESSION) => {
            if max_out < 2 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            encode_response(out, req.ctl_code, open.id, &[0, 0]);
            Ok(Reply::success())
        }
        (OpenKind::File { .. }, fsctl::SET_COMPRESSION) => {
            // Only COMPRESSION_FORMAT_NONE can be honoured.
            if req.input.len() < 2 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            if req.input[..2] != [0, 0] {
                return Err(NtStatus::NOT_SUPPORTED);
            }
            encode_response(out, req.ctl_code, open.id, &[]);
            Ok(Reply::success())
        }
        (OpenKind::File { .. }, fsctl::LMR_REQUEST_RESILIENCY) => {
            request_resiliency(cx, &req, &open)?;
            encode_response(out, req.ctl_code, open.id, &[]);
            Ok(Reply::success())
        }
        (OpenKind::File { .. }, fsctl::CREATE_OR_GET_OBJECT_ID) => {
            if max_out < 64 {
                return Err(NtStatus::BUFFER_TOO_SMALL);
            }
            let h = open.handle().cloned().ok_or(NtStatus::INVALID_HANDLE)?;
            let attrs = super::blocking(move || h.attrs()).await?;
            let share = open.tree.share().map_or(0, |s| s.index as u64);
            encode_response(out, req.ctl_code, open.id, &object_id(share, attrs.file_id));
            Ok(Reply::success())
        }
        (OpenKind::File { .. }, fsctl::SMBTORTURE_FSP_ASYNC_SLEEP) if cx.conn.server.config.smbtorture_hooks => fsp_sleep(cx, &req, &open, out).await,
        (OpenKind::File { .. }, fsctl::SRV_ENUMERATE_SNAPSHOTS) => Err(NtStatus::INVALID_DEVICE_REQUEST),
        (OpenKind::File { .. }, fsctl::SRV_REQUEST_RESUME_KEY) => copy::request_resume_key(cx, &req, &open, out),
        (OpenKind::File { .. }, fsctl::SRV_COPYCHUNK | fsctl::SRV_COPYCHUNK_WRITE) => copy::copy_chunks(cx, &req, open.clone(), out).await,
        (OpenKind::File { .. }, fsctl::DUPLICATE_EXTENTS_TO_FILE | fsctl::DUPLICATE_EXTENTS_TO_FILE_EX) => {
            block_clone::duplicate_extents(cx, &req, open.clone(), out).await
        }
        _ => Err(NtStatus::INVALID_DEVICE_REQUEST),
    }
}

/// smbtorture's FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT: from now on nothing sent on this
/// connection counts as acknowledged by TCP (only with `smbtorture_hooks`).
fn force_unacked(cx: &Ctx<'_>, req: &IoctlRequest<'_>, out: &mut Vec<u8>) -> HResult {
    if !cx.conn.server.config.smbtorture_hooks {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if !req.input.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    tracing::info!(conn = cx.conn.id, "smbtorture: treating this connection's sends as never acknowledged");
    cx.conn.force_unacked.store(true, std::sync::atomic::Ordering::Relaxed);
    encode_response(out, req.ctl_code, req.file_id, &[]);
    Ok(Reply::success())
}

/// smbtorture's FSCTL_SMBTORTURE_IOCTL_RESPONSE_BODY_PADDING8 and
/// FSCTL_SMBTORTURE_GLOBAL_READ_RESPONSE_BODY_PADDING8 (only with `smbtorture_hooks`, on no
/// file, as Samba's smbd answers them): the first answers with 8 bytes of padding after its
/// fixed part and its output (as long as asked for) filled with 8s; the second pads every
/// later READ response of the connection (`read.rs`). Clients must follow the offsets.
fn torture_padding(cx: &Ctx<'_>, req: &IoctlRequest<'_>, max_out: usize, out: &mut Vec<u8>) -> HResult {
    if !cx.conn.server.config.smbtorture_hooks {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if req.file_id != FileId::RELATED || !req.input.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.ctl_code == fsctl::SMBTORTURE_GLOBAL_READ_RESPONSE_BODY_PADDING8 {
        cx.conn.read_body_padding.store(true, std::sync::atomic::Ordering::Relaxed);
        encode_response(out, req.ctl_code, req.file_id, &[]);
    } else {
        smb_wire::msg::ioctl::encode_response_padded(out, req.ctl_code, req.file_id, &vec![8u8; max_out], 8);
    }
    Ok(Reply::success())
}

/// smbtorture's FSCTL_SMBTORTURE_FSP_ASYNC_SLEEP (only with `smbtorture_hooks`): sleeps,
/// then answers whether the open survived; a CLOSE sent meanwhile must wait for it.
async fn fsp_sleep(cx: &Ctx<'_>, req: &IoctlRequest<'_>, open: &crate::open::Open, out: &mut Vec<u8>) -> HResult {
    let [ms] = req.input else { return Err(NtStatus::INVALID_PARAMETER) };
    tokio::time::sleep(std::time::Duration::from_millis(u64::from(*ms))).await;
    if cx.session.as_ref().and_then(|s| s.open(open.id.volatile)).is_none() {
        return Err(NtStatus::FILE_CLOSED);
    }
    encode_response(out, req.ctl_code, open.id, &[]);
    Ok(Reply::success())
}

/// Longest resiliency timeout a client may ask for, in milliseconds (Windows uses 5 minutes).
const MAX_RESILIENCY_TIMEOUT_MS: u32 = 300_000;

/// FSCTL_LMR_REQUEST_RESILIENCY (MS-SMB2 3.3.5.15.9). The open becomes resilient: its LOCK
/// requests get lock sequence replay detection, and it outlives the loss of its connection
/// for the timeout asked (0: the v2 durable default) as a disconnected durable open does,
/// until its owner reconnects it with DHnC (`crate::durable`).
fn request_resiliency(cx: &Ctx<'_>, req: &IoctlRequest<'_>, open: &Open) -> Result<(), NtStatus> {
    if cx.conn.dialect() < dialect::SMB210 {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let mut r = Reader::new(req.input, 0);
    let timeout = r.u32().map_err(|_| NtStatus::INVALID_PARAMETER)?;
    r.u32().map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if timeout > MAX_RESILIENCY_TIMEOUT_MS {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (Some(node), Some(share)) = (open.node(), open.tree.share()) else { return Err(NtStatus::INVALID_DEVICE_REQUEST) };
    node.enable_lock_sequences(open.id.volatile);
    let session = cx.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)?;
    // Open.DurableOwner: only this user may reconnect it; an anonymous one never can.
    let Some(user) = session.user().cloned() else { return Ok(()) };
    let timeout = match timeout {
        0 => crate::durable::V2_DEFAULT_TIMEOUT,
        ms => Duration::from_millis(u64::from(ms)),
    };
    let grant = || Grant {
        create_guid: None,
        timeout,
        user,
        share: share.index,
        lease: open.lease,
        create_action: smb_wire::msg::create::action::OPENED,
        persistent: false,
        app_instance: None,
    };
    cx.conn.server.durable.make_resilient(open.id.persistent, timeout, session.id, grant);
    Ok(())
}

/// FILE_OBJECTID_BUFFER (MS-FSCC 2.1.3) for FSCTL_CREATE_OR_GET_OBJECT_ID. There is no
/// object id store, so the id is derived from the share and the file id: stable for the
/// life of the file and distinct between files.
fn object_id(share: u64, file_id: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..8].copy_from_slice(&file_id.to_le_bytes());
    b[8..16].copy_from_slice(&share.to_le_bytes());
    // BirthObjectId equals ObjectId; BirthVolumeId and DomainId stay zero.
    b.copy_within(0..16, 32);
    b
}

/// FSCTL_VALIDATE_NEGOTIATE_INFO (MS-SMB2 3.3.5.15.12): any mismatch with what NEGOTIATE
/// saw means tampering, and the connection is dropped.
fn validate_negotiate(cx: &mut Ctx<'_>, req: &IoctlRequest<'_>, out: &mut Vec<u8>) -> HResult {
    let Some(neg) = cx.conn.negotiated.get() else { return Err(NtStatus::INVALID_PARAMETER) };
    if neg.dialect == dialect::SMB311 {
        // 3.1.1 protects negotiation with the preauth hash instead.
        tracing::warn!(conn = cx.conn.id, "VALIDATE_NEGOTIATE on 3.1.1; disconnecting");
        cx.conn.close();
        return Err(NtStatus::ACCESS_DENIED);
    }
    let ok = (|| -> Result<bool, smb_wire::WireError> {
        let mut r = Reader::new(req.input, 0);
        let caps = r.u32()?;
        let guid = r.array::<16>()?;
        let mode = r.u16()?;
        let count = r.u16()?;
        let dialects: Vec<u16> = (0..count).map(|_| r.u16()).collect::<Result<_, _>>()?;
        let best = [dialect::SMB311, dialect::SMB302, dialect::SMB300, dialect::SMB210, dialect::SMB202].into_iter().find(|d| dialects.contains(d));
        Ok(caps == neg.client_capabilities && guid == neg.client_guid && mode == neg.client_security_mode && best == Some(neg.dialect))
    })()
    .unwrap_or(false);
    if !ok || (req.max_output_response as usize) < 24 {
        tracing::warn!(conn = cx.conn.id, peer = %cx.conn.peer, "VALIDATE_NEGOTIATE mismatch; disconnecting");
        cx.conn.close();
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut data = Vec::with_capacity(24);
    data.put_u32(neg.server_capabilities);
    data.extend_from_slice(&cx.conn.server.server_guid);
    data.put_u16(neg.server_security_mode);
    data.put_u16(neg.dialect);
    let fid = FileId { persistent: u64::MAX, volatile: u64::MAX };
    encode_response(out, req.ctl_code, fid, &data);
    Ok(Reply::success())
}

/// FSCTL_QUERY_NETWORK_INTERFACE_INFO (MS-SMB2 3.3.5.15.11): the interfaces a multichannel
/// client may bind more channels over.
fn network_interfaces(cx: &mut Ctx<'_>, req: &IoctlRequest<'_>, out: &mut Vec<u8>) -> HResult {
    let server = &cx.conn.server;
    if !server.config.multichannel || !dialect::is_smb3(cx.conn.dialect()) {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let all_ones = FileId { persistent: u64::MAX, volatile: u64::MAX };
    if req.file_id != all_ones {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let list: Vec<NetworkInterfaceInfo> = crate::interfaces::list(&server.config)
        .iter()
        .enumerate()
        .map(|(i, f)| NetworkInterfaceInfo {
            if_index: u32::try_from(i + 1).unwrap_or(u32::MAX),
            capability: if f.rss { interface_caps::RSS_CAPABLE } else { 0 } | if f.rdma { interface_caps::RDMA_CAPABLE } else { 0 },
            link_speed: f.speed,
            addr: Some(f.address),
        })
        .collect();
    let data = encode_network_interfaces(&list);
    if data.len() > req.max_output_response as usize {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    encode_response(out, req.ctl_code, all_ones, &data);
    Ok(Reply::success())
}
