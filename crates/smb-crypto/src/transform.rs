//! SMB2 TRANSFORM_HEADER encryption (MS-SMB2 2.2.41, 3.1.4.3, 3.3.5.2.1.1).

use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering};

use aes::{Aes128, Aes256};
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};
use ccm::aead::consts::{U11, U16};
use ccm::aead::generic_array::typenum::Unsigned;
use ccm::aead::generic_array::GenericArray;
use ccm::aead::{AeadCore, AeadInPlace, KeyInit};
use ccm::Ccm;

use crate::CryptoError;

/// Size of the SMB2 TRANSFORM_HEADER (MS-SMB2 2.2.41).
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// ProtocolId of a TRANSFORM_HEADER: 0xFD 'S' 'M' 'B' (MS-SMB2 2.2.41).
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];
/// Flags = Encrypted (3.1.1) / EncryptionAlgorithm = AES-128-CCM (3.0.x);
/// both are 0x0001 (MS-SMB2 2.2.41).
pub const TRANSFORM_FLAG_ENCRYPTED: u16 = 0x0001;

/// Start of the authenticated part of the header: everything after
/// ProtocolId and Signature (MS-SMB2 3.1.4.3).
const AAD_START: usize = 20;

type Aes128Ccm = Ccm<Aes128, U16, U11>;
type Aes256Ccm = Ccm<Aes256, U16, U11>;

/// Encryption cipher (MS-SMB2 2.2.3.1.2, SMB2_ENCRYPTION_CAPABILITIES).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// AES-128-CCM, id 0x0001; the only cipher of dialects 3.0 / 3.0.2.
    Aes128Ccm,
    /// AES-128-GCM, id 0x0002.
    Aes128Gcm,
    /// AES-256-CCM, id 0x0003.
    Aes256Ccm,
    /// AES-256-GCM, id 0x0004.
    Aes256Gcm,
}

impl Cipher {
    /// Maps a cipher id from SMB2_ENCRYPTION_CAPABILITIES (MS-SMB2 2.2.3.1.2).
    pub fn from_id(id: u16) -> Option<Self> {
        match id {
            1 => Some(Self::Aes128Ccm),
            2 => Some(Self::Aes128Gcm),
            3 => Some(Self::Aes256Ccm),
            4 => Some(Self::Aes256Gcm),
            _ => None,
        }
    }

    /// The cipher id on the wire (MS-SMB2 2.2.3.1.2).
    pub fn id(self) -> u16 {
        match self {
            Self::Aes128Ccm => 1,
            Self::Aes128Gcm => 2,
            Self::Aes256Ccm => 3,
            Self::Aes256Gcm => 4,
        }
    }

    /// Key length in bytes: 16 for AES-128, 32 for AES-256.
    pub fn key_len(self) -> usize {
        match self {
            Self::Aes128Ccm | Self::Aes128Gcm => 16,
            Self::Aes256Ccm | Self::Aes256Gcm => 32,
        }
    }

    /// Bytes of the 16-byte Nonce field actually used: 11 for CCM
    /// (AES_CCM_Nonce), 12 for GCM (AES_GCM_Nonce) (MS-SMB2 2.2.41).
    pub fn nonce_len(self) -> usize {
        match self {
            Self::Aes128Ccm | Self::Aes256Ccm => 11,
            Self::Aes128Gcm | Self::Aes256Gcm => 12,
        }
    }
}

/// A parsed SMB2 TRANSFORM_HEADER (MS-SMB2 2.2.41).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformHeader {
    /// The AEAD tag over the encrypted message.
    pub signature: [u8; 16],
    /// Nonce field; only the first 11 (CCM) or 12 (GCM) bytes are used.
    pub nonce: [u8; 16],
    /// Size of the encrypted SMB2 message that follows the header.
    pub original_size: u32,
    /// Flags (3.1.1) / EncryptionAlgorithm (3.0.x); 0x0001 when valid.
    pub flags: u16,
    /// Session whose keys encrypted the message.
    pub session_id: u64,
}

/// Parses a TRANSFORM_HEADER at the start of `buf`, the whole transform
/// message (MS-SMB2 2.2.41, 3.3.5.2.1.1).
///
/// Checks the ProtocolId, that `buf` holds at least 52 bytes and that
/// OriginalMessageSize equals the number of bytes after the header. Flags are
/// returned as found; [`Sealer::open`] rejects anything other than 0x0001.
pub fn parse_transform_header(buf: &[u8]) -> Result<TransformHeader, CryptoError> {
    let Some(hdr) = buf.get(..TRANSFORM_HEADER_LEN) else {
        return Err(CryptoError::TooShort(buf.len()));
    };
    if hdr[..4] != TRANSFORM_PROTOCOL_ID {
        return Err(CryptoError::BadProtocolId);
    }
    let mut signature = [0u8; 16];
    signature.copy_from_slice(&hdr[4..20]);
    let mut nonce = [0u8; 16];
    nonce.copy_from_slice(&hdr[20..36]);
    let original_size = u32::from_le_bytes([hdr[36], hdr[37], hdr[38], hdr[39]]);
    // hdr[40..42] is Reserved and ignored on receipt.
    let flags = u16::from_le_bytes([hdr[42], hdr[43]]);
    let mut sid = [0u8; 8];
    sid.copy_from_slice(&hdr[44..52]);
    let session_id = u64::from_le_bytes(sid);

    let actual = buf.len() - TRANSFORM_HEADER_LEN;
    if usize::try_from(original_size).ok() != Some(actual) {
        return Err(CryptoError::SizeMismatch { declared: original_size, actual });
    }
    Ok(TransformHeader { signature, nonce, original_size, flags, session_id })
}

/// Expanded AEAD key state. The CCM schedules are boxed so the enum stays
/// small whatever their sizes are.
///
/// Backends (measured, see docs/decisions.md): AES-GCM from aws-lc-rs
/// (AES-NI/VAES + PCLMUL assembly, ~10x the RustCrypto `aes-gcm` crate
/// here); AES-CCM from RustCrypto `ccm`, as aws-lc-rs has no CCM AEAD.
enum AeadKey {
    Ccm128(Box<Aes128Ccm>),
    Ccm256(Box<Aes256Ccm>),
    /// AES-128-GCM or AES-256-GCM, by the key's algorithm.
    Gcm(LessSafeKey),
}

/// Encrypts and decrypts SMB2 messages with one key (MS-SMB2 3.1.4.3,
/// 3.3.5.2.1.1). Use one per session and direction: the server seals with
/// [`crate::SessionKeys::encrypt_s2c`] and opens with
/// [`crate::SessionKeys::decrypt_c2s`].
///
/// Nonces are a random per-Sealer prefix followed by a 64-bit counter that
/// starts at a random value and is advanced atomically, so `seal` can be
/// called through a shared reference from many tasks without ever repeating
/// a nonce. Channels of one session share its keys, so they should share one
/// Sealer (e.g. in an `Arc`) rather than build one each.
pub struct Sealer {
    cipher: Cipher,
    key: AeadKey,
    /// Random bytes placed before the counter (3 for CCM, 4 for GCM).
    prefix: [u8; 4],
    /// Random counter origin.
    start: u64,
    /// Nonces handed out so far; saturates at u64::MAX (exhausted).
    used: AtomicU64,
}

impl core::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Key state is secret: only the cipher is shown.
        f.debug_struct("Sealer").field("cipher", &self.cipher).finish_non_exhaustive()
    }
}

impl Sealer {
    /// Expands `key` for `cipher`; the key must be exactly
    /// [`Cipher::key_len`] bytes.
    pub fn new(cipher: Cipher, key: &[u8]) -> Result<Self, CryptoError> {
        let bad = || CryptoError::InvalidKeyLength { expected: cipher.key_len(), got: key.len() };
        if key.len() != cipher.key_len() {
            return Err(bad());
        }
        let aead = match cipher {
            Cipher::Aes128Ccm => AeadKey::Ccm128(Box::new(Aes128Ccm::new_from_slice(key).map_err(|_| bad())?)),
            Cipher::Aes128Gcm => AeadKey::Gcm(LessSafeKey::new(UnboundKey::new(&AES_128_GCM, key).map_err(|_| bad())?)),
            Cipher::Aes256Ccm => AeadKey::Ccm256(Box::new(Aes256Ccm::new_from_slice(key).map_err(|_| bad())?)),
            Cipher::Aes256Gcm => AeadKey::Gcm(LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).map_err(|_| bad())?)),
        };
        let mut seed = [0u8; 12];
        getrandom::getrandom(&mut seed).map_err(|_| CryptoError::Rng)?;
        let mut prefix = [0u8; 4];
        prefix.copy_from_slice(&seed[..4]);
        let mut start = [0u8; 8];
        start.copy_from_slice(&seed[4..]);
        Ok(Sealer { cipher, key: aead, prefix, start: u64::from_le_bytes(start), used: AtomicU64::new(0) })
    }

    /// The cipher this Sealer uses.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Encrypts in place (MS-SMB2 3.1.4.3). `buf` is 52 reserved bytes
    /// followed by the plaintext SMB2 message(s); on success the first 52
    /// bytes hold a complete TRANSFORM_HEADER (fresh nonce, Flags 0x0001,
    /// `session_id`, tag) and the rest is ciphertext.
    pub fn seal(&self, session_id: u64, buf: &mut [u8]) -> Result<(), CryptoError> {
        if buf.len() < TRANSFORM_HEADER_LEN {
            return Err(CryptoError::TooShort(buf.len()));
        }
        let payload_len = buf.len() - TRANSFORM_HEADER_LEN;
        let original_size = u32::try_from(payload_len).map_err(|_| CryptoError::MessageTooLarge(payload_len))?;
        let nonce = self.next_nonce()?;
        self.seal_at(&nonce, original_size, session_id, buf)
    }

    /// Seals with an explicit Nonce field. Private: callers must never pick
    /// nonces themselves; tests use it to reproduce published vectors.
    fn seal_at(&self, nonce: &[u8; 16], original_size: u32, session_id: u64, buf: &mut [u8]) -> Result<(), CryptoError> {
        if buf.len() < TRANSFORM_HEADER_LEN {
            return Err(CryptoError::TooShort(buf.len()));
        }
        let (hdr, payload) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
        write_header(hdr, nonce, original_size, session_id);

        let n = &nonce[..self.cipher.nonce_len()];
        let aad = &hdr[AAD_START..];
        let tag = match &self.key {
            AeadKey::Ccm128(k) => seal_with(&**k, n, aad, payload),
            AeadKey::Ccm256(k) => seal_with(&**k, n, aad, payload),
            AeadKey::Gcm(k) => gcm_seal(k, n, aad, payload),
        }?;
        hdr[4..20].copy_from_slice(&tag);
        Ok(())
    }

    /// Encrypts a message whose end is held elsewhere (MS-SMB2 3.1.4.3), such as READ data
    /// read in place from a file's mapping: `buf` holds 52 reserved bytes, `head_len` bytes
    /// of plaintext (the start of the message), then room for `tail.len() + 16` bytes, into
    /// which `tail` is encrypted in the same pass, never copied first. Returns the length of
    /// the transform message now at the start of `buf` (52 + `head_len` + `tail.len()`);
    /// the 16 bytes after it are scratch. `tail` is read exactly once.
    pub fn seal_with_tail(&self, session_id: u64, buf: &mut [u8], head_len: usize, tail: &[u8]) -> Result<usize, CryptoError> {
        let nonce = self.next_nonce()?;
        self.seal_with_tail_at(&nonce, session_id, buf, head_len, tail)
    }

    fn seal_with_tail_at(&self, nonce: &[u8; 16], session_id: u64, buf: &mut [u8], head_len: usize, tail: &[u8]) -> Result<usize, CryptoError> {
        let total = TRANSFORM_HEADER_LEN + head_len + tail.len();
        if buf.len() < total + 16 {
            return Err(CryptoError::TooShort(buf.len()));
        }
        let original_size = u32::try_from(head_len + tail.len()).map_err(|_| CryptoError::MessageTooLarge(head_len + tail.len()))?;
        let AeadKey::Gcm(k) = &self.key else {
            // CCM has no scatter form here: copy the tail behind the head and seal in place.
            buf[TRANSFORM_HEADER_LEN + head_len..total].copy_from_slice(tail);
            self.seal_at(nonce, original_size, session_id, &mut buf[..total])?;
            return Ok(total);
        };
        let (hdr, rest) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
        let (head, out) = rest.split_at_mut(head_len);
        write_header(hdr, nonce, original_size, session_id);
        let n = Nonce::try_assume_unique_for_key(&nonce[..self.cipher.nonce_len()]).map_err(|_| CryptoError::AuthFailed)?;
        let out = &mut out[..tail.len() + 16];
        k.seal_in_place_scatter(n, Aad::from(&hdr[AAD_START..]), head, tail, out).map_err(|_| CryptoError::MessageTooLarge(total))?;
        hdr[4..20].copy_from_slice(&out[tail.len()..]);
        Ok(total)
    }

    /// Decrypts a whole transform message in place and verifies its tag
    /// (MS-SMB2 3.3.5.2.1.1). Returns the range of `buf` holding the
    /// plaintext SMB2 message(s), i.e. `52..buf.len()`.
    ///
    /// The caller picks the Sealer by [`TransformHeader::session_id`] (see
    /// [`parse_transform_header`]). On error the payload bytes are
    /// unspecified and must be discarded.
    pub fn open(&self, buf: &mut [u8]) -> Result<Range<usize>, CryptoError> {
        let th = parse_transform_header(buf)?;
        if th.flags != TRANSFORM_FLAG_ENCRYPTED {
            return Err(CryptoError::BadFlags(th.flags));
        }
        let n = &th.nonce[..self.cipher.nonce_len()];
        let (hdr, payload) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
        let aad = &hdr[AAD_START..];
        let tag = &th.signature;
        match &self.key {
            AeadKey::Ccm128(k) => open_with(&**k, n, aad, payload, tag),
            AeadKey::Ccm256(k) => open_with(&**k, n, aad, payload, tag),
            AeadKey::Gcm(k) => gcm_open(k, n, aad, payload, tag),
        }?;
        Ok(TRANSFORM_HEADER_LEN..buf.len())
    }

    /// Next 16-byte Nonce field: prefix || counter (LE), zero-padded.
    fn next_nonce(&self) -> Result<[u8; 16], CryptoError> {
        // checked_add refuses to wrap, so a nonce can never come back.
        let n = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_add(1)).map_err(|_| CryptoError::NonceExhausted)?;
        let counter = self.start.wrapping_add(n);
        let prefix_len = self.cipher.nonce_len() - 8;
        let mut nonce = [0u8; 16];
        nonce[..prefix_len].copy_from_slice(&self.prefix[..prefix_len]);
        nonce[prefix_len..prefix_len + 8].copy_from_slice(&counter.to_le_bytes());
        Ok(nonce)
    }
}

/// Fills a TRANSFORM_HEADER but its Signature (zeroed until the tag is known).
fn write_header(hdr: &mut [u8], nonce: &[u8; 16], original_size: u32, session_id: u64) {
    hdr[..4].copy_from_slice(&TRANSFORM_PROTOCOL_ID);
    hdr[4..20].fill(0);
    hdr[20..36].copy_from_slice(nonce);
    hdr[36..40].copy_from_slice(&original_size.to_le_bytes());
    hdr[40..42].fill(0);
    hdr[42..44].copy_from_slice(&TRANSFORM_FLAG_ENCRYPTED.to_le_bytes());
    hdr[44..52].copy_from_slice(&session_id.to_le_bytes());
}

/// AES-GCM (aws-lc-rs): encrypts `payload` in place, returning the detached
/// 16-byte tag. Nonce uniqueness is the caller's: [`Sealer::next_nonce`].
fn gcm_seal(key: &LessSafeKey, nonce: &[u8], aad: &[u8], payload: &mut [u8]) -> Result<[u8; 16], CryptoError> {
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::AuthFailed)?;
    let tag = key.seal_in_place_separate_tag(nonce, Aad::from(aad), payload).map_err(|_| CryptoError::MessageTooLarge(payload.len()))?;
    let mut out = [0u8; 16];
    out.copy_from_slice(tag.as_ref().get(..16).ok_or(CryptoError::AuthFailed)?);
    Ok(out)
}

/// AES-GCM (aws-lc-rs): verifies and decrypts `payload` in place with the
/// tag passed separately; the payload is never copied.
fn gcm_open(key: &LessSafeKey, nonce: &[u8], aad: &[u8], payload: &mut [u8], tag: &[u8; 16]) -> Result<(), CryptoError> {
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::AuthFailed)?;
    key.open_in_place_separate_tag(nonce, Aad::from(aad), tag, payload).map_err(|_| CryptoError::AuthFailed)?;
    Ok(())
}

/// AES-CCM (RustCrypto): encrypts `payload` in place, returning the detached
/// 16-byte tag.
fn seal_with<A: AeadInPlace>(aead: &A, nonce: &[u8], aad: &[u8], payload: &mut [u8]) -> Result<[u8; 16], CryptoError> {
    // from_slice panics on a length mismatch; make that impossible.
    if nonce.len() != A::NonceSize::USIZE || A::TagSize::USIZE != 16 {
        return Err(CryptoError::AuthFailed);
    }
    let tag =
        aead.encrypt_in_place_detached(GenericArray::from_slice(nonce), aad, payload).map_err(|_| CryptoError::MessageTooLarge(payload.len()))?;
    let mut out = [0u8; 16];
    out.copy_from_slice(&tag);
    Ok(out)
}

/// AES-CCM (RustCrypto): verifies and decrypts `payload` in place.
fn open_with<A: AeadInPlace + AeadCore>(aead: &A, nonce: &[u8], aad: &[u8], payload: &mut [u8], tag: &[u8; 16]) -> Result<(), CryptoError> {
    if nonce.len() != A::NonceSize::USIZE || A::TagSize::USIZE != 16 {
        return Err(CryptoError::AuthFailed);
    }
    aead.decrypt_in_place_detached(GenericArray::from_slice(nonce), aad, payload, GenericArray::from_slice(tag)).map_err(|_| CryptoError::AuthFailed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn gcm_key(alg: &'static aws_lc_rs::aead::Algorithm, key: &[u8]) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(alg, key).unwrap())
    }

    /// "Encryption in SMB 3.0: a protocol perspective" (Microsoft Open
    /// Specifications blog): the WRITE request sealed with AES-128-CCM,
    /// reproduced byte for byte from a fixed nonce.
    #[test]
    fn smb30_ccm_write_request_exact() {
        let key = unhex("261B72350558F2E9DCF613070383EDBF");
        let plain = unhex(
            "FE534D4240000100000000000900400008000000000000000400000000000000
             FFFE0000010000001100001400E4080000000000000000000000000000000000
             3100700017000000000000000000000015010000390000020100000039020000
             00000000000000007000000000000000536D623320656E6372797074696F6E20
             74657374696E67",
        );
        let expected = unhex(
            "FD534D4281A286535415445DAE393921E44FA42E66E69A111892584FB5ED524A
             744DA3EE87000000000001001100001400E4080025C8FEE16605A437832D1CD5
             2DA9F4645333482A175FE5384563F45FCDAFAEF38BC62BA4D5C62897996625A4
             4C29BE5658DE2E6117585779E7B59FFD971278D08580D7FA899E410E910EABF5
             AA1DB43050B33B49182637759AC15D84BFCDF5B6B238993C0F4CF4D6012023F6
             C627297075D84B7803912D0A9639634453595EF3E33FFE4E7AC2AB",
        );
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(&unhex("66E69A111892584FB5ED524A744DA3EE"));
        let s = Sealer::new(Cipher::Aes128Ccm, &key).unwrap();
        let mut buf = vec![0u8; TRANSFORM_HEADER_LEN];
        buf.extend_from_slice(&plain);
        s.seal_at(&nonce, plain.len() as u32, 0x8e40014000011, &mut buf).unwrap();
        assert_eq!(buf, expected);
    }

    /// McGrew & Viega GCM spec test cases 4 (AES-128) and 16 (AES-256):
    /// 96-bit IV, AAD, 60-byte plaintext, through the in-place wrappers.
    #[test]
    fn gcm_mcgrew_viega_vectors() {
        let p = unhex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72
             1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        );
        let aad = unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
        let iv = unhex("cafebabefacedbaddecaf888");
        let k128 = unhex("feffe9928665731c6d6a8f9467308308");
        let k256 = unhex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308");
        let c128 = unhex(
            "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e
             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
        );
        let t128 = unhex("5bc94fbc3221a5db94fae95ae7121a47");
        let c256 = unhex(
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
        );
        let t256 = unhex("76fc6ece0f4e1768cddf8853bb2d551b");

        let g128 = gcm_key(&AES_128_GCM, &k128);
        let mut buf = p.clone();
        let tag = gcm_seal(&g128, &iv, &aad, &mut buf).unwrap();
        assert_eq!(buf, c128);
        assert_eq!(tag.to_vec(), t128);
        gcm_open(&g128, &iv, &aad, &mut buf, &tag).unwrap();
        assert_eq!(buf, p);

        let g256 = gcm_key(&AES_256_GCM, &k256);
        let mut buf = p.clone();
        let tag = gcm_seal(&g256, &iv, &aad, &mut buf).unwrap();
        assert_eq!(buf, c256);
        assert_eq!(tag.to_vec(), t256);
        let mut bad = tag;
        bad[0] ^= 1;
        let mut copy = buf.clone();
        assert_eq!(gcm_open(&g256, &iv, &aad, &mut copy, &bad), Err(CryptoError::AuthFailed));
        gcm_open(&g256, &iv, &aad, &mut buf, &tag).unwrap();
        assert_eq!(buf, p);
    }

    /// NIST CAVS gcmEncryptExtIV128 (PTlen = 0, AADlen = 128, Count 0):
    /// GCM with an empty plaintext is exactly the GMAC used for signing.
    #[test]
    fn gmac_nist_vector() {
        let g = gcm_key(&AES_128_GCM, &unhex("77be63708971c4e240d1cb79e8d77feb"));
        let iv = unhex("e0e00f19fed7ba0136a797f3");
        let aad = unhex("7a43ec1d9c0a5a78a0b16533a6213cab");
        let tag = gcm_seal(&g, &iv, &aad, &mut []).unwrap();
        assert_eq!(tag.to_vec(), unhex("209fcc8d3675ed938e9c7166709dd946"));
    }

    #[test]
    fn wrapper_rejects_wrong_nonce_length() {
        let g = gcm_key(&AES_128_GCM, &[0u8; 16]);
        assert!(gcm_seal(&g, &[0u8; 11], &[], &mut []).is_err());
        assert!(gcm_open(&g, &[0u8; 13], &[], &mut [], &[0u8; 16]).is_err());
        let c = Aes128Ccm::new_from_slice(&[0u8; 16]).unwrap();
        assert!(seal_with(&c, &[0u8; 12], &[], &mut []).is_err());
        assert!(open_with(&c, &[0u8; 10], &[], &mut [], &[0u8; 16]).is_err());
    }

    #[test]
    fn sealing_with_a_tail_equals_sealing_the_whole_message() {
        let msg: Vec<u8> = (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for cipher in [Cipher::Aes128Ccm, Cipher::Aes128Gcm, Cipher::Aes256Ccm, Cipher::Aes256Gcm] {
            let key: Vec<u8> = (0..cipher.key_len() as u8).collect();
            let s = Sealer::new(cipher, &key).unwrap();
            let nonce = [0x42u8; 16];
            // 80: a READ response's head (whole blocks); 13 and 0: partial and no head.
            for head_len in [80, 13, 0] {
                let mut whole = vec![0u8; TRANSFORM_HEADER_LEN];
                whole.extend_from_slice(&msg);
                s.seal_at(&nonce, msg.len() as u32, 7, &mut whole).unwrap();
                let mut buf = vec![0xAAu8; TRANSFORM_HEADER_LEN + msg.len() + 16];
                buf[TRANSFORM_HEADER_LEN..TRANSFORM_HEADER_LEN + head_len].copy_from_slice(&msg[..head_len]);
                let n = s.seal_with_tail_at(&nonce, 7, &mut buf, head_len, &msg[head_len..]).unwrap();
                assert_eq!(n, whole.len());
                assert_eq!(&buf[..n], &whole[..], "{cipher:?} head {head_len}");
                // And it opens.
                let mut back = buf[..n].to_vec();
                let range = s.open(&mut back).unwrap();
                assert_eq!(&back[range], &msg[..]);
            }
            // Too little room for the tag is refused, not truncated.
            let mut short = vec![0u8; TRANSFORM_HEADER_LEN + msg.len() + 15];
            assert!(s.seal_with_tail(7, &mut short, 0, &msg).is_err());
        }
    }

    #[test]
    fn nonce_layout_and_exhaustion() {
        let s = Sealer::new(Cipher::Aes128Ccm, &[7u8; 16]).unwrap();
        let a = s.next_nonce().unwrap();
        let b = s.next_nonce().unwrap();
        // CCM uses 11 bytes; the rest of the field stays zero.
        assert!(a[11..].iter().all(|&x| x == 0));
        assert_eq!(a[..3], b[..3]);
        assert_ne!(a, b);
        s.used.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(s.next_nonce(), Err(CryptoError::NonceExhausted));

        let g = Sealer::new(Cipher::Aes256Gcm, &[7u8; 32]).unwrap();
        let a = g.next_nonce().unwrap();
        assert!(a[12..].iter().all(|&x| x == 0));
    }
}
