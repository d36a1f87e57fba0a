//! The Apple `AAPL` create context (`smb_wire::msg::aapl`): a macOS client asks what the
//! server offers (kAAPL_SERVER_QUERY) on its first CREATE of a tree, and may later ask for
//! the path of a file id (kAAPL_RESOLVE_ID, used to resolve Finder aliases).
//!
//! Braid offers readdir attributes (directory listings carry each entry's resource fork
//! size, Finder info and mode, see `query_directory.rs`; recorded on the connection),
//! whole-file server-side copies (copyfile), the POSIX owner, group and mode as ACEs of
//! security descriptors (NFS ACEs), resolving file ids, and full sync (FLUSH is fsync,
//! which on Linux flushes the disk's cache too, so Time Machine may use the share). Names are case-insensitive, so the
//! volume is not case-sensitive.

use braid_vfs::SharePath;
use smb_wire::msg::aapl::{self, AaplRequest, ServerQueryReply};
use smb_wire::msg::create::CreateRequest;
use smb_wire::NtStatus;

use crate::request::Ctx;
use crate::server::Share;

/// At most this many directory entries are looked at to resolve one file id.
const RESOLVE_MAX_ENTRIES: usize = 200_000;

/// The `AAPL` response context data for `req`, if it carries the context. A context that
/// does not decode fails the CREATE with INVALID_PARAMETER, as Samba answers.
pub(super) async fn answer(cx: &Ctx<'_>, req: &CreateRequest<'_>, share: &Share) -> Result<Option<Vec<u8>>, NtStatus> {
    let Some(data) = req.context(aapl::NAME) else { return Ok(None) };
    let request = AaplRequest::decode(data).map_err(|e| {
        tracing::debug!(error = %e, "bad AAPL create context");
        NtStatus::INVALID_PARAMETER
    })?;
    match request {
        AaplRequest::ServerQuery { bitmap, client_caps } => Ok(Some(server_query(cx, bitmap, client_caps))),
        AaplRequest::ResolveId { file_id } => Ok(Some(resolve_id(share, file_id).await)),
    }
}

/// Answers a server query and records what the connection negotiated. Readdir attributes
/// are offered to a client that asks for them; whole-file copies (`ioctl/copy.rs`) and the
/// POSIX owner, group and mode in security descriptors (`query_info.rs`, `set_info.rs`)
/// are offered whatever the client says, as Samba's vfs_fruit does (the client does not
/// set those bits itself).
fn server_query(cx: &Ctx<'_>, bitmap: u64, client_caps: u64) -> Vec<u8> {
    let server_caps = aapl::UNIX_BASED | (client_caps & aapl::SUPPORTS_READ_DIR_ATTR) | aapl::SUPPORTS_OSX_COPYFILE | aapl::SUPPORTS_NFS_ACE;
    // The first answer holds for the connection, as the client keeps the first it got.
    let _ = cx.conn.apple.set(server_caps);
    let reply = ServerQueryReply {
        bitmap: bitmap & (aapl::SERVER_CAPS | aapl::VOLUME_CAPS | aapl::MODEL_INFO),
        server_caps: *cx.conn.apple.get().unwrap_or(&server_caps),
        volume_caps: aapl::SUPPORT_RESOLVE_ID | aapl::SUPPORTS_FULL_SYNC,
        model: cx.conn.server.config.apple_model.clone(),
    };
    reply.encode()
}

/// Finds the file whose id (FileInternalInformation's IndexNumber) is `file_id`: a walk
/// of the share, breadth first, bounded by [`RESOLVE_MAX_ENTRIES`], on the blocking pool.
/// The answer carries OBJECT_NAME_NOT_FOUND when it is not found.
async fn resolve_id(share: &Share, file_id: u64) -> Vec<u8> {
    let backend = share.backend.clone();
    let found = super::blocking(move || Ok(find_by_id(&*backend, file_id))).await.ok().flatten();
    match found {
        Some(path) => aapl::encode_resolve_reply(NtStatus::SUCCESS.0, &path.to_smb_string()),
        None => aapl::encode_resolve_reply(NtStatus::OBJECT_NAME_NOT_FOUND.0, ""),
    }
}

fn find_by_id(backend: &dyn braid_vfs::Backend, file_id: u64) -> Option<SharePath> {
    let mut queue = std::collections::VecDeque::from([SharePath::root()]);
    let mut seen = 0usize;
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = backend.read_dir_exact(&dir) else { continue };
        for e in entries {
            seen += 1;
            if seen > RESOLVE_MAX_ENTRIES {
                tracing::debug!(file_id, "AAPL resolve: too many entries looked at; not found");
                return None;
            }
            let Ok(path) = dir.join(&e.name) else { continue };
            if e.attrs.file_id == file_id {
                return Some(path);
            }
            if e.attrs.is_dir {
                queue.push_back(path);
            }
        }
    }
    None
}
