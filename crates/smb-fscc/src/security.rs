//! SIDs and a minimal self-relative security descriptor for QUERY_INFO
//! with InfoType SMB2_0_INFO_SECURITY (MS-DTYP 2.4.2, 2.4.5, 2.4.6).

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

/// MS-DTYP 2.4.6 SE_DACL_PRESENT
const SE_DACL_PRESENT: u16 = 0x0004;
/// MS-DTYP 2.4.6 SE_SELF_RELATIVE
const SE_SELF_RELATIVE: u16 = 0x8000;
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
        Sid {
            revision: 1,
            authority: [0, 0, 0, 0, 0, 1],
            sub_authorities: vec![0],
        }
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
        let sub_authorities = body[6..]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok((
            Sid {
                revision,
                authority,
                sub_authorities,
            },
            len,
        ))
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
        let auth: u64 = match auth_str
            .strip_prefix("0x")
            .or_else(|| auth_str.strip_prefix("0X"))
        {
            Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad)?,
            None => auth_str.parse().map_err(|_| bad)?,
        };
        if auth >= 1 << 48 {
            return Err(bad);
        }
        let mut authority = [0u8; 6];
        authority.copy_from_slice(&auth.to_be_bytes()[2..]);
        let sub_authorities = parts
            .map(|p| p.parse::<u32>().map_err(|_| bad))
            .collect::<Result<Vec<_>, _>>()?;
        if sub_authorities.len() > MAX_SUB_AUTHORITIES {
            return Err(bad);
        }
        Ok(Sid {
            revision,
            authority,
            sub_authorities,
        })
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
pub fn encode_security_descriptor(
    additional_information: u32,
    owner: &Sid,
    group: &Sid,
    out: &mut Vec<u8>,
) {
    let base = out.len();
    let want_dacl = additional_information & DACL_SECURITY_INFORMATION != 0;
    let mut control = SE_SELF_RELATIVE;
    if want_dacl {
        control |= SE_DACL_PRESENT;
    }
    put_u8(out, 1); // Revision
    put_u8(out, 0); // Sbz1
    put_u16(out, control);
    // OffsetOwner, OffsetGroup, OffsetSacl, OffsetDacl: patched below; 0
    // means absent.
    out.extend_from_slice(&[0u8; 16]);

    // Offsets are relative to the descriptor start; a descriptor is a few
    // hundred bytes at most, so u32 cannot overflow.
    let rel = |out: &Vec<u8>| (out.len() - base) as u32;
    if additional_information & OWNER_SECURITY_INFORMATION != 0 {
        let off = rel(out);
        patch_u32(out, base + 4, off);
        owner.encode(out);
    }
    if additional_information & GROUP_SECURITY_INFORMATION != 0 {
        let off = rel(out);
        patch_u32(out, base + 8, off);
        group.encode(out);
    }
    if want_dacl {
        let off = rel(out);
        patch_u32(out, base + 16, off);
        let everyone = Sid::everyone();
        let ace_size = 8 + everyone.encoded_len();
        // MS-DTYP 2.4.5 ACL header.
        put_u8(out, ACL_REVISION);
        put_u8(out, 0); // Sbz1
        put_u16(out, (8 + ace_size) as u16); // AclSize
        put_u16(out, 1); // AceCount
        put_u16(out, 0); // Sbz2
                         // MS-DTYP 2.4.4.2 ACCESS_ALLOWED_ACE.
        put_u8(out, ACCESS_ALLOWED_ACE_TYPE);
        put_u8(out, 0); // AceFlags: no inheritance
        put_u16(out, ace_size as u16);
        put_u32(out, FILE_ALL_ACCESS);
        everyone.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sid_string_round_trip() {
        for s in [
            "S-1-5-21-1004336348-1177238915-682003330-512",
            "S-1-1-0",
            "S-1-5-18",
            "S-1-0x123456789ABC-7",
        ] {
            let sid: Sid = s.parse().unwrap();
            assert_eq!(sid.to_string(), s);
            let mut b = Vec::new();
            sid.encode(&mut b);
            assert_eq!(b.len(), sid.encoded_len());
            assert_eq!(Sid::decode(&b), Ok((sid, b.len())));
        }
        let lower: Sid = "s-1-5-32-544".parse().unwrap();
        assert_eq!(lower.to_string(), "S-1-5-32-544");
        for bad in [
            "",
            "S",
            "S-1",
            "S-2-5",
            "X-1-5",
            "S-1-5-x",
            "S-1-281474976710656",
            "S-1-5-4294967296",
        ] {
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
        let mut want = vec![
            1, 0, 0, 0x80, 0, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        want.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 5, 0x12, 0, 0, 0]);
        assert_eq!(out, want);
        out.clear();
        encode_security_descriptor(SACL_SECURITY_INFORMATION, &owner, &group, &mut out);
        assert_eq!(
            out,
            [1, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        out.clear();
        encode_security_descriptor(DACL_SECURITY_INFORMATION, &owner, &group, &mut out);
        assert_eq!(out.len(), 20 + 28);
        assert_eq!(&out[2..4], &[4, 0x80]);
        assert_eq!(&out[16..20], &[20, 0, 0, 0]);
    }
}
