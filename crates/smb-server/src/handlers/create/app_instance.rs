//! The application instance contexts of a CREATE (MS-SMB2 3.3.5.9.13): a clustered
//! application that fails over to another client opens its files again with the same
//! AppInstanceId, and the server closes the old instance's opens of the same file first,
//! as a CLOSE would and without a break, so the new open neither waits nor conflicts.
//! The id is kept with durable opens (`crate::durable`): those are the opens that outlive
//! a failed client, and the only ones found here.

use std::sync::Arc;

use smb_wire::msg::app_instance::{self as ai, AppInstanceVersion};
use smb_wire::msg::create::CreateRequest;
use smb_wire::{dialect, NtStatus};

use crate::durable::{AppInstanceOpen, AppOwner};
use crate::open::Open;
use crate::request::Ctx;
use crate::server::ServerState;
use crate::session::Session;
use crate::sync::lock;
use crate::tree::Tree;

/// What a CREATE says of its application instance.
#[derive(Debug, Clone, Copy)]
pub(super) struct AppInstance {
    id: [u8; 16],
    /// Only in 3.1.1.
    version: Option<AppInstanceVersion>,
}

/// The request's application instance, if it names one (3.x only; a malformed context is
/// INVALID_PARAMETER).
pub(super) fn parse(cx: &Ctx<'_>, req: &CreateRequest<'_>) -> Result<Option<AppInstance>, NtStatus> {
    let d = cx.conn.dialect();
    let Some(data) = req.context(ai::APP_INSTANCE_ID).filter(|_| d >= dialect::SMB300) else { return Ok(None) };
    let id = ai::decode_id(data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let version = match req.context(ai::APP_INSTANCE_VERSION).filter(|_| d >= dialect::SMB311) {
        Some(v) => Some(AppInstanceVersion::decode(v).map_err(|_| NtStatus::INVALID_PARAMETER)?),
        None => None,
    };
    Ok(Some(AppInstance { id, version }))
}

/// The name a request opens, as opens are compared (case-insensitively).
fn request_name(req: &CreateRequest<'_>) -> String {
    req.name.replace('/', "\\").trim_start_matches('\\').to_lowercase()
}

/// Closes the opens of the same application instance, share and file made by other
/// clients, connected or disconnected. An open with a version at or above the request's
/// is not closed: the CREATE fails with FILE_FORCED_CLOSED instead.
pub(super) async fn close_prior(cx: &Ctx<'_>, req: &CreateRequest<'_>, app: AppInstance, tree: &Tree, session: &Session) -> Result<(), NtStatus> {
    let Some(share) = tree.share() else { return Ok(()) };
    let server = cx.conn.server.clone();
    let name = request_name(req);
    for found in server.durable.app_instance_opens(app.id, share.index, session.client_guid) {
        let Some(open) = find(&server, &found) else { continue };
        if lock(&open.path).to_smb_string().to_lowercase() != name {
            continue;
        }
        if found.version.zip(app.version).is_some_and(|(old, new)| old >= new) {
            return Err(NtStatus::FILE_FORCED_CLOSED);
        }
        if let Some(open) = take(&server, &found) {
            tracing::debug!(open = open.id.persistent, "closed by a later open of its application instance");
            crate::open::close_open(&server, &open).await;
        }
    }
    Ok(())
}

/// The open `found` names, left where it is.
fn find(server: &ServerState, found: &AppInstanceOpen) -> Option<Arc<Open>> {
    match found.session {
        Some(s) => server.sessions.get(&s)?.open(found.persistent),
        None => server.durable.disconnected_open(found.persistent),
    }
}

/// Takes the open `found` names away from its session or from the disconnected opens, so
/// that nothing else closes or reconnects it meanwhile. A connected open whose session
/// ended since it was found has moved to the disconnected opens.
fn take(server: &ServerState, found: &AppInstanceOpen) -> Option<Arc<Open>> {
    let from_session = found.session.and_then(|s| server.sessions.get(&s)).and_then(|s| s.remove_open(found.persistent));
    from_session.or_else(|| server.durable.take_disconnected(found.persistent))
}

/// Records the application instance of an open just made durable.
pub(super) fn record(server: &ServerState, open: &Open, session: &Session, app: Option<AppInstance>) {
    if let Some(app) = app {
        let owner = AppOwner { client_guid: session.client_guid, version: app.version };
        server.durable.set_app_instance(open.id.persistent, app.id, owner);
    }
}
