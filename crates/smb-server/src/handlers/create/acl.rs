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

use super::Opened;
use crate::request::Ctx;

/// The session's token (its user's SID first).
pub(super) fn token(cx: &Ctx<'_>) -> Vec<Sid> {
    let user = cx.session.as_ref().and_then(|s| s.user().cloned()).unwrap_or(crate::session::User::Anonymous);
    crate::identity::token(&user)
}

/// The stored descriptor of `h`, if it has one that parses.
fn stored(h: &dyn FileHandle) -> Option<SecurityDescriptor> {
    h.security_descriptor().ok().flatten().and_then(|b| SecurityDescriptor::parse(&b).ok())
}

/// The stored descriptor of the directory `dir`.
fn stored_at(backend: &dyn Backend, dir: &SharePath) -> Option<SecurityDescriptor> {
    let opts = OpenOptions { directory: true, ..OpenOptions::METADATA };
    let (h, _) = backend.open(dir, opts).ok()?;
    stored(h.as_ref())
}

/// Checks an open of an existing object against what its stored DACL grants
/// (`opened.acl_allowed`, looked up with the open). `desired` is the request's
/// DesiredAccess, `granted` what the share allows of it; returns the access to grant
/// (MAXIMUM_ALLOWED narrowed to what the DACL gives) or ACCESS_DENIED.
pub(super) fn check(opened: &Opened, desired: u32, granted: u32) -> Result<u32, NtStatus> {
    let Some(allowed) = opened.acl_allowed.filter(|_| !opened.created) else { return Ok(granted) };
    let explicit = acl::map_generic(desired & !access::MAXIMUM_ALLOWED);
    if explicit & !allowed != 0 {
        tracing::debug!(desired = format_args!("{desired:#x}"), allowed = format_args!("{allowed:#x}"), "denied by the stored DACL");
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(if desired & access::MAXIMUM_ALLOWED != 0 { explicit | (granted & allowed) } else { granted })
}

/// What the stored DACL of `h` (at `path`) grants `token`, with the parent's share of
/// DELETE and FILE_READ_ATTRIBUTES (FILE_LIST_DIRECTORY is FILE_READ_DATA on a directory);
/// None when nothing is stored. Runs on the blocking pool, with the open.
pub(super) fn allowed(h: &dyn FileHandle, backend: &dyn Backend, path: &SharePath, token: &[Sid]) -> Option<u32> {
    if !backend.may_have_security_descriptors() {
        return None;
    }
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

/// Gives the new object `h` (at `path`) the ACEs its parent passes on, owned by the
/// session's user (`token[0]`); nothing when the parent has no stored descriptor or nothing
/// inheritable. Runs on the blocking pool, with the open; a failure to store is logged.
pub(super) fn inherit(h: &dyn FileHandle, backend: &dyn Backend, path: &SharePath, is_dir: bool, token: &[Sid]) {
    let (Some(parent), Some(owner)) = (path.parent(), token.first()) else { return };
    if !backend.may_have_security_descriptors() {
        return;
    }
    let Some(psd) = stored_at(backend, &parent) else { return };
    let group = psd.group.clone().unwrap_or_else(|| "S-1-5-32-545".parse().unwrap_or_else(|_| Sid::everyone()));
    let Some(sd) = acl::inherit(&psd, is_dir, owner, &group) else { return };
    let sections = super::super::query_info::ALL_SECTIONS & !smb_fscc::SACL_SECURITY_INFORMATION;
    if let Err(e) = super::super::query_info::store_sd(h, &sd, sections) {
        tracing::debug!(error = %e, "storing an inherited security descriptor failed");
    }
}
