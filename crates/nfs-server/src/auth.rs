//! Who a call acts as: the AUTH_SYS credential after the export's squash rules, and what
//! that identity may do to a file by its mode bits (the ACCESS procedure, and the checks
//! the server makes itself where the metadata cache answers without asking the kernel).

use crate::config::ExportRules;

/// The identity a call's storage work runs as (`with_creds` switches the thread to it).
pub use braid_vfs::creds::Creds as Identity;

/// The credential a call carried, as far as the server cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential<'a> {
    None,
    Sys {
        uid: u32,
        gid: u32,
        gids: &'a [u32],
    },
    /// Another flavor (RPCSEC_GSS, AUTH_DH, ...): not served.
    Other(u32),
}

/// Why a credential is refused (answered with AUTH_ERROR and AUTH_TOOWEAK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooWeak;

/// The identity of a call to an export with `rules`.
pub fn identity(rules: &ExportRules, cred: &Credential<'_>) -> Result<Identity, TooWeak> {
    let anon = Identity { uid: rules.anonuid, gid: rules.anongid, groups: Vec::new() };
    match *cred {
        Credential::None if rules.auth_none => Ok(anon),
        Credential::None | Credential::Other(_) => Err(TooWeak),
        Credential::Sys { .. } if rules.all_squash => Ok(anon),
        Credential::Sys { uid, gid, gids } => {
            let mut id = Identity { uid, gid, groups: gids.iter().copied().take(16).collect() };
            if rules.root_squash {
                if id.uid == 0 {
                    id.uid = rules.anonuid;
                }
                if id.gid == 0 {
                    id.gid = rules.anongid;
                }
                // Group 0 often grants as much as root: it goes too (as knfsd does).
                id.groups.retain(|&g| g != 0);
            }
            Ok(id)
        }
    }
}

/// ACCESS3 bits (RFC 1813 3.3.4).
pub mod access {
    pub const READ: u32 = 0x01;
    pub const LOOKUP: u32 = 0x02;
    pub const MODIFY: u32 = 0x04;
    pub const EXTEND: u32 = 0x08;
    pub const DELETE: u32 = 0x10;
    pub const EXECUTE: u32 = 0x20;
}

/// The owner, group and mode of a file, as its permission check needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (0o7777).
    pub mode: u32,
    pub is_dir: bool,
}

/// The rwx bits (0..7) of `mode` that apply to `id`.
pub fn rwx(id: &Identity, f: &Owner) -> u32 {
    if id.uid == 0 {
        // Root may read and write anything; execute needs some x bit (dirs: always search).
        let x = if f.is_dir || f.mode & 0o111 != 0 { 1 } else { 0 };
        return 6 | x;
    }
    if id.uid == f.uid {
        (f.mode >> 6) & 7
    } else if id.gid == f.gid || id.groups.contains(&f.gid) {
        (f.mode >> 3) & 7
    } else {
        f.mode & 7
    }
}

/// The subset of `wanted` ACCESS bits `id` has on a file (RFC 1813 3.3.4), as the kernel's
/// permission checks would grant them; `read_only` exports grant no change.
pub fn allowed(id: &Identity, f: &Owner, wanted: u32, read_only: bool) -> u32 {
    let bits = rwx(id, f);
    let (r, w, x) = (bits & 4 != 0, bits & 2 != 0, bits & 1 != 0);
    let mut got = 0;
    if r {
        got |= access::READ;
    }
    if f.is_dir {
        if x {
            got |= access::LOOKUP;
        }
        if w && !read_only {
            got |= access::MODIFY | access::EXTEND | access::DELETE;
        }
    } else {
        if w && !read_only {
            got |= access::MODIFY | access::EXTEND;
        }
        if x {
            got |= access::EXECUTE;
        }
    }
    got & wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(uid: u32, gid: u32, gids: &[u32]) -> Credential<'_> {
        Credential::Sys { uid, gid, gids }
    }

    #[test]
    fn squash_rules() {
        let mut r = ExportRules::default();
        assert_eq!(identity(&r, &sys(0, 0, &[0, 5])).unwrap(), Identity { uid: 65534, gid: 65534, groups: vec![5] });
        assert_eq!(identity(&r, &sys(1000, 100, &[7])).unwrap(), Identity { uid: 1000, gid: 100, groups: vec![7] });
        assert_eq!(identity(&r, &Credential::None), Err(TooWeak));
        assert_eq!(identity(&r, &Credential::Other(6)), Err(TooWeak));
        r.root_squash = false;
        assert_eq!(identity(&r, &sys(0, 0, &[])).unwrap().uid, 0);
        r.all_squash = true;
        r.anonuid = 99;
        r.anongid = 98;
        assert_eq!(identity(&r, &sys(1000, 100, &[1])).unwrap(), Identity { uid: 99, gid: 98, groups: vec![] });
        r.auth_none = true;
        assert_eq!(identity(&r, &Credential::None).unwrap().uid, 99);
    }

    #[test]
    fn access_from_mode_bits() {
        use access::*;
        let all = READ | LOOKUP | MODIFY | EXTEND | DELETE | EXECUTE;
        let file = Owner { uid: 1000, gid: 100, mode: 0o640, is_dir: false };
        let owner = Identity { uid: 1000, gid: 1, groups: vec![] };
        let member = Identity { uid: 2000, gid: 1, groups: vec![100] };
        let other = Identity { uid: 3000, gid: 3, groups: vec![] };
        let root = Identity { uid: 0, gid: 0, groups: vec![] };
        assert_eq!(allowed(&owner, &file, all, false), READ | MODIFY | EXTEND);
        assert_eq!(allowed(&owner, &file, all, true), READ);
        assert_eq!(allowed(&member, &file, all, false), READ);
        assert_eq!(allowed(&other, &file, all, false), 0);
        assert_eq!(allowed(&root, &file, all, false), READ | MODIFY | EXTEND, "no x bit: no EXECUTE even for root");
        let dir = Owner { uid: 1000, gid: 100, mode: 0o755, is_dir: true };
        assert_eq!(allowed(&owner, &dir, all, false), READ | LOOKUP | MODIFY | EXTEND | DELETE);
        assert_eq!(allowed(&other, &dir, all, false), READ | LOOKUP);
        assert_eq!(allowed(&other, &dir, LOOKUP, false), LOOKUP, "only what was asked");
    }
}
