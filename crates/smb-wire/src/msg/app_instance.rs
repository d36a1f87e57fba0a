//! Application instance create contexts (MS-SMB2 2.2.13.2.13 SMB2_CREATE_APP_INSTANCE_ID,
//! 2.2.13.2.15 SMB2_CREATE_APP_INSTANCE_VERSION): a clustered application names its
//! opens with one id, so that when it fails over to another client the new instance's open
//! closes the old instance's (MS-SMB2 3.3.5.9.13).

use crate::reader::{PutLe, Reader};
use crate::WireError;

/// SMB2_CREATE_APP_INSTANCE_ID, the context name (a GUID in its wire form).
pub const APP_INSTANCE_ID: &[u8] = b"\x45\xBC\xA6\x6A\xEF\xA7\xF7\x4A\x90\x08\xFA\x46\x2E\x14\x4D\x74";
/// SMB2_CREATE_APP_INSTANCE_VERSION, the context name.
pub const APP_INSTANCE_VERSION: &[u8] = b"\xB9\x82\xD0\xB7\x3B\x56\x07\x4F\xA0\x7B\x52\x4A\x81\x16\xA0\x10";

/// StructureSize and data length of the id context: StructureSize, Reserved, AppInstanceId.
pub const ID_LEN: usize = 20;
/// StructureSize and data length of the version context: StructureSize, Reserved,
/// Padding, AppInstanceVersionHigh, AppInstanceVersionLow.
pub const VERSION_LEN: usize = 24;

/// The AppInstanceId of an SMB2_CREATE_APP_INSTANCE_ID context. The data must be exactly
/// the structure, with StructureSize 20 (as Windows checks it).
pub fn decode_id(data: &[u8]) -> Result<[u8; 16], WireError> {
    if data.len() != ID_LEN {
        return Err(WireError::Malformed("APP_INSTANCE_ID size"));
    }
    let mut r = Reader::new(data, 0);
    if usize::from(r.u16()?) != ID_LEN {
        return Err(WireError::Malformed("APP_INSTANCE_ID StructureSize"));
    }
    r.skip(2)?;
    r.array()
}

/// The SMB2_CREATE_APP_INSTANCE_ID context data for `id` (client side).
pub fn encode_id(id: [u8; 16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ID_LEN);
    out.put_u16(ID_LEN as u16);
    out.put_u16(0);
    out.extend_from_slice(&id);
    out
}

/// AppInstanceVersionHigh and AppInstanceVersionLow; ordered as the server compares them
/// (high first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AppInstanceVersion {
    pub high: u64,
    pub low: u64,
}

impl AppInstanceVersion {
    pub fn decode(data: &[u8]) -> Result<Self, WireError> {
        if data.len() != VERSION_LEN {
            return Err(WireError::Malformed("APP_INSTANCE_VERSION size"));
        }
        let mut r = Reader::new(data, 0);
        if usize::from(r.u16()?) != VERSION_LEN {
            return Err(WireError::Malformed("APP_INSTANCE_VERSION StructureSize"));
        }
        r.skip(6)?;
        Ok(AppInstanceVersion { high: r.u64()?, low: r.u64()? })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(VERSION_LEN);
        out.put_u16(VERSION_LEN as u16);
        out.put_u16(0);
        out.put_u32(0);
        out.put_u64(self.high);
        out.put_u64(self.low);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_round_trips_and_is_checked() {
        let id = [0x5a; 16];
        assert_eq!(decode_id(&encode_id(id)), Ok(id));
        assert!(decode_id(&encode_id(id)[..19]).is_err());
        let mut long = encode_id(id);
        long.push(0);
        assert!(decode_id(&long).is_err());
        let mut bad = encode_id(id);
        bad[0] = 24;
        assert!(decode_id(&bad).is_err());
    }

    #[test]
    fn version_round_trips_and_orders_high_first() {
        let v = AppInstanceVersion { high: 3, low: u64::MAX };
        assert_eq!(AppInstanceVersion::decode(&v.encode()), Ok(v));
        assert!(AppInstanceVersion::decode(&v.encode()[..23]).is_err());
        assert!(AppInstanceVersion { high: 4, low: 0 } > v);
        assert!(AppInstanceVersion { high: 3, low: 1 } < v);
    }

    #[test]
    fn names_are_the_spec_guids() {
        // 6aa6bc45-a7ef-4af7-9008-fa462e144d74 and b7d082b9-563b-4f07-a07b-524a8116a010.
        assert_eq!(APP_INSTANCE_ID.len(), 16);
        assert_eq!(&APP_INSTANCE_ID[..4], &0x6aa6_bc45u32.to_le_bytes());
        assert_eq!(&APP_INSTANCE_VERSION[..4], &0xb7d0_82b9u32.to_le_bytes());
    }
}
