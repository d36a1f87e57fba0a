//! SIDs and self-relative security descriptors for QUERY_INFO and SET_INFO
//! with InfoType SMB2_0_INFO_SECURITY (MS-DTYP 2.4.2, 2.4.5, 2.4.6): a
//! bounds-checked parser, section-wise merging and re-encoding, and the
//! synthetic descriptor reported for files that have none stored.

use std::fmt;
use std::str::FromStr;

use crate::wire::{patch_u32, put_u16, put_u32, put_u8};
use crate::FsccError;

/// MS-DTYP 2.4.7 OWNER_SECURITY_INFORMATION
pub const OWNER_SECURITY_INFORMATION: u32 = 0x0000_0001;
/// MS-DTYP 2.4.7 GROUP_SECURITY_INFORMATION
pub const GROUP_SECURITY_INFORMATION: u32 = 0x0000_0002;
/// MS-DTYP 2.4.7 DACL_SECURITY_INFORMATION
pub const DACL_SECURITY_INFORMATION: u32 = 0x0000_0004;
/// MS-DTYP 2.4.7 SACL_SECURITY_INFORMATION
pub const SACL_SECURITY_INFORMATION: u32 = 0x0000_0008;
/// MS-SMB2 2.2.13.1.1 FILE_ALL_ACCESS (0x001F01FF)
pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

/// MS-DTYP 2.4.6 SE_OWNER_DEFAULTED
const SE_OWNER_DEFAULTED: u16 = 0x0001;
/// MS-DTYP 2.4.6 SE_GROUP_DEFAULTED
const SE_GROUP_DEFAULTED: u16 = 0x0002;
/// MS-DTYP 2.4.6 SE_DACL_PRESENT
pub const SE_DACL_PRESENT: u16 = 0x0004;
/// MS-DTYP 2.4.6 SE_SACL_PRESENT
pub const SE_SACL_PRESENT: u16 = 0x0010;
/// MS-DTYP 2.4.6 SE_SELF_RELATIVE
const SE_SELF_RELATIVE: u16 = 0x8000;
/// Control bits describing the DACL: PRESENT, DEFAULTED, AUTO_INHERIT_REQ,
/// AUTO_INHERITED, PROTECTED (MS-DTYP 2.4.6).
const DACL_CONTROL: u16 = 0x0004 | 0x0008 | 0x0100 | 0x0400 | 0x1000;
/// Control bits describing the SACL: PRESENT, DEFAULTED, AUTO_INHERIT_REQ,
/// AUTO_INHERITED, PROTECTED (MS-DTYP 2.4.6).
const SACL_CONTROL: u16 = 0x0010 | 0x0020 | 0x0200 | 0x0800 | 0x2000;
/// Length of the fixed SECURITY_DESCRIPTOR header (MS-DTYP 2.4.6).
const SD_HEADER_LEN: usize = 20;
/// Length of the ACL header (MS-DTYP 2.4.5).
const ACL_HEADER_LEN: usize = 8;
/// Largest descriptor accepted. Two ACLs of at most 64 KiB each (AclSize is a
/// u16) plus two SIDs fit; anything larger cannot be valid.
pub const MAX_SECURITY_DESCRIPTOR_LEN: usize = 2 * 0xFFFF + 2 * 68 + SD_HEADER_LEN;
/// MS-DTYP 2.4.5 ACL_REVISION
const ACL_REVISION: u8 = 2;
/// MS-DTYP 2.4.4.1 ACCESS_ALLOWED_ACE_TYPE
const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
/// MS-DTYP 2.4.2 limit on SubAuthorityCount.
const MAX_SUB_AUTHORITIES: usize = 15;

/// MS-DTYP 2.4.2 SID: revision, 48-bit big-endian identifier authority and
/// up to 15 sub-authorities.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sid {
    /// Revision, always 1.
    pub revision: u8,
    /// IdentifierAuthority, big-endian (5 = NT AUTHORITY).
    pub authority: [u8; 6],
    /// SubAuthority values (RIDs), at most 15.
    pub sub_authorities: Vec<u32>,
}

impl Sid {
    /// MS-DTYP 2.4.2.4 Everyone, S-1-1-0.
    pub fn everyone() -> Sid {
        Sid { revision: 1, authority: [0, 0, 0, 0, 0, 1], sub_authorities: vec![0] }
    }

    /// Length of the binary form (MS-DTYP 2.4.2.2): 8 + 4 per sub-authority.
    pub fn encoded_len(&self) -> usize {
        8 + 4 * self.sub_authorities.len().min(MAX_SUB_AUTHORITIES)
    }

    /// Appends the binary form (MS-DTYP 2.4.2.2). More than 15
    /// sub-authorities cannot be represented; extras are dropped (parsing
    /// never produces such a SID).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let subs = &self.sub_authorities[..self.sub_authorities.len().min(MAX_SUB_AUTHORITIES)];
        put_u8(out, self.revision);
        put_u8(out, subs.len() as u8);
        out.extend_from_slice(&self.authority);
        for s in subs {
            put_u32(out, *s);
        }
    }

    /// Decodes a binary SID (MS-DTYP 2.4.2.2) from the start of `buf`,
    /// returning it and the number of bytes used.
    pub fn decode(buf: &[u8]) -> Result<(Sid, usize), FsccError> {
        let bad = FsccError::InvalidParameter;
        let revision = *buf.first().ok_or(bad)?;
        let count = usize::from(*buf.get(1).ok_or(bad)?);
        if revision != 1 || count > MAX_SUB_AUTHORITIES {
            return Err(bad);
        }
        let len = 8 + 4 * count;
        let body = buf.get(2..len).ok_or(bad)?;
        let mut authority = [0u8; 6];
        authority.copy_from_slice(&body[..6]);
        let sub_authorities = body[6..].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok((Sid { revision, authority, sub_authorities }, len))
    }
}

impl FromStr for Sid {
    type Err = FsccError;

    /// Parses the MS-DTYP 2.4.2.1 string form "S-1-5-21-...": decimal
    /// authority (or 0x-prefixed hex, as used for values >= 2^32).
    fn from_str(s: &str) -> Result<Sid, FsccError> {
        let bad = FsccError::InvalidParameter;
        let mut parts = s.split('-');
        if !parts.next().is_some_and(|p| p.eq_ignore_ascii_case("S")) {
            return Err(bad);
        }
        let revision: u8 = parts.next().and_then(|p| p.parse().ok()).ok_or(bad)?;
        if revision != 1 {
            return Err(bad);
        }
        let auth_str = parts.next().ok_or(bad)?;
        let auth: u64 = match auth_str.strip_prefix("0x").or_else(|| auth_str.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad)?,
            None => auth_str.parse().map_err(|_| bad)?,
        };
        if auth >= 1 << 48 {
            return Err(bad);
        }
        let mut authority = [0u8; 6];
        authority.copy_from_slice(&auth.to_be_bytes()[2..]);
        let sub_authorities = parts.map(|p| p.parse::<u32>().map_err(|_| bad)).collect::<Result<Vec<_>, _>>()?;
        if sub_authorities.len() > MAX_SUB_AUTHORITIES {
            return Err(bad);
        }
        Ok(Sid { revision, authority, sub_authorities })
    }
}

impl fmt::Display for Sid {
    /// MS-DTYP 2.4.2.1 string form; authorities >= 2^32 are printed in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut a = [0u8; 8];
        a[2..].copy_from_slice(&self.authority);
        let auth = u64::from_be_bytes(a);
        write!(f, "S-{}-", self.revision)?;
        if auth >> 32 == 0 {
            write!(f, "{auth}")?;
        } else {
            write!(f, "0x{auth:012X}")?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

/// MS-DTYP 2.4.6 self-relative SECURITY_DESCRIPTOR with the parts selected by
/// `additional_information` (MS-SMB2 2.2.37): OWNER 0x1 and GROUP 0x2 give
/// the SIDs, DACL 0x4 a DACL with one ACCESS_ALLOWED ACE granting Everyone
/// FILE_ALL_ACCESS, SACL 0x8 is answered as absent. Layout: 20-byte header,
/// then owner, group, DACL in that order.
pub fn encode_security_descriptor(additional_information: u32, owner: &Sid, group: &Sid, out: &mut Vec<u8>) {
    SecurityDescriptor::synthetic(owner.clone(), group.clone()).encode(additional_information, out);
}

/// A security descriptor (MS-DTYP 2.4.6) split into its sections. ACLs are
/// kept as their validated binary form: the server stores and returns them
/// but never interprets them (access checks do not consult them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityDescriptor {
    /// Control flags (SE_*); SE_SELF_RELATIVE is implied and set on encoding.
    pub control: u16,
    /// Owner SID, if present.
    pub owner: Option<Sid>,
    /// Primary group SID, if present.
    pub group: Option<Sid>,
    /// SACL bytes when SE_SACL_PRESENT is set and the SACL is not NULL.
    pub sacl: Option<Vec<u8>>,
    /// DACL bytes when SE_DACL_PRESENT is set and the DACL is not NULL (a NULL
    /// DACL, granting everyone everything, is SE_DACL_PRESENT with `None`).
    pub dacl: Option<Vec<u8>>,
}

/// Reads a little-endian u16 at `at`.
fn get_u16(b: &[u8], at: usize) -> Result<u16, FsccError> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]])).ok_or(FsccError::InvalidParameter)
}

/// Reads a little-endian u32 at `at`.
fn get_u32(b: &[u8], at: usize) -> Result<u32, FsccError> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]])).ok_or(FsccError::InvalidParameter)
}

/// Validates the ACL at the start of `b` (MS-DTYP 2.4.5, 2.4.4.1) and returns
/// its bytes (AclSize of them). Every ACE must lie inside the ACL; ACEs of the
/// plain allowed/denied/audit/alarm types must carry a well-formed SID.
fn parse_acl(b: &[u8]) -> Result<&[u8], FsccError> {
    let bad = FsccError::InvalidParameter;
    let revision = *b.first().ok_or(bad)?;
    // ACL_REVISION (2) and ACL_REVISION_DS (4); 3 is accepted by Windows too.
    if !(2..=4).contains(&revision) {
        return Err(bad);
    }
    let size = usize::from(get_u16(b, 2)?);
    let count = usize::from(get_u16(b, 4)?);
    if size < ACL_HEADER_LEN {
        return Err(bad);
    }
    let acl = b.get(..size).ok_or(bad)?;
    let mut pos = ACL_HEADER_LEN;
    // The count is bounded by the size: every ACE takes at least 4 bytes.
    for _ in 0..count {
        let ace_type = *acl.get(pos).ok_or(bad)?;
        let ace_size = usize::from(get_u16(acl, pos + 2)?);
        if ace_size < 4 {
            return Err(bad);
        }
        let ace = acl.get(pos..pos + ace_size).ok_or(bad)?;
        // ACCESS_ALLOWED, ACCESS_DENIED, SYSTEM_AUDIT, SYSTEM_ALARM: header,
        // mask, then the SID, which must fit in the ACE.
        if ace_type <= 3 {
            let (_, sid_len) = Sid::decode(ace.get(8..).ok_or(bad)?)?;
            if 8 + sid_len > ace_size {
                return Err(bad);
            }
        }
        pos += ace_size;
    }
    Ok(acl)
}

impl SecurityDescriptor {
    /// The descriptor reported for files without a stored one: the given
    /// owner and group, and a DACL granting Everyone FILE_ALL_ACCESS.
    pub fn synthetic(owner: Sid, group: Sid) -> SecurityDescriptor {
        let everyone = Sid::everyone();
        let ace_size = 8 + everyone.encoded_len();
        let mut acl = Vec::with_capacity(ACL_HEADER_LEN + ace_size);
        // MS-DTYP 2.4.5 ACL header; the sizes are a few dozen bytes.
        put_u8(&mut acl, ACL_REVISION);
        put_u8(&mut acl, 0); // Sbz1
        put_u16(&mut acl, (ACL_HEADER_LEN + ace_size) as u16); // AclSize
        put_u16(&mut acl, 1); // AceCount
        put_u16(&mut acl, 0); // Sbz2
                              // MS-DTYP 2.4.4.2 ACCESS_ALLOWED_ACE.
        put_u8(&mut acl, ACCESS_ALLOWED_ACE_TYPE);
        put_u8(&mut acl, 0); // AceFlags: no inheritance
        put_u16(&mut acl, ace_size as u16);
        put_u32(&mut acl, FILE_ALL_ACCESS);
        everyone.encode(&mut acl);
        SecurityDescriptor { control: SE_DACL_PRESENT, owner: Some(owner), group: Some(group), sacl: None, dacl: Some(acl) }
    }

    /// Parses a self-relative descriptor, checking every offset and length.
    /// Bytes after the parts the offsets point at are ignored.
    pub fn parse(b: &[u8]) -> Result<SecurityDescriptor, FsccError> {
        let bad = FsccError::InvalidParameter;
        if b.len() < SD_HEADER_LEN || b.len() > MAX_SECURITY_DESCRIPTOR_LEN || b[0] != 1 {
            return Err(bad);
        }
        let control = get_u16(b, 2)?;
        let offset = |at: usize| -> Result<Option<usize>, FsccError> {
            let off = get_u32(b, at)? as usize;
            match off {
                0 => Ok(None),
                // An offset into the header itself is malformed.
                o if o < SD_HEADER_LEN || o >= b.len() => Err(bad),
                o => Ok(Some(o)),
            }
        };
        let sid_at = |at: usize| -> Result<Option<Sid>, FsccError> { offset(at)?.map(|o| Sid::decode(&b[o..]).map(|(sid, _)| sid)).transpose() };
        let owner = sid_at(4)?;
        let group = sid_at(8)?;
        // An ACL offset counts only with its PRESENT flag; PRESENT with no
        // offset is a NULL ACL.
        let acl_at = |at: usize, flag: u16| -> Result<Option<Vec<u8>>, FsccError> {
            if control & flag == 0 {
                return Ok(None);
            }
            offset(at)?.map(|o| parse_acl(&b[o..]).map(<[u8]>::to_vec)).transpose()
        };
        let sacl = acl_at(12, SE_SACL_PRESENT)?;
        let dacl = acl_at(16, SE_DACL_PRESENT)?;
        Ok(SecurityDescriptor { control: control & !SE_SELF_RELATIVE, owner, group, sacl, dacl })
    }

    /// Replaces the sections selected by `sections` (OWNER, GROUP, DACL and
    /// SACL_SECURITY_INFORMATION bits) with those of `new`, keeping the
    /// others, control flags included.
    pub fn merge(&mut self, new: &SecurityDescriptor, sections: u32) {
        let mut take = |bits: u16| self.control = (self.control & !bits) | (new.control & bits);
        if sections & OWNER_SECURITY_INFORMATION != 0 {
            take(SE_OWNER_DEFAULTED);
            self.owner = new.owner.clone();
        }
        if sections & GROUP_SECURITY_INFORMATION != 0 {
            take(SE_GROUP_DEFAULTED);
            self.group = new.group.clone();
        }
        if sections & DACL_SECURITY_INFORMATION != 0 {
            take(DACL_CONTROL);
            self.dacl = new.dacl.clone();
        }
        if sections & SACL_SECURITY_INFORMATION != 0 {
            take(SACL_CONTROL);
            self.sacl = new.sacl.clone();
        }
    }

    /// The sections `new` actually carries (owner and group SIDs that are
    /// there, ACLs whose PRESENT flag is set), as SECURITY_INFORMATION bits:
    /// what a create-time descriptor contributes over the defaults.
    pub fn present_sections(&self) -> u32 {
        let mut s = 0;
        if self.owner.is_some() {
            s |= OWNER_SECURITY_INFORMATION;
        }
        if self.group.is_some() {
            s |= GROUP_SECURITY_INFORMATION;
        }
        if self.control & SE_DACL_PRESENT != 0 {
            s |= DACL_SECURITY_INFORMATION;
        }
        if self.control & SE_SACL_PRESENT != 0 {
            s |= SACL_SECURITY_INFORMATION;
        }
        s
    }

    /// Appends the self-relative form holding only the sections selected by
    /// `sections`; the others are absent and their control flags cleared.
    /// Layout: header, owner, group, SACL, DACL.
    pub fn encode(&self, sections: u32, out: &mut Vec<u8>) {
        let base = out.len();
        let mut control = self.control | SE_SELF_RELATIVE;
        if sections & OWNER_SECURITY_INFORMATION == 0 {
            control &= !SE_OWNER_DEFAULTED;
        }
        if sections & GROUP_SECURITY_INFORMATION == 0 {
            control &= !SE_GROUP_DEFAULTED;
        }
        if sections & DACL_SECURITY_INFORMATION == 0 {
            control &= !DACL_CONTROL;
        }
        if sections & SACL_SECURITY_INFORMATION == 0 {
            control &= !SACL_CONTROL;
        }
        put_u8(out, 1); // Revision
        put_u8(out, 0); // Sbz1
        put_u16(out, control);
        // OffsetOwner, OffsetGroup, OffsetSacl, OffsetDacl: patched below; 0
        // means absent.
        out.extend_from_slice(&[0u8; 16]);
        // Parsed descriptors are bounded by MAX_SECURITY_DESCRIPTOR_LEN, so
        // offsets fit in u32.
        let rel = |out: &Vec<u8>| u32::try_from(out.len() - base).unwrap_or(u32::MAX);
        if sections & OWNER_SECURITY_INFORMATION != 0 {
            if let Some(sid) = &self.owner {
                let off = rel(out);
                patch_u32(out, base + 4, off);
                sid.encode(out);
            }
        }
        if sections & GROUP_SECURITY_INFORMATION != 0 {
            if let Some(sid) = &self.group {
                let off = rel(out);
                patch_u32(out, base + 8, off);
                sid.encode(out);
            }
        }
        if sections & SACL_SECURITY_INFORMATION != 0 && control & SE_SACL_PRESENT != 0 {
            if let Some(acl) = &self.sacl {
                let off = rel(out);
                patch_u32(out, base + 12, off);
                out.extend_from_slice(acl);
            }
        }
        if sections & DACL_SECURITY_INFORMATION != 0 && control & SE_DACL_PRESENT != 0 {
            if let Some(acl) = &self.dacl {
                let off = rel(out);
                patch_u32(out, base + 16, off);
                out.extend_from_slice(acl);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sid_string_round_trip() {
        for s in ["S-1-5-21-1004336348-1177238915-682003330-512", "S-1-1-0", "S-1-5-18", "S-1-0x123456789ABC-7"] {
            let sid: Sid = s.parse().unwrap();
            assert_eq!(sid.to_string(), s);
            let mut b = Vec::new();
            sid.encode(&mut b);
            assert_eq!(b.len(), sid.encoded_len());
            assert_eq!(Sid::decode(&b), Ok((sid, b.len())));
        }
        let lower: Sid = "s-1-5-32-544".parse().unwrap();
        assert_eq!(lower.to_string(), "S-1-5-32-544");
        for bad in ["", "S", "S-1", "S-2-5", "X-1-5", "S-1-5-x", "S-1-281474976710656", "S-1-5-4294967296"] {
            assert!(bad.parse::<Sid>().is_err(), "{bad}");
        }
        let too_many = format!("S-1-5{}", "-1".repeat(16));
        assert!(too_many.parse::<Sid>().is_err());
        assert!(Sid::decode(&[1, 2, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0]).is_err());
        assert!(Sid::decode(&[1, 16]).is_err());
    }

    #[test]
    fn sid_binary() {
        let mut b = Vec::new();
        "S-1-5-32-544".parse::<Sid>().unwrap().encode(&mut b);
        assert_eq!(b, [1, 2, 0, 0, 0, 0, 0, 5, 0x20, 0, 0, 0, 0x20, 2, 0, 0]);
    }

    #[test]
    fn full_descriptor_matches_hand_computed() {
        let owner: Sid = "S-1-5-32-544".parse().unwrap();
        let group: Sid = "S-1-5-18".parse().unwrap();
        let mut out = vec![0xEE]; // pre-existing bytes must not shift offsets
        encode_security_descriptor(0xF, &owner, &group, &mut out);
        #[rustfmt::skip]
        let want: &[u8] = &[
            0xEE,
            // Header: revision 1, control SELF_RELATIVE|DACL_PRESENT.
            0x01, 0x00, 0x04, 0x80,
            0x14, 0, 0, 0, // OffsetOwner 20
            0x24, 0, 0, 0, // OffsetGroup 36
            0, 0, 0, 0, // OffsetSacl: absent
            0x30, 0, 0, 0, // OffsetDacl 48
            // Owner S-1-5-32-544.
            1, 2, 0, 0, 0, 0, 0, 5, 0x20, 0, 0, 0, 0x20, 2, 0, 0,
            // Group S-1-5-18.
            1, 1, 0, 0, 0, 0, 0, 5, 0x12, 0, 0, 0,
            // ACL: revision 2, size 28, 1 ACE.
            2, 0, 0x1C, 0, 1, 0, 0, 0,
            // ACCESS_ALLOWED, flags 0, size 20, FILE_ALL_ACCESS, S-1-1-0.
            0, 0, 0x14, 0, 0xFF, 0x01, 0x1F, 0x00,
            1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        assert_eq!(out, want);
    }

    #[test]
    fn partial_descriptors() {
        let owner: Sid = "S-1-5-32-544".parse().unwrap();
        let group: Sid = "S-1-5-18".parse().unwrap();
        let mut out = Vec::new();
        encode_security_descriptor(GROUP_SECURITY_INFORMATION, &owner, &group, &mut out);
        let mut want = vec![1, 0, 0, 0x80, 0, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        want.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 5, 0x12, 0, 0, 0]);
        assert_eq!(out, want);
        out.clear();
        encode_security_descriptor(SACL_SECURITY_INFORMATION, &owner, &group, &mut out);
        assert_eq!(out, [1, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.clear();
        encode_security_descriptor(DACL_SECURITY_INFORMATION, &owner, &group, &mut out);
        assert_eq!(out.len(), 20 + 28);
        assert_eq!(&out[2..4], &[4, 0x80]);
        assert_eq!(&out[16..20], &[20, 0, 0, 0]);
    }

    fn sample() -> Vec<u8> {
        let owner: Sid = "S-1-5-32-544".parse().unwrap();
        let group: Sid = "S-1-5-18".parse().unwrap();
        let mut out = Vec::new();
        encode_security_descriptor(0xF, &owner, &group, &mut out);
        out
    }

    #[test]
    fn parse_round_trip() {
        let b = sample();
        let sd = SecurityDescriptor::parse(&b).unwrap();
        assert_eq!(sd.owner.as_ref().unwrap().to_string(), "S-1-5-32-544");
        assert_eq!(sd.group.as_ref().unwrap().to_string(), "S-1-5-18");
        assert_eq!(sd.control, SE_DACL_PRESENT);
        assert!(sd.sacl.is_none());
        let mut again = Vec::new();
        sd.encode(0xF, &mut again);
        assert_eq!(again, b);
        // Only the DACL: owner and group absent, DACL flag kept.
        again.clear();
        sd.encode(DACL_SECURITY_INFORMATION, &mut again);
        let d = SecurityDescriptor::parse(&again).unwrap();
        assert_eq!((d.owner, d.group), (None, None));
        assert_eq!(d.dacl, sd.dacl);
        // Nothing selected: a bare header.
        again.clear();
        sd.encode(0, &mut again);
        assert_eq!(again, [1, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn null_and_empty_dacl() {
        // DACL_PRESENT without an offset: a NULL DACL, kept as such.
        let null = [1, 0, 0x04, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let sd = SecurityDescriptor::parse(&null).unwrap();
        assert_eq!(sd.control & SE_DACL_PRESENT, SE_DACL_PRESENT);
        assert!(sd.dacl.is_none());
        assert_eq!(sd.present_sections(), DACL_SECURITY_INFORMATION);
        let mut out = Vec::new();
        sd.encode(0x7, &mut out);
        assert_eq!(out, null);
        // An empty (zero-ACE) DACL.
        let mut empty = null.to_vec();
        empty[16] = 20;
        empty.extend_from_slice(&[2, 0, 8, 0, 0, 0, 0, 0]);
        let sd = SecurityDescriptor::parse(&empty).unwrap();
        assert_eq!(sd.dacl.as_deref(), Some(&[2, 0, 8, 0, 0, 0, 0, 0][..]));
        // Without DACL_PRESENT the offset is ignored.
        empty[2] = 0;
        assert_eq!(SecurityDescriptor::parse(&empty).unwrap().dacl, None);
    }

    #[test]
    fn merge_keeps_unselected_sections() {
        let mut stored = SecurityDescriptor::parse(&sample()).unwrap();
        let users: Sid = "S-1-5-32-545".parse().unwrap();
        let mut new = SecurityDescriptor::synthetic(users.clone(), users.clone());
        new.control = SE_DACL_PRESENT | 0x1000; // protected
        new.dacl = None; // NULL DACL
        stored.merge(&new, DACL_SECURITY_INFORMATION);
        assert_eq!(stored.owner.as_ref().unwrap().to_string(), "S-1-5-32-544");
        assert_eq!(stored.group.as_ref().unwrap().to_string(), "S-1-5-18");
        assert_eq!(stored.dacl, None);
        assert_eq!(stored.control, SE_DACL_PRESENT | 0x1000);
        stored.merge(&new, OWNER_SECURITY_INFORMATION);
        assert_eq!(stored.owner, Some(users));
    }

    #[test]
    fn malformed_descriptors_are_rejected() {
        let good = sample();
        // Every truncation that cuts into a referenced part fails, none panics.
        for n in 0..good.len() {
            assert!(SecurityDescriptor::parse(&good[..n]).is_err(), "len {n}");
        }
        let corrupt = |at: usize, v: u8| {
            let mut b = good.clone();
            b[at] = v;
            SecurityDescriptor::parse(&b)
        };
        assert!(corrupt(0, 2).is_err()); // revision
        assert!(corrupt(4, 4).is_err()); // owner offset into the header
        assert!(corrupt(4, 0xF0).is_err()); // owner offset past the end
        assert!(corrupt(5, 0xFF).is_err()); // huge offset
        assert!(corrupt(20 + 1, 16).is_err()); // owner SID with 16 sub-authorities
        assert!(corrupt(48, 9).is_err()); // ACL revision
        assert!(corrupt(48 + 2, 4).is_err()); // AclSize below the header
        assert!(corrupt(48 + 2, 0xF0).is_err()); // AclSize past the end
        assert!(corrupt(48 + 4, 2).is_err()); // more ACEs than fit
        assert!(corrupt(56 + 2, 2).is_err()); // ACE size below its header
        assert!(corrupt(56 + 2, 0x40).is_err()); // ACE past the ACL
        assert!(corrupt(56 + 9, 7).is_err()); // ACE SID larger than the ACE
        assert!(SecurityDescriptor::parse(&vec![1; MAX_SECURITY_DESCRIPTOR_LEN + 1]).is_err());
        // Garbage of every short length never panics.
        for n in 0..64 {
            let _ = SecurityDescriptor::parse(&vec![0xFF; n]);
            let _ = SecurityDescriptor::parse(&[&[1, 0, 0x14, 0x80][..], &vec![0x14; n]].concat());
        }
    }
}
