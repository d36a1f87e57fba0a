//! What a DACL grants (MS-DTYP 2.5.3.2 access check, without privileges) and what a new
//! file or directory inherits from its parent's DACL (MS-DTYP 2.5.3.4, simplified: no
//! object ACEs, no SACL). Pure functions over [`SecurityDescriptor`].
//!
//! Also the MS-NFS style ACEs Apple's clients read a file's POSIX owner, group and mode
//! from ([`add_nfs_aces`], [`take_nfs_aces`]): access-denied ACEs with an empty mask for the
//! SIDs S-1-5-88-1-<uid>, S-1-5-88-2-<gid> and S-1-5-88-3-<mode>, as Samba's vfs_fruit
//! reports them.

use crate::security::{SecurityDescriptor, Sid, SE_DACL_PRESENT};
use crate::wire::{put_u16, put_u32, put_u8};

/// MS-DTYP 2.4.3 and MS-SMB2 2.2.13.1.1 rights used here.
const READ_CONTROL: u32 = 0x0002_0000;
const WRITE_DAC: u32 = 0x0004_0000;
const GENERIC_READ: u32 = 0x8000_0000;
const GENERIC_WRITE: u32 = 0x4000_0000;
const GENERIC_EXECUTE: u32 = 0x2000_0000;
const GENERIC_ALL: u32 = 0x1000_0000;
/// The file rights the generic ones stand for (MS-SMB2 2.2.13.1.1).
const FILE_GENERIC_READ: u32 = 0x0012_0089;
const FILE_GENERIC_WRITE: u32 = 0x0012_0116;
const FILE_GENERIC_EXECUTE: u32 = 0x0012_00A0;
const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

/// ACE types and flags (MS-DTYP 2.4.4.1).
const ACCESS_ALLOWED: u8 = 0;
const ACCESS_DENIED: u8 = 1;
const OBJECT_INHERIT: u8 = 0x01;
const CONTAINER_INHERIT: u8 = 0x02;
const NO_PROPAGATE_INHERIT: u8 = 0x04;
const INHERIT_ONLY: u8 = 0x08;
const INHERITED: u8 = 0x10;

/// Maps the generic rights in an ACE's or a request's mask to file rights.
pub fn map_generic(mask: u32) -> u32 {
    let mut m = mask & !(GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL);
    for (g, f) in [
        (GENERIC_READ, FILE_GENERIC_READ),
        (GENERIC_WRITE, FILE_GENERIC_WRITE),
        (GENERIC_EXECUTE, FILE_GENERIC_EXECUTE),
        (GENERIC_ALL, FILE_ALL_ACCESS),
    ] {
        if mask & g != 0 {
            m |= f;
        }
    }
    m
}

/// One ACE of the plain kinds (allowed, denied and the audit types) with a SID.
struct Ace {
    kind: u8,
    flags: u8,
    mask: u32,
    sid: Sid,
}

/// The ACEs of an ACL (already validated by [`SecurityDescriptor::parse`]); ACEs of other
/// types (object, callback) are skipped.
fn aces(acl: &[u8]) -> Vec<Ace> {
    let count = acl.get(4..6).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let mut out = Vec::with_capacity(count.min(64));
    let mut pos = 8;
    for _ in 0..count {
        let Some(h) = acl.get(pos..pos + 8) else { break };
        let size = u16::from_le_bytes([h[2], h[3]]) as usize;
        if size < 8 {
            break;
        }
        if h[0] <= 3 {
            if let Some(Ok((sid, _))) = acl.get(pos + 8..pos + size).map(Sid::decode) {
                out.push(Ace { kind: h[0], flags: h[1], mask: u32::from_le_bytes([h[4], h[5], h[6], h[7]]), sid });
            }
        }
        pos += size;
    }
    out
}

/// The rights `sd` grants a caller whose token holds `token`: every right (a NULL DACL or
/// none at all), else what the DACL's ACEs allow, in order, before an earlier ACE denies
/// it, plus READ_CONTROL and WRITE_DAC for the owner. Inherit-only ACEs do not apply to
/// the object itself.
pub fn granted(sd: &SecurityDescriptor, token: &[Sid]) -> u32 {
    let Some(dacl) = sd.dacl.as_deref().filter(|_| sd.control & SE_DACL_PRESENT != 0) else { return u32::MAX };
    let mut allowed = 0u32;
    let mut denied = 0u32;
    for ace in aces(dacl) {
        if ace.flags & INHERIT_ONLY != 0 || !token.contains(&ace.sid) {
            continue;
        }
        let mask = map_generic(ace.mask);
        match ace.kind {
            ACCESS_ALLOWED => allowed |= mask & !denied,
            ACCESS_DENIED => denied |= mask & !allowed,
            _ => {}
        }
    }
    if sd.owner.as_ref().is_some_and(|o| token.contains(o)) {
        allowed |= (READ_CONTROL | WRITE_DAC) & !denied;
    }
    allowed
}

/// The well-known SIDs an inheritable ACE may name for the creator (MS-DTYP 2.4.2.4).
fn creator_owner() -> Sid {
    "S-1-3-0".parse().unwrap_or_else(|_| Sid::everyone())
}
fn creator_group() -> Sid {
    "S-1-3-1".parse().unwrap_or_else(|_| Sid::everyone())
}

/// The descriptor a new object gets from its parent's, or None when the parent's DACL has
/// nothing to inherit (the object then keeps the default). Files take the ACEs marked
/// OBJECT_INHERIT; directories those marked CONTAINER_INHERIT (kept inheritable unless
/// NO_PROPAGATE_INHERIT) and, inherit-only, those marked only OBJECT_INHERIT. CREATOR OWNER
/// and CREATOR GROUP become `owner` and `group` in the ACE that applies to the object.
pub fn inherit(parent: &SecurityDescriptor, is_dir: bool, owner: &Sid, group: &Sid) -> Option<SecurityDescriptor> {
    let dacl = parent.dacl.as_deref().filter(|_| parent.control & SE_DACL_PRESENT != 0)?;
    let mut out: Vec<(u8, u8, u32, Sid)> = Vec::new();
    let (co, cg) = (creator_owner(), creator_group());
    for ace in aces(dacl).into_iter().filter(|a| a.kind <= ACCESS_DENIED) {
        let (oi, ci, np) = (ace.flags & OBJECT_INHERIT != 0, ace.flags & CONTAINER_INHERIT != 0, ace.flags & NO_PROPAGATE_INHERIT != 0);
        let creator = ace.sid == co || ace.sid == cg;
        let effective = if ace.sid == co {
            owner.clone()
        } else if ace.sid == cg {
            group.clone()
        } else {
            ace.sid.clone()
        };
        if !is_dir && oi {
            out.push((ace.kind, INHERITED, ace.mask, effective));
        } else if is_dir && ci {
            if np || creator {
                // Applies here; a creator ACE also stays, inherit-only, for what comes below.
                out.push((ace.kind, INHERITED, ace.mask, effective));
                if creator && !np {
                    out.push((ace.kind, INHERITED | INHERIT_ONLY | (ace.flags & (OBJECT_INHERIT | CONTAINER_INHERIT)), ace.mask, ace.sid));
                }
            } else {
                out.push((ace.kind, INHERITED | (ace.flags & (OBJECT_INHERIT | CONTAINER_INHERIT)), ace.mask, effective));
            }
        } else if is_dir && oi && !np {
            out.push((ace.kind, INHERITED | INHERIT_ONLY | OBJECT_INHERIT, ace.mask, ace.sid));
        }
    }
    if out.is_empty() {
        return None;
    }
    let mut acl = Vec::new();
    put_u8(&mut acl, 2);
    put_u8(&mut acl, 0);
    put_u16(&mut acl, 0); // AclSize, patched below
    put_u16(&mut acl, out.len() as u16);
    put_u16(&mut acl, 0);
    for (kind, flags, mask, sid) in out {
        put_u8(&mut acl, kind);
        put_u8(&mut acl, flags);
        put_u16(&mut acl, (8 + sid.encoded_len()) as u16);
        put_u32(&mut acl, mask);
        sid.encode(&mut acl);
    }
    let size = u16::try_from(acl.len()).ok()?;
    acl[2..4].copy_from_slice(&size.to_le_bytes());
    Some(SecurityDescriptor {
        control: SE_DACL_PRESENT | 0x0400,
        owner: Some(owner.clone()),
        group: Some(group.clone()),
        sacl: None,
        dacl: Some(acl),
    })
}

/// The MS-NFS SID domain (S-1-5-88) and its kinds: users, groups, modes.
const NFS_DOMAIN: u32 = 88;
const NFS_USER: u32 = 1;
const NFS_GROUP: u32 = 2;
const NFS_MODE: u32 = 3;

fn nfs_sid(kind: u32, value: u32) -> Sid {
    Sid { revision: 1, authority: [0, 0, 0, 0, 0, 5], sub_authorities: vec![NFS_DOMAIN, kind, value] }
}

/// Whether `sid` lies in the S-1-5-88 domain, and then its kind (the next sub-authority,
/// if any) and value.
fn nfs_parts(sid: &Sid) -> Option<(Option<u32>, Option<u32>)> {
    let subs = &sid.sub_authorities;
    (sid.authority == [0, 0, 0, 0, 0, 5] && subs.first() == Some(&NFS_DOMAIN)).then(|| (subs.get(1).copied(), subs.get(2).copied()))
}

/// The ACEs of `acl` (raw, each with its header), in order, with their SIDs where the type
/// has one.
fn raw_aces(acl: &[u8]) -> Vec<(&[u8], Option<Sid>)> {
    let count = acl.get(4..6).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let mut out = Vec::with_capacity(count.min(64));
    let mut pos = 8;
    for _ in 0..count {
        let Some(h) = acl.get(pos..pos + 4) else { break };
        let size = u16::from_le_bytes([h[2], h[3]]) as usize;
        let Some(ace) = acl.get(pos..pos + size).filter(|_| size >= 8) else { break };
        let sid = if h[0] <= 3 { ace.get(8..).and_then(|b| Sid::decode(b).ok()).map(|(sid, _)| sid) } else { None };
        out.push((ace, sid));
        pos += size;
    }
    out
}

/// An ACL of the given revision holding `aces` (raw); None if it would exceed 64 KiB.
fn build_acl(revision: u8, aces: &[Vec<u8>]) -> Option<Vec<u8>> {
    let size = u16::try_from(8 + aces.iter().map(Vec::len).sum::<usize>()).ok()?;
    let mut acl = Vec::with_capacity(usize::from(size));
    put_u8(&mut acl, revision);
    put_u8(&mut acl, 0);
    put_u16(&mut acl, size);
    put_u16(&mut acl, u16::try_from(aces.len()).ok()?);
    put_u16(&mut acl, 0);
    for ace in aces {
        acl.extend_from_slice(ace);
    }
    Some(acl)
}

/// Removes every ACE naming an S-1-5-88 SID from the DACL and returns the permission bits
/// (`0o777`) of the first S-1-5-88-3-<mode> one: what a client that negotiated Apple's NFS
/// ACEs sends to chmod a file; such ACEs are never stored. A descriptor without a DACL, or
/// without such ACEs, is left as it is. A DACL left empty by the removal is no DACL at all
/// (SE_DACL_PRESENT cleared), as Samba treats one that held nothing else.
pub fn take_nfs_aces(sd: &mut SecurityDescriptor) -> Option<u32> {
    let dacl = sd.dacl.as_deref()?;
    let all = raw_aces(dacl);
    let is_nfs = |sid: &Option<Sid>| sid.as_ref().and_then(nfs_parts).is_some();
    if !all.iter().any(|(_, sid)| is_nfs(sid)) {
        return None;
    }
    let mode = all.iter().find_map(|(_, sid)| match sid.as_ref().and_then(nfs_parts) {
        Some((Some(NFS_MODE), Some(mode))) => Some(mode & 0o777),
        _ => None,
    });
    let kept: Vec<Vec<u8>> = all.iter().filter(|(_, sid)| !is_nfs(sid)).map(|(ace, _)| ace.to_vec()).collect();
    if kept.is_empty() {
        sd.dacl = None;
        sd.control &= !SE_DACL_PRESENT;
    } else {
        sd.dacl = build_acl(dacl[0], &kept);
    }
    mode
}

/// Replaces the S-1-5-88 ACEs of the DACL by the file's: mode (type bits included, as
/// st_mode has them), owner and group, in that order at the end. A NULL DACL (everyone
/// everything) is left alone, as is one that would outgrow the ACL size limit.
pub fn add_nfs_aces(sd: &mut SecurityDescriptor, st_mode: u32, uid: u32, gid: u32) {
    let Some(dacl) = sd.dacl.as_deref() else { return };
    let mut aces: Vec<Vec<u8>> =
        raw_aces(dacl).into_iter().filter(|(_, sid)| sid.as_ref().and_then(nfs_parts).is_none()).map(|(a, _)| a.to_vec()).collect();
    for sid in [nfs_sid(NFS_MODE, st_mode), nfs_sid(NFS_USER, uid), nfs_sid(NFS_GROUP, gid)] {
        let mut ace = Vec::with_capacity(8 + sid.encoded_len());
        put_u8(&mut ace, ACCESS_DENIED);
        put_u8(&mut ace, 0);
        put_u16(&mut ace, (8 + sid.encoded_len()) as u16);
        put_u32(&mut ace, 0);
        sid.encode(&mut ace);
        aces.push(ace);
    }
    if let Some(acl) = build_acl(dacl[0], &aces) {
        sd.dacl = Some(acl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> Sid {
        s.parse().unwrap()
    }

    /// A descriptor owned by `owner` with the ACEs (type, flags, mask, sid).
    fn sd(owner: &str, list: &[(u8, u8, u32, &str)]) -> SecurityDescriptor {
        let mut acl = vec![2, 0, 0, 0];
        acl.extend_from_slice(&(list.len() as u16).to_le_bytes());
        acl.extend_from_slice(&[0, 0]);
        for &(k, f, m, s) in list {
            let s = sid(s);
            acl.extend_from_slice(&[k, f]);
            acl.extend_from_slice(&((8 + s.encoded_len()) as u16).to_le_bytes());
            acl.extend_from_slice(&m.to_le_bytes());
            s.encode(&mut acl);
        }
        let n = acl.len() as u16;
        acl[2..4].copy_from_slice(&n.to_le_bytes());
        let mut bytes = Vec::new();
        SecurityDescriptor { control: SE_DACL_PRESENT, owner: Some(sid(owner)), group: None, sacl: None, dacl: Some(acl) }.encode(0x7, &mut bytes);
        SecurityDescriptor::parse(&bytes).unwrap()
    }

    const ALICE: &str = "S-1-5-21-1-2-3-1001";
    const ADMINS: &str = "S-1-5-32-544";

    #[test]
    fn allowed_and_denied_in_order_and_the_owner_implicit_rights() {
        let token = [sid(ALICE), sid("S-1-1-0")];
        let d = sd(ADMINS, &[(ACCESS_DENIED, 0, 0x0001_0000, ALICE), (ACCESS_ALLOWED, 0, GENERIC_ALL, "S-1-1-0")]);
        assert_eq!(granted(&d, &token), FILE_ALL_ACCESS & !0x0001_0000);
        let d = sd(ALICE, &[(ACCESS_ALLOWED, 0, 0x1, ALICE)]);
        assert_eq!(granted(&d, &token), 0x1 | READ_CONTROL | WRITE_DAC);
        // An empty DACL grants nothing but the owner's rights; inherit-only ACEs nothing.
        let d = sd(ADMINS, &[(ACCESS_ALLOWED, INHERIT_ONLY | OBJECT_INHERIT, FILE_ALL_ACCESS, ALICE)]);
        assert_eq!(granted(&d, &token), 0);
        let mut null = d.clone();
        null.dacl = None;
        assert_eq!(granted(&null, &token), u32::MAX);
    }

    #[test]
    fn files_and_directories_inherit_what_is_marked_for_them() {
        let (owner, group) = (sid(ALICE), sid("S-1-5-32-545"));
        let parent = sd(
            ADMINS,
            &[
                (ACCESS_ALLOWED, OBJECT_INHERIT, 0x12_019F, ALICE),
                (ACCESS_ALLOWED, CONTAINER_INHERIT, FILE_ALL_ACCESS, "S-1-3-0"),
                (ACCESS_ALLOWED, 0, FILE_ALL_ACCESS, ADMINS),
            ],
        );
        let file = inherit(&parent, false, &owner, &group).unwrap();
        assert_eq!(granted(&file, &[sid(ALICE)]), 0x12_019F | READ_CONTROL | WRITE_DAC);
        assert_eq!(granted(&file, &[sid(ADMINS)]), 0, "the parent's own ACE is not inherited");
        let dir = inherit(&parent, true, &owner, &group).unwrap();
        // CREATOR OWNER became ALICE on the directory; the file ACE is inherit-only there.
        assert_eq!(granted(&dir, &[sid(ALICE)]), FILE_ALL_ACCESS);
        let grandchild = inherit(&dir, false, &sid(ADMINS), &group).unwrap();
        assert_eq!(granted(&grandchild, &[sid(ALICE)]), 0x12_019F);
        assert!(inherit(&sd(ADMINS, &[(ACCESS_ALLOWED, 0, 1, ALICE)]), false, &owner, &group).is_none());
    }

    #[test]
    fn nfs_aces_are_added_once_and_taken_out_with_the_mode() {
        let mut d = sd(ADMINS, &[(ACCESS_ALLOWED, 0, FILE_ALL_ACCESS, "S-1-1-0")]);
        add_nfs_aces(&mut d, 0o100_644, 1000, 100);
        add_nfs_aces(&mut d, 0o100_640, 1000, 100);
        let sids: Vec<String> = aces(d.dacl.as_deref().unwrap()).iter().map(|a| a.sid.to_string()).collect();
        assert_eq!(sids, ["S-1-1-0", "S-1-5-88-3-33184", "S-1-5-88-1-1000", "S-1-5-88-2-100"]);
        // They deny nothing.
        assert_eq!(granted(&d, &[sid("S-1-5-88-1-1000"), sid("S-1-1-0")]), FILE_ALL_ACCESS);
        // The descriptor stays well-formed.
        let mut bytes = Vec::new();
        d.encode(0x7, &mut bytes);
        assert_eq!(SecurityDescriptor::parse(&bytes).unwrap(), d);
        // Extra uid ACEs go too; the mode is the first mode ACE's permission bits.
        let mut sent =
            sd(ADMINS, &[(ACCESS_DENIED, 0, 0, "S-1-5-88-1-27"), (ACCESS_ALLOWED, 0, 1, ALICE), (ACCESS_DENIED, 0, 0, "S-1-5-88-3-33261")]);
        assert_eq!(take_nfs_aces(&mut sent), Some(0o755));
        assert_eq!(aces(sent.dacl.as_deref().unwrap()).len(), 1);
        assert_eq!(take_nfs_aces(&mut sent), None, "nothing left to take");
        // A DACL of NFS ACEs only becomes no DACL.
        let mut only = sd(ADMINS, &[(ACCESS_DENIED, 0, 0, "S-1-5-88-2-300")]);
        assert_eq!(take_nfs_aces(&mut only), None);
        assert_eq!((only.dacl, only.control & SE_DACL_PRESENT), (None, 0));
        // A NULL DACL gets none.
        let mut null = sd(ADMINS, &[]);
        null.dacl = None;
        add_nfs_aces(&mut null, 0o644, 0, 0);
        assert_eq!(null.dacl, None);
    }
}
