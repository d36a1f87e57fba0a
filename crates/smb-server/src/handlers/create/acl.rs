//! Stored security descriptors enforced at CREATE: an existing file or directory is opened
//! only for what its DACL grants the session (`smb_fscc::acl::granted`, with the token from
//! `identity.rs`), DELETE also when the parent grants FILE_DELETE_CHILD and
//! FILE_READ_ATTRIBUTES when it grants FILE_LIST_DIRECTORY (MS-FSA 2.1.5.1.2); and a new
//! one inherits its parent's inheritable ACEs. Files without a stored descriptor, like
//! Braid's synthetic one, grant everything: the share's permissions decide.

use braid_vfs::{Backend, FileHandle, OpenOptions, SharePath};
use smb_fscc::{acl, SecurityDescriptor, Sid};
use smb_wire::msg::create::access;
use smb_wire::NtStatus;

use super::{blocking, Opened};
use crate::request::Ctx;
use crate::server::Share;

/// The session's token (its user's SID first).
fn token(cx: &Ctx<'_>) -> Vec<Sid> {
    let user = cx.session.as_ref().and_then(|s| s.user().cloned()).unwrap_or(crate::session::User::Anonymous);
    crate::identity::token(&user)
}

/// The stored descriptor of `h`, if it has one that parses.
fn stored(h: &dyn FileHandle) -> Option<SecurityDescriptor> {
    h.security_descriptor().ok().flatten().and_then(|b| SecurityDescriptor::parse(&b).ok())
}

/// The stored descriptor of the directory `dir`.
fn stored_at(backend: &dyn Backend, dir: &SharePath) -> Option<SecurityDescriptor> {
    let opts = OpenOptions {
        read: false,
        write: false,
        create: braid_vfs::CreateMode::OpenExisting,
        truncate: false,
        directory: true,
        non_directory: false,
    };
    let (h, _) = backend.open(dir, opts).ok()?;
    stored(h.as_ref())
}

/// Checks an open of an existing object against its stored DACL. `desired` is the request's
/// DesiredAccess, `granted` what the share allows of it; returns the access to grant
/// (MAXIMUM_ALLOWED narrowed to what the DACL gives) or ACCESS_DENIED.
pub(super) async fn check_existing(cx: &Ctx<'_>, share: &Share, opened: &Opened, desired: u32, granted: u32) -> Result<u32, NtStatus> {
    if opened.created {
        return Ok(granted);
    }
    let token = token(cx);
    let (h, backend, path) = (opened.handle.clone(), share.backend.clone(), opened.path.clone());
    let allowed = blocking(move || Ok(allowed(h.as_ref(), backend.as_ref(), &path, &token))).await?;
    let Some(allowed) = allowed else { return Ok(granted) };
    let explicit = acl::map_generic(desired & !access::MAXIMUM_ALLOWED);
    if explicit & !allowed != 0 {
        tracing::debug!(desired = format_args!("{desired:#x}"), allowed = format_args!("{allowed:#x}"), "denied by the stored DACL");
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(if desired & access::MAXIMUM_ALLOWED != 0 { explicit | (granted & allowed) } else { granted })
}

/// What the stored DACL of `h` grants `token`, with the parent's share of DELETE and
/// FILE_READ_ATTRIBUTES (FILE_LIST_DIRECTORY is FILE_READ_DATA on a directory); None when
/// nothing is stored.
fn allowed(h: &dyn FileHandle, backend: &dyn Backend, path: &SharePath, token: &[Sid]) -> Option<u32> {
    let sd = stored(h)?;
    let mut allowed = acl::granted(&sd, token);
    let from_parent = access::DELETE | access::FILE_READ_ATTRIBUTES;
    if allowed & from_parent != from_parent {
        if let Some(parent) = path.parent() {
            let p = stored_at(backend, &parent).map_or(u32::MAX, |psd| acl::granted(&psd, token));
            if p & access::FILE_DELETE_CHILD != 0 {
                allowed |= access::DELETE;
            }
            if p & access::FILE_READ_DATA != 0 {
                allowed |= access::FILE_READ_ATTRIBUTES;
            }
        }
    }
    Some(allowed)
}

/// Gives a new object the ACEs its parent passes on, owned by the session's user; nothing
/// when the parent has no stored descriptor or nothing inheritable.
pub(super) async fn inherit_new(cx: &Ctx<'_>, share: &Share, opened: &Opened) {
    let Some(parent) = opened.path.parent().filter(|_| opened.created) else { return };
    let owner = token(cx).swap_remove(0);
    let (h, backend, is_dir) = (opened.handle.clone(), share.backend.clone(), opened.is_dir());
    let stored = blocking(move || {
        let Some(psd) = stored_at(backend.as_ref(), &parent) else { return Ok(false) };
        let group = psd.group.clone().unwrap_or_else(|| "S-1-5-32-545".parse().unwrap_or_else(|_| Sid::everyone()));
        let Some(sd) = acl::inherit(&psd, is_dir, &owner, &group) else { return Ok(false) };
        super::super::query_info::store_sd(h.as_ref(), &sd, super::super::query_info::ALL_SECTIONS & !smb_fscc::SACL_SECURITY_INFORMATION)?;
        Ok(true)
    })
    .await;
    if let Err(st) = stored {
        tracing::debug!(status = ?st, "storing an inherited security descriptor failed");
    }
}
