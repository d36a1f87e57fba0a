//! TREE_DISCONNECT (MS-SMB2 3.3.5.8): closes the tree's opens.

use smb_wire::msg::simple::{decode_empty, encode_empty};
use smb_wire::NtStatus;

use crate::request::{Ctx, HResult, Reply};

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    decode_empty(cx.msg()).map_err(super::bad("TREE_DISCONNECT"))?;
    let (Some(s), Some(t)) = (cx.session.clone(), cx.tree.clone()) else { return Err(NtStatus::NETWORK_NAME_DELETED) };
    for o in s.take_opens(Some(t.id)) {
        crate::open::close_open(&cx.conn.server, &o).await;
    }
    s.remove_tree(t.id);
    encode_empty(out);
    Ok(Reply::success())
}
