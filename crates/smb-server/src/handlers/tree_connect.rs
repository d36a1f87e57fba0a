//! TREE_CONNECT (MS-SMB2 3.3.5.7): disk shares with per-user access, and IPC$.

use smb_wire::msg::create::access;
use smb_wire::msg::tree::{share_flags, TreeConnectRequest, TreeConnectResponse, SHARE_TYPE_DISK, SHARE_TYPE_PIPE};
use smb_wire::NtStatus;

use crate::request::{Ctx, HResult, Reply};
use crate::session::User;
use crate::tree::{Tree, TreeKind};

/// Access granted on a read-only share: read, execute, read attributes/EA/control, synchronize.
const READ_ONLY_ACCESS: u32 = 0x0012_00A9;

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let req = TreeConnectRequest::decode(cx.msg()).map_err(super::bad("TREE_CONNECT"))?;
    let Some(session) = cx.session.clone() else { return Err(NtStatus::USER_SESSION_DELETED) };
    let Some(name) = req.share_name() else { return Err(NtStatus::BAD_NETWORK_NAME) };
    let user = session.user().cloned().unwrap_or(User::Anonymous);
    let (kind, maximal_access, read_only, share_type) = if name.eq_ignore_ascii_case("IPC$") {
        (TreeKind::Ipc, access::FILE_ALL_ACCESS, false, SHARE_TYPE_PIPE)
    } else {
        let Some(share) = cx.conn.server.share(name) else {
            tracing::info!(conn = cx.conn.id, share = name, "no such share");
            return Err(NtStatus::BAD_NETWORK_NAME);
        };
        if !share.admits(&user) {
            tracing::warn!(conn = cx.conn.id, peer = %cx.conn.peer, share = name, user = ?user, "share access denied");
            return Err(NtStatus::ACCESS_DENIED);
        }
        let ro = share.config.read_only;
        (TreeKind::Disk(share), if ro { READ_ONLY_ACCESS } else { access::FILE_ALL_ACCESS }, ro, SHARE_TYPE_DISK)
    };
    // MS-SMB2 3.3.5.7: an encrypted share needs a session that can encrypt; one that cannot is
    // refused, or served in the clear when the server does not reject unencrypted access.
    let share_encrypt = match &kind {
        TreeKind::Disk(s) => s.config.encrypt,
        TreeKind::Ipc => false,
    };
    let encrypt = share_encrypt && session.can_encrypt();
    if share_encrypt && !encrypt && cx.conn.server.config.reject_unencrypted {
        tracing::warn!(conn = cx.conn.id, peer = %cx.conn.peer, share = name, "share requires encryption; client cannot encrypt");
        return Err(NtStatus::ACCESS_DENIED);
    }
    let share_flags = if encrypt { share_flags::ENCRYPT_DATA } else { 0 };
    // One client of the share's limiter per session: its tree connects share a slot.
    let qos = match &kind {
        TreeKind::Disk(s) => Some(s.qos.client(session.id.0, &format!("smb {}@{}", user_label(&user), cx.conn.peer.ip()))),
        TreeKind::Ipc => None,
    };
    // A continuously available share says so (3.x): clients then ask for persistent handles.
    let ca = matches!(&kind, TreeKind::Disk(s) if s.config.continuous_availability) && smb_wire::dialect::is_smb3(cx.conn.dialect());
    let capabilities = if ca { smb_wire::msg::tree::share_caps::CONTINUOUS_AVAILABILITY } else { 0 };
    let Some(tree) = session.add_tree(|id| Tree { id, kind, maximal_access, read_only, encrypt, qos }) else {
        cx.conn.server.admission.hit(braid_admission::Limit::TreesPerSession, cx.conn.peer.ip());
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    };
    TreeConnectResponse { share_type, share_flags, capabilities, maximal_access }.encode(out);
    Ok(Reply { tree_id: Some(tree.id), ..Reply::success() })
}

/// The user as the share's client list names it.
fn user_label(user: &User) -> &str {
    match user {
        User::Named(n) => n,
        User::Guest => "guest",
        User::Anonymous => "anonymous",
    }
}
