//! SMB2/SMB3 cryptography for the Braid server.
//!
//! Everything here is sans-IO and allocation-light:
//!
//! * [`kdf`]: the SP800-108 counter-mode KDF used by SMB 3.x (MS-SMB2 3.1.4.2).
//! * [`PreauthHash`]: the SMB 3.1.1 pre-authentication integrity hash chain
//!   (MS-SMB2 3.3.5.4 / 3.3.5.5).
//! * [`SessionKeys`]: per-session signing, application and cipher keys
//!   (MS-SMB2 3.3.5.5.3).
//! * [`Signer`]: HMAC-SHA256 / AES-CMAC / AES-GMAC message signing
//!   (MS-SMB2 3.1.4.1).
//! * [`Sealer`] and [`parse_transform_header`]: SMB2 TRANSFORM_HEADER
//!   encryption and decryption in place (MS-SMB2 2.2.41, 3.1.4.3, 3.3.5.2.1.1).
//!
//! Dialects are plain `u16` values (`0x0202`, `0x0210`, `0x0300`, `0x0302`,
//! `0x0311`) so this crate does not depend on the wire crate.
//!
//! All primitives come from well-kept crates, chosen per algorithm by
//! measurement (docs/decisions.md): aws-lc-rs for AES-GCM, AES-GMAC and
//! AES-CMAC; RustCrypto for AES-CCM, HMAC-SHA256 and SHA-512. This crate only
//! frames SMB-specific inputs around them.

mod error;
mod keys;
mod signing;
mod transform;

pub use error::CryptoError;
pub use keys::{kdf, PreauthHash, SessionKeys};
pub use signing::{Signer, SigningAlgorithm, SIGNATURE_LEN, SIGNATURE_OFFSET, SMB2_HEADER_LEN};
pub use transform::{parse_transform_header, Cipher, Sealer, TransformHeader, TRANSFORM_FLAG_ENCRYPTED, TRANSFORM_HEADER_LEN, TRANSFORM_PROTOCOL_ID};

/// SMB 2.0.2 dialect revision (MS-SMB2 2.2.3).
pub const DIALECT_202: u16 = 0x0202;
/// SMB 2.1 dialect revision (MS-SMB2 2.2.3).
pub const DIALECT_210: u16 = 0x0210;
/// SMB 3.0 dialect revision (MS-SMB2 2.2.3).
pub const DIALECT_300: u16 = 0x0300;
/// SMB 3.0.2 dialect revision (MS-SMB2 2.2.3).
pub const DIALECT_302: u16 = 0x0302;
/// SMB 3.1.1 dialect revision (MS-SMB2 2.2.3).
pub const DIALECT_311: u16 = 0x0311;
