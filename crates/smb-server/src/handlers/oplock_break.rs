//! OPLOCK_BREAK acknowledgments (MS-SMB2 3.3.5.22): of an oplock (StructureSize 24) or of
//! a lease (StructureSize 36). The break state itself lives in `oplocks.rs`.

use smb_wire::msg::oplock::{break_ack_kind, LeaseAck, OplockBreak, OPLOCK_BREAK_SIZE};
use smb_wire::{dialect, NtStatus};

use super::find_open;
use crate::request::{Ctx, HResult, Reply};

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    match break_ack_kind(cx.msg()) {
        Some(OPLOCK_BREAK_SIZE) => {
            let open = oplock_ack(cx, out)?;
            // A persistent open's new level is committed before the answer goes out.
            crate::persistent::changed(&cx.conn.server, &open).await?;
            Ok(Reply::success())
        }
        Some(_) => {
            let (share, id) = lease_ack(cx, out)?;
            crate::persistent::lease_changed(&cx.conn.server, share, id).await?;
            Ok(Reply::success())
        }
        None => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// MS-SMB2 3.3.5.22.1.
fn oplock_ack(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> Result<std::sync::Arc<crate::open::Open>, NtStatus> {
    let req = OplockBreak::decode(cx.msg()).map_err(super::bad("OPLOCK_BREAK"))?;
    let open = find_open(cx, req.file_id)?;
    let Some(node) = open.node() else { return Err(NtStatus::INVALID_OPLOCK_PROTOCOL) };
    let level = node.oplocks.ack_oplock(open.id.volatile, req.oplock_level)?;
    OplockBreak { oplock_level: level, file_id: open.id }.encode(out);
    Ok(open)
}

/// MS-SMB2 3.3.5.22.2: the lease is found by the session's ClientGuid and the LeaseKey.
/// Returns the index of the share the lease's file is on, and the lease.
fn lease_ack(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> Result<(usize, crate::oplocks::LeaseId), NtStatus> {
    if cx.conn.dialect() < dialect::SMB210 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let req = LeaseAck::decode(cx.msg()).map_err(super::bad("lease break acknowledgment"))?;
    let session = cx.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)?;
    let id = (session.client_guid, req.lease_key);
    let files = &cx.conn.server.files;
    let file = files.lease_file(id).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let node = files.existing(file).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let (state, next) = node.oplocks.ack_lease(id.0, id.1, req.lease_state)?;
    crate::breaks::deliver_later(&cx.conn.server, next);
    LeaseAck { flags: 0, lease_key: req.lease_key, lease_state: state, lease_duration: 0 }.encode(out);
    Ok((file.0, id))
}
