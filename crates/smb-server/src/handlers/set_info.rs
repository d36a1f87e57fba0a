//! SET_INFO (MS-SMB2 3.3.5.21): times and attributes, end of file, allocation, delete
//! disposition, rename, position and mode; security descriptors (stored, not enforced).

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use braid_filestate::{Access, ShareMode};
use braid_vfs::{what, SetTimes, SharePath};
use smb_fscc::{filetime_to_system_time, parse_set_info, FsccError, SetInfo};
use smb_wire::msg::create::{access, share as share_mode};
use smb_wire::msg::query_info::info_type;
use smb_wire::msg::set_info::SetInfoRequest;
use smb_wire::msg::simple::encode_set_info_response;
use smb_wire::NtStatus;

use super::{announce, blocking, find_open};

mod stream_rename;
use crate::open::{Open, OpenKind};
use crate::request::{Ctx, HResult, Reply};
use crate::status_map::state_status;
use crate::sync::lock;

fn fscc_status(e: FsccError) -> NtStatus {
    match e {
        FsccError::InvalidClass => NtStatus::INVALID_INFO_CLASS,
        FsccError::InfoLengthMismatch => NtStatus::INFO_LENGTH_MISMATCH,
        FsccError::NotSupported => NtStatus::NOT_SUPPORTED,
        _ => NtStatus::INVALID_PARAMETER,
    }
}

/// A FILETIME field of FileBasicInformation: 0 and -1 mean "leave alone".
fn time_field(ft: u64) -> Option<SystemTime> {
    if ft == 0 || ft >= smb_fscc::FILETIME_RESUME_UPDATES {
        None
    } else {
        filetime_to_system_time(ft)
    }
}

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    let frame = cx.frame.clone();
    let req = SetInfoRequest::decode(&frame[cx.range.clone()]).map_err(super::bad("SET_INFO"))?;
    let open = find_open(cx, req.file_id)?;
    let _seq = super::channel_sequence(cx, &open)?;
    match req.info_type {
        info_type::FILE => {}
        info_type::SECURITY => {
            let nfs_aces = super::query_info::nfs_aces(cx);
            if set_security(&open, req.additional_information, req.buffer, nfs_aces).await? {
                announce(cx, &open, what::SECURITY).await;
            }
            encode_set_info_response(out);
            return Ok(Reply::success());
        }
        info_type::FILESYSTEM | info_type::QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    let info = parse_set_info(req.info_class, req.buffer).map_err(fscc_status)?;
    let OpenKind::File { is_dir, .. } = &open.kind else { return Err(NtStatus::INVALID_PARAMETER) };
    if let Some((bits, must_write)) = required_access(&info)? {
        if !open.has(bits) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if must_write && open.tree.read_only {
            return Err(NtStatus::MEDIA_WRITE_PROTECTED);
        }
    }
    check_for_kind(&info, *is_dir)?;
    set_file_info(cx, out, &open, info).await?;
    encode_set_info_response(out);
    Ok(Reply::success())
}

/// The access a file information class needs on the open, and whether the share must be
/// writable; `None` for classes that check their own (disposition) or need none.
fn required_access(info: &SetInfo) -> Result<Option<(u32, bool)>, NtStatus> {
    Ok(match info {
        SetInfo::Basic { .. } => Some((access::FILE_WRITE_ATTRIBUTES, true)),
        SetInfo::EndOfFile { .. } | SetInfo::Allocation { .. } => Some((access::FILE_WRITE_DATA, true)),
        SetInfo::Rename { .. } => Some((access::DELETE, true)),
        SetInfo::ValidDataLength { .. } => Some((access::FILE_WRITE_DATA, false)),
        SetInfo::FullEa { .. } => Some((access::FILE_WRITE_EA, true)),
        SetInfo::Link { .. } => return Err(NtStatus::NOT_SUPPORTED),
        SetInfo::Disposition { .. } | SetInfo::DispositionEx { .. } | SetInfo::Position { .. } | SetInfo::Mode { .. } => None,
    })
}

/// Classes that do not apply to a directory (sizes) or to a file (the directory attribute);
/// MS-FSA 2.1.5.14.2: a directory cannot be temporary either.
fn check_for_kind(info: &SetInfo, is_dir: bool) -> Result<(), NtStatus> {
    let bad = match info {
        SetInfo::Basic { attributes, .. } => {
            attributes & smb_fscc::FILE_ATTRIBUTE_DIRECTORY != 0 && !is_dir || attributes & smb_fscc::FILE_ATTRIBUTE_TEMPORARY != 0 && is_dir
        }
        SetInfo::EndOfFile { .. } | SetInfo::Allocation { .. } => is_dir,
        _ => false,
    };
    if bad {
        Err(NtStatus::INVALID_PARAMETER)
    } else {
        Ok(())
    }
}

/// Applies a file information class whose access and kind checks passed.
async fn set_file_info(cx: &mut Ctx<'_>, out: &mut Vec<u8>, open: &Open, info: SetInfo) -> Result<(), NtStatus> {
    let OpenKind::File { handle, is_dir, node, .. } = &open.kind else { return Err(NtStatus::INVALID_PARAMETER) };
    let h = handle.clone();
    match info {
        SetInfo::Basic { creation_time, last_access_time, last_write_time, change_time, attributes } => {
            let times = SetTimes {
                created: time_field(creation_time),
                accessed: time_field(last_access_time),
                modified: time_field(last_write_time),
                changed: time_field(change_time),
            };
            let bits = basic_info_changes(attributes, &times);
            blocking(move || {
                // Attributes first: storing them moves the kernel change time, which an
                // explicit ChangeTime in the same request must win over.
                if attributes != 0 {
                    h.set_dos_attributes(attributes & smb_fscc::SETTABLE_ATTRIBUTES)?;
                }
                if times != SetTimes::default() {
                    h.set_times(times)?;
                }
                Ok(())
            })
            .await?;
            announce(cx, open, bits).await;
        }
        SetInfo::EndOfFile { end_of_file } => {
            crate::breaks::break_level2(open).send(&cx.conn.server).await;
            blocking(move || h.set_len(end_of_file)).await?;
            announce(cx, open, what::SIZE).await;
        }
        SetInfo::Allocation { allocation_size } => {
            crate::breaks::break_level2(open).send(&cx.conn.server).await;
            // Allocation below the end of file truncates (MS-FSA 2.1.5.15.1).
            blocking(move || {
                let size = h.attrs()?.size;
                if allocation_size < size {
                    h.set_len(allocation_size)
                } else {
                    h.allocate(allocation_size)
                }
            })
            .await?;
            announce(cx, open, what::SIZE).await;
        }
        SetInfo::Disposition { delete_pending } => {
            set_delete(open, h, *is_dir, node, delete_pending).await?;
            crate::persistent::changed(&cx.conn.server, open).await?;
        }
        SetInfo::DispositionEx { flags } => {
            set_delete(open, h, *is_dir, node, flags & 0x1 != 0).await?;
            crate::persistent::changed(&cx.conn.server, open).await?;
        }
        SetInfo::Rename { replace_if_exists, root_directory, file_name } => {
            rename(cx, out, open, replace_if_exists, root_directory, &file_name).await?;
            crate::persistent::changed(&cx.conn.server, open).await?;
        }
        SetInfo::Position { current_byte_offset } => open.position.store(current_byte_offset, Ordering::Relaxed),
        SetInfo::Mode { mode } => open.mode.store(u64::from(mode), Ordering::Relaxed),
        SetInfo::ValidDataLength { .. } | SetInfo::Link { .. } => {}
        SetInfo::FullEa { eas } => {
            let eas = check_eas(eas)?;
            blocking(move || apply_eas(h.as_ref(), &eas)).await.map_err(ea_status)?;
            announce(cx, open, what::EA).await;
        }
    }
    Ok(())
}

/// The properties (`braid_vfs::what` bits) a FileBasicInformation sets: the attributes
/// when given, and each time given. The change time has no notification kind of its own.
fn basic_info_changes(attributes: u32, times: &SetTimes) -> u32 {
    let mut bits = 0;
    if attributes != 0 {
        bits |= what::ATTRIBUTES;
    }
    for (set, bit) in [(times.created, what::CREATION), (times.accessed, what::LAST_ACCESS), (times.modified, what::LAST_WRITE)] {
        if set.is_some() {
            bits |= bit;
        }
    }
    bits
}

/// Validates the names of EAs to set (STATUS_INVALID_EA_NAME) and upper-cases them: EA
/// names are case-insensitive and Windows reports them in upper case.
pub(crate) fn check_eas(mut eas: Vec<smb_fscc::FullEa>) -> Result<Vec<smb_fscc::FullEa>, NtStatus> {
    for ea in &mut eas {
        if !smb_fscc::valid_ea_name(&ea.name) {
            return Err(NtStatus::INVALID_EA_NAME);
        }
        ea.name.make_ascii_uppercase();
    }
    Ok(eas)
}

/// Stores EAs already passed through [`check_eas`]; an empty value deletes one.
pub(crate) fn apply_eas(h: &dyn braid_vfs::FileHandle, eas: &[smb_fscc::FullEa]) -> braid_vfs::Result<()> {
    eas.iter().try_for_each(|ea| h.set_extended_attribute(&ea.name, &ea.value))
}

/// The VFS refuses EAs beyond its bounds as "too large", which the generic mapping would
/// report as a full disk.
pub(crate) fn ea_status(s: NtStatus) -> NtStatus {
    if s == NtStatus::DISK_FULL {
        NtStatus::EA_TOO_LARGE
    } else {
        s
    }
}

/// SET_INFO SECURITY (MS-SMB2 3.3.5.21.3, MS-FSA 2.1.5.16): each section needs its own
/// right, and only the selected sections of the stored descriptor change. With `nfs_aces`
/// (Apple's NFS ACEs negotiated) the DACL's S-1-5-88 ACEs are taken out, never stored, and
/// a mode ACE among them changes the file's mode after the rest is stored (Samba's
/// vfs_fruit `fruit_fset_nt_acl`); a DACL of nothing else leaves the stored DACL alone.
/// Returns whether anything changed.
async fn set_security(open: &Open, sections: u32, buffer: &[u8], nfs_aces: bool) -> Result<bool, NtStatus> {
    use smb_fscc::{
        DACL_SECURITY_INFORMATION as DACL, GROUP_SECURITY_INFORMATION as GROUP, OWNER_SECURITY_INFORMATION as OWNER,
        SACL_SECURITY_INFORMATION as SACL,
    };
    if sections & (OWNER | GROUP) != 0 && !open.has(access::WRITE_OWNER) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if sections & DACL != 0 && !open.has(access::WRITE_DAC) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // ACCESS_SYSTEM_SECURITY is never granted (CREATE refuses it), so no SACL is ever set.
    if sections & SACL != 0 && !open.has(access::ACCESS_SYSTEM_SECURITY) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if sections & (OWNER | GROUP | DACL) == 0 && !open.has(access::WRITE_DAC | access::WRITE_OWNER) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let OpenKind::File { handle, .. } = &open.kind else { return Err(NtStatus::INVALID_PARAMETER) };
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    let mut new = smb_fscc::SecurityDescriptor::parse(buffer).map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
    let mut sections = sections & (OWNER | GROUP | DACL);
    let mut chmod = None;
    if nfs_aces && sections & DACL != 0 && new.dacl.is_some() {
        chmod = smb_fscc::acl::take_nfs_aces(&mut new);
        if new.control & smb_fscc::SE_DACL_PRESENT == 0 {
            sections &= !DACL;
        }
    }
    // Setting the DACL from a descriptor without SE_DACL_PRESENT gives the file a NULL DACL
    // (everyone everything), as Windows does (smbtorture create.nulldacl).
    if sections & DACL != 0 && new.control & smb_fscc::SE_DACL_PRESENT == 0 {
        new.control |= smb_fscc::SE_DACL_PRESENT;
        new.dacl = None;
    }
    // A selected owner or group the descriptor does not carry leaves the stored one alone
    // rather than erasing it. Other bits (label, attribute, scope) are not stored.
    if new.owner.is_none() {
        sections &= !OWNER;
    }
    if new.group.is_none() {
        sections &= !GROUP;
    }
    if sections == 0 && chmod.is_none() {
        return Ok(false);
    }
    let h = handle.clone();
    blocking(move || {
        if sections != 0 {
            super::query_info::store_sd(h.as_ref(), &new, sections)?;
        }
        chmod.map_or(Ok(()), |mode| h.set_mode(mode))
    })
    .await?;
    Ok(true)
}

async fn set_delete(
    open: &Open,
    h: std::sync::Arc<dyn braid_vfs::FileHandle>,
    is_dir: bool,
    node: &crate::locks::FileNode,
    delete: bool,
) -> Result<(), NtStatus> {
    if !open.has(access::DELETE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if open.tree.read_only {
        return Err(NtStatus::MEDIA_WRITE_PROTECTED);
    }
    if delete {
        let a = blocking({
            let h = h.clone();
            move || h.attrs()
        })
        .await?;
        if a.dos_attributes & braid_vfs::dos::READONLY != 0 {
            return Err(NtStatus::CANNOT_DELETE);
        }
        if is_dir {
            let empty = blocking(move || Ok(h.read_dir()?.is_empty())).await?;
            if !empty {
                return Err(NtStatus::DIRECTORY_NOT_EMPTY);
            }
        }
        if lock(&open.path).is_root() {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    node.set_delete_pending(delete);
    if !delete {
        open.delete_on_close.store(false, Ordering::Release);
    }
    Ok(())
}

async fn rename(cx: &mut Ctx<'_>, out: &mut Vec<u8>, open: &Open, replace: bool, root_directory: u64, name: &str) -> Result<(), NtStatus> {
    if root_directory != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(share) = open.tree.share().cloned() else { return Err(NtStatus::INVALID_PARAMETER) };
    if name.starts_with(':') {
        return stream_rename::rename(cx, open, replace, name).await;
    }
    let name = name.strip_prefix('\\').unwrap_or(name);
    if open.handle().is_some_and(|h| h.stream_name().is_some()) {
        // A stream's open never renames its file. Naming a stream of the file with its
        // path is what Windows refuses with SHARING_VIOLATION (smbtorture's
        // smb2.streams.rename2).
        return Err(if name.contains(':') { NtStatus::SHARING_VIOLATION } else { NtStatus::NOT_SUPPORTED });
    }
    if name.contains(':') {
        // A file renamed to a stream name is not offered.
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let to = SharePath::from_smb(name).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    let from = lock(&open.path).clone();
    if from.is_root() || to.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if from == to {
        return Ok(());
    }
    // Other holders of handle caching let go of their cached handles first (MS-FSA
    // 2.1.5.14.11: the rename breaks H and waits). Before the checks that look at the
    // backend, so the break is on its way before a request sent after this one is answered
    // (smbtorture's smb2.lease.rename_wait counts on it).
    if let OpenKind::File { node, .. } = &open.kind {
        let who = crate::oplocks::Requester { open: open.id.volatile, lease: open.lease };
        super::create::wait_breaks(cx, out, node, who, crate::oplocks::Event::Namespace, false).await?;
    }
    let backend = share.backend.clone();
    let server = &cx.conn.server;
    // A directory with open files beneath it cannot move (MS-FSA 2.1.5.14.11), except for a
    // macOS client (one that sent the AAPL context): its Finder renames such directories,
    // as POSIX allows, and Samba's vfs_fruit lets it (`fruit:posix_rename`).
    if open.is_dir() && cx.conn.apple.get().is_none() {
        let busy = server.sessions.values().iter().flat_map(|s| s.opens()).any(|o| {
            o.id != open.id && o.tree.share().is_some_and(|s| s.index == share.index) && {
                let p = lock(&o.path);
                p.components().len() > from.components().len() && p.components().starts_with(from.components())
            }
        });
        if busy {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    // Renaming opens the target's parent directory for adding an entry, sharing read and
    // write only; that open must pass the share modes of the directory's other opens.
    if let Some(parent) = to.parent() {
        let (b, p) = (backend.clone(), parent);
        if let Ok(a) = blocking(move || b.stat(&p)).await {
            if let Some(node) = server.files.existing((share.index, a.file_id)) {
                let add = if open.is_dir() { access::FILE_APPEND_DATA } else { access::FILE_WRITE_DATA };
                node.check_share(Access(add | access::SYNCHRONIZE), ShareMode(share_mode::READ | share_mode::WRITE)).map_err(state_status)?;
            }
        }
    }
    // A target that someone has open cannot be replaced (Windows answers ACCESS_DENIED).
    if replace {
        let (b, t) = (backend.clone(), to.clone());
        if let Ok(a) = blocking(move || b.stat(&t)).await {
            // Not when the "target" is this very file under another case of its name.
            let own = matches!(&open.kind, OpenKind::File { key, .. } if key.1 == a.file_id);
            if !own && server.files.existing((share.index, a.file_id)).is_some() {
                return Err(NtStatus::ACCESS_DENIED);
            }
        }
    }
    let (f, t) = (from.clone(), to.clone());
    blocking(move || backend.rename(&f, &t, replace)).await?;
    let breaks = crate::changes::renamed(server, share.index, &from, &to, open.is_dir(), crate::open::open_origin(open));
    if open.is_dir() {
        follow_rename(server, open, share.index, &from, &to);
    }
    *lock(&open.path) = to;
    breaks.send(server).await;
    Ok(())
}

/// The other opens of a renamed directory follow it to its new name: a directory's lease
/// is found through its opens' paths when an entry changes (`dir_leases.rs`). So do the
/// opens beneath it, which only a macOS client's rename leaves (see `rename`). Directory
/// renames already look at every open.
fn follow_rename(server: &crate::server::ServerState, open: &Open, share: usize, from: &SharePath, to: &SharePath) {
    let Some(node) = open.node() else { return };
    let depth = from.components().len();
    for o in server.sessions.values().iter().flat_map(|s| s.opens()) {
        if o.id == open.id || o.tree.share().is_none_or(|s| s.index != share) {
            continue;
        }
        let mut path = lock(&o.path);
        if o.node().is_some_and(|n| std::sync::Arc::ptr_eq(n, node)) {
            *path = to.clone();
        } else if path.components().len() > depth && path.components().starts_with(from.components()) {
            let moved = path.components()[depth..].iter().try_fold(to.clone(), |p, c| p.join(c));
            if let Ok(moved) = moved {
                *path = moved;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(attributes: u32) -> SetInfo {
        SetInfo::Basic { creation_time: 0, last_access_time: 0, last_write_time: 0, change_time: 0, attributes }
    }

    #[test]
    fn each_class_asks_for_its_access() {
        assert_eq!(required_access(&basic(0)), Ok(Some((access::FILE_WRITE_ATTRIBUTES, true))));
        assert_eq!(required_access(&SetInfo::EndOfFile { end_of_file: 1 }), Ok(Some((access::FILE_WRITE_DATA, true))));
        assert_eq!(required_access(&SetInfo::ValidDataLength { valid_data_length: 1 }), Ok(Some((access::FILE_WRITE_DATA, false))));
        // Disposition checks DELETE itself; position and mode need nothing.
        assert_eq!(required_access(&SetInfo::Disposition { delete_pending: true }), Ok(None));
        assert_eq!(required_access(&SetInfo::Position { current_byte_offset: 0 }), Ok(None));
    }

    #[test]
    fn sizes_refuse_directories_and_attributes_must_fit_the_kind() {
        assert_eq!(check_for_kind(&SetInfo::EndOfFile { end_of_file: 0 }, true), Err(NtStatus::INVALID_PARAMETER));
        assert_eq!(check_for_kind(&SetInfo::Allocation { allocation_size: 0 }, false), Ok(()));
        assert_eq!(check_for_kind(&basic(smb_fscc::FILE_ATTRIBUTE_DIRECTORY), false), Err(NtStatus::INVALID_PARAMETER));
        assert_eq!(check_for_kind(&basic(smb_fscc::FILE_ATTRIBUTE_DIRECTORY), true), Ok(()));
        assert_eq!(check_for_kind(&basic(smb_fscc::FILE_ATTRIBUTE_TEMPORARY), true), Err(NtStatus::INVALID_PARAMETER));
        assert_eq!(check_for_kind(&basic(smb_fscc::FILE_ATTRIBUTE_TEMPORARY), false), Ok(()));
    }
}
