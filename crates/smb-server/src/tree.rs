//! Tree connects: a session's attachment to a share or to IPC$.

use std::sync::Arc;

use crate::server::Share;

/// What a tree connect points at.
#[derive(Debug)]
pub enum TreeKind {
    Disk(Arc<Share>),
    Ipc,
}

/// One tree connect (MS-SMB2 3.3.1.9).
#[derive(Debug)]
pub struct Tree {
    pub id: u32,
    pub kind: TreeKind,
    /// Access the user has on this share (MaximalAccess).
    pub maximal_access: u32,
    pub read_only: bool,
    /// Requests on this tree must be encrypted (the share has `encrypt = true`).
    pub encrypt: bool,
    /// This tree connect's place among its share's clients (fairness and the per-client
    /// view of `braid_qos`); None on IPC$.
    pub qos: Option<Arc<braid_qos::ClientSlot>>,
}

impl Tree {
    pub fn share(&self) -> Option<&Arc<Share>> {
        match &self.kind {
            TreeKind::Disk(s) => Some(s),
            TreeKind::Ipc => None,
        }
    }
}
