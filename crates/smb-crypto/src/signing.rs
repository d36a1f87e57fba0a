//! SMB2 message signing (MS-SMB2 3.1.4.1, 3.1.5.1).

use std::sync::Arc;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use aws_lc_rs::cmac;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Size of the SMB2 sync/async header (MS-SMB2 2.2.1).
pub const SMB2_HEADER_LEN: usize = 64;
/// Offset of the Signature field in the SMB2 header (MS-SMB2 2.2.1).
pub const SIGNATURE_OFFSET: usize = 48;
/// Length of the Signature field (MS-SMB2 2.2.1).
pub const SIGNATURE_LEN: usize = 16;

/// SMB2_FLAGS_SERVER_TO_REDIR in the header Flags (MS-SMB2 2.2.1.2).
const FLAGS_SERVER_TO_REDIR: u32 = 0x0000_0001;
/// SMB2 CANCEL command code (MS-SMB2 2.2.1.2).
const COMMAND_CANCEL: u16 = 0x000C;

/// Message signing algorithm (MS-SMB2 2.2.3.1.7, SMB2_SIGNING_CAPABILITIES).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SigningAlgorithm {
    /// HMAC-SHA256 truncated to 16 bytes; dialects 2.0.2 and 2.1.
    HmacSha256,
    /// AES-128-CMAC (RFC 4493); default for 3.x.
    AesCmac,
    /// AES-128-GMAC; 3.1.1 when negotiated through the signing context.
    AesGmac,
}

impl SigningAlgorithm {
    /// Maps a SigningAlgorithmId to an algorithm: 0 = HMAC-SHA256,
    /// 1 = AES-CMAC, 2 = AES-GMAC (MS-SMB2 2.2.3.1.7).
    pub fn from_id(id: u16) -> Option<Self> {
        match id {
            0 => Some(Self::HmacSha256),
            1 => Some(Self::AesCmac),
            2 => Some(Self::AesGmac),
            _ => None,
        }
    }

    /// The SigningAlgorithmId on the wire (MS-SMB2 2.2.3.1.7).
    pub fn id(self) -> u16 {
        match self {
            Self::HmacSha256 => 0,
            Self::AesCmac => 1,
            Self::AesGmac => 2,
        }
    }

    /// The algorithm a dialect uses when no signing context selected one
    /// (MS-SMB2 3.1.4.1): HMAC-SHA256 below 3.0, AES-CMAC from 3.0 on.
    pub fn default_for_dialect(dialect: u16) -> Self {
        if dialect < crate::DIALECT_300 {
            Self::HmacSha256
        } else {
            Self::AesCmac
        }
    }
}

/// Prepared keyed state, expanded once per key.
///
/// Backends (measured, see docs/decisions.md): HMAC-SHA256 from RustCrypto
/// (cloned onto the stack per message); AES-CMAC and AES-GMAC from aws-lc-rs,
/// whose AES-NI/PCLMUL/VAES assembly is several times faster than the
/// RustCrypto crates. The GCM key is shared (`Arc`) because aws-lc-rs keys
/// are not `Clone`.
#[derive(Clone)]
enum SignerState {
    Hmac(Hmac<Sha256>),
    Cmac(cmac::Key),
    Gmac(Arc<LessSafeKey>),
    /// aws-lc refused the key (only on allocation failure: a 16-byte key is
    /// always valid). Every signature then fails to compute and to verify.
    Unavailable,
}

/// A message-signing key (MS-SMB2 3.1.4.1).
///
/// The key schedule is expanded once in [`Signer::new`]; [`Signer::sign`]
/// and [`Signer::verify`] never copy the message (AES-CMAC takes one small
/// context allocation inside aws-lc per message).
#[derive(Clone)]
pub struct Signer {
    algo: SigningAlgorithm,
    state: SignerState,
}

impl core::fmt::Debug for Signer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Key state is secret: only the algorithm is shown.
        f.debug_struct("Signer").field("algo", &self.algo).finish_non_exhaustive()
    }
}

impl Signer {
    /// Prepares a signing key (MS-SMB2 3.1.4.1).
    ///
    /// HMAC-SHA256 takes the key as is. The AES algorithms use the first
    /// 16 bytes, right-padded with zeroes if shorter, which matches how
    /// MS-SMB2 normalizes Session.SessionKey; 3.x signing keys from
    /// [`crate::SessionKeys`] are always exactly 16 bytes.
    pub fn new(algo: SigningAlgorithm, key: &[u8]) -> Self {
        let mut k16 = [0u8; 16];
        let n = key.len().min(16);
        k16[..n].copy_from_slice(&key[..n]);
        let state = match algo {
            SigningAlgorithm::HmacSha256 => {
                // HMAC accepts any key length; the Err arm is unreachable but
                // handled without a panic.
                let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap_or_else(|_| <Hmac<Sha256> as KeyInit>::new(&Default::default()));
                SignerState::Hmac(mac)
            }
            // A 16-byte key is always valid for AES-128; aws-lc only fails
            // on allocation failure, handled without a panic.
            SigningAlgorithm::AesCmac => cmac::Key::new(cmac::AES_128, &k16).map_or(SignerState::Unavailable, SignerState::Cmac),
            SigningAlgorithm::AesGmac => {
                UnboundKey::new(&AES_128_GCM, &k16).map_or(SignerState::Unavailable, |key| SignerState::Gmac(Arc::new(LessSafeKey::new(key))))
            }
        };
        Signer { algo, state }
    }

    /// The algorithm this key signs with.
    pub fn algorithm(&self) -> SigningAlgorithm {
        self.algo
    }

    /// Signs one whole SMB2 message in place (MS-SMB2 3.1.4.1): zeroes the
    /// Signature field, computes the MAC over the message and stores it at
    /// bytes 48..64. The caller has already set SMB2_FLAGS_SIGNED.
    ///
    /// Messages shorter than the 64-byte header are left untouched.
    pub fn sign(&self, msg: &mut [u8]) {
        if msg.len() < SMB2_HEADER_LEN {
            return;
        }
        msg[SIGNATURE_OFFSET..SMB2_HEADER_LEN].fill(0);
        // On a backend failure the field stays zero, which the peer rejects.
        if let Some(sig) = self.compute(msg) {
            msg[SIGNATURE_OFFSET..SMB2_HEADER_LEN].copy_from_slice(&sig);
        }
    }

    /// Verifies the signature of one whole SMB2 message in constant time
    /// (MS-SMB2 3.3.5.2.4). `msg` is unchanged on return. Returns false for
    /// messages shorter than the 64-byte header.
    pub fn verify(&self, msg: &mut [u8]) -> bool {
        if msg.len() < SMB2_HEADER_LEN {
            return false;
        }
        let mut received = [0u8; SIGNATURE_LEN];
        received.copy_from_slice(&msg[SIGNATURE_OFFSET..SMB2_HEADER_LEN]);
        // The MAC is defined over the message with a zeroed signature field;
        // zero it in place rather than copying a possibly large message.
        msg[SIGNATURE_OFFSET..SMB2_HEADER_LEN].fill(0);
        let expected = self.compute(msg);
        msg[SIGNATURE_OFFSET..SMB2_HEADER_LEN].copy_from_slice(&received);
        // A backend failure never verifies (not even an all-zero signature).
        expected.is_some_and(|e| e.ct_eq(&received).into())
    }

    /// MAC over `msg` (whose signature field the caller has zeroed), or None
    /// if the backend failed.
    fn compute(&self, msg: &[u8]) -> Option<[u8; SIGNATURE_LEN]> {
        let mut out = [0u8; SIGNATURE_LEN];
        match &self.state {
            SignerState::Hmac(mac) => {
                let mut m = mac.clone();
                m.update(msg);
                // HMAC-SHA256 output is 32 bytes; SMB2 keeps the first 16.
                out.copy_from_slice(&m.finalize().into_bytes()[..SIGNATURE_LEN]);
            }
            SignerState::Cmac(key) => {
                // Fails only on allocation failure inside aws-lc.
                let tag = cmac::sign(key, msg).ok()?;
                out.copy_from_slice(tag.as_ref().get(..SIGNATURE_LEN)?);
            }
            SignerState::Gmac(gcm) => {
                // GMAC = GCM with empty plaintext and the message as AAD. The
                // nonce is unique per key by construction (MessageId and role
                // bits, MS-SMB2 3.1.4.1). Sealing an empty buffer only fails
                // on absurd AAD sizes, which no SMB message reaches.
                let nonce = Nonce::assume_unique_for_key(gmac_nonce(msg));
                let tag = gcm.seal_in_place_separate_tag(nonce, Aad::from(msg), &mut []).ok()?;
                out.copy_from_slice(tag.as_ref().get(..SIGNATURE_LEN)?);
            }
            SignerState::Unavailable => return None,
        }
        Some(out)
    }
}

/// AES-GMAC nonce (MS-SMB2 3.1.4.1): MessageId (header bytes 24..32) then a
/// 32-bit little-endian field whose bit 0 marks a server-to-client message
/// and bit 1 a CANCEL request. Caller guarantees `msg.len() >= 64`.
fn gmac_nonce(msg: &[u8]) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&msg[24..32]);
    let flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]);
    let command = u16::from_le_bytes([msg[12], msg[13]]);
    let mut role = 0u32;
    if flags & FLAGS_SERVER_TO_REDIR != 0 {
        role |= 1;
    }
    if command == COMMAND_CANCEL {
        role |= 2;
    }
    nonce[8..].copy_from_slice(&role.to_le_bytes());
    nonce
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// RFC 4493 section 4 examples through the CMAC signer state.
    #[test]
    fn rfc4493_cmac_vectors() {
        let s = Signer::new(SigningAlgorithm::AesCmac, &unhex("2b7e151628aed2a6abf7158809cf4f3c"));
        let m = unhex(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51
             30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
        );
        let cases: [(usize, &str); 4] = [
            (0, "bb1d6929e95937287fa37d129b756746"),
            (16, "070a16b46b4d4144f79bdd9dd04a287c"),
            (40, "dfa66747de9ae63030ca32611497c827"),
            (64, "51f0bebf7e3b9d92fc49741779363cfe"),
        ];
        for (len, mac) in cases {
            assert_eq!(s.compute(&m[..len]).unwrap().to_vec(), unhex(mac), "len {len}");
        }
    }

    /// RFC 4231 test case 2 (HMAC-SHA256), truncated to 16 bytes as SMB2 does.
    #[test]
    fn rfc4231_hmac_vector() {
        let s = Signer::new(SigningAlgorithm::HmacSha256, b"Jefe");
        let mac = s.compute(b"what do ya want for nothing?").unwrap();
        assert_eq!(mac.to_vec(), unhex("5bdcc146bf60754e6a042426089575c7"));
    }

    #[test]
    fn gmac_nonce_layout() {
        let mut msg = [0u8; 64];
        msg[24..32].copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        msg[16] = 0x09; // server-to-client | signed
        msg[12] = 0x0C; // CANCEL
        let n = gmac_nonce(&msg);
        assert_eq!(&n[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&n[8..], &[3, 0, 0, 0]);
        msg[16] = 0x08;
        msg[12] = 0x05;
        assert_eq!(&gmac_nonce(&msg)[8..], &[0, 0, 0, 0]);
    }
}
