//! Key derivation: SP800-108 KDF, preauth integrity hash, per-session keys.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use crate::transform::Cipher;

type HmacSha256 = Hmac<Sha256>;

/// SP800-108 counter-mode KDF with HMAC-SHA256 as PRF, `r = 32`,
/// `L = out.len() * 8` (MS-SMB2 3.1.4.2).
///
/// Each PRF block is `HMAC(key, [i]_32 || label || 0x00 || context || [L]_32)`
/// with big-endian counters starting at 1. The MS-SMB2 labels already end in
/// a NUL; the separator byte is added on top of it, as SP800-108 prescribes.
pub fn kdf(key: &[u8], label: &[u8], context: &[u8], out: &mut [u8]) {
    // HMAC accepts keys of any length, so new_from_slice cannot fail; the
    // fallback keeps this function panic-free regardless.
    let Ok(prf) = HmacSha256::new_from_slice(key) else {
        out.fill(0);
        return;
    };
    // L is a 32-bit field; SMB never asks for more than 256 bits.
    let l_bits = (out.len() as u64).saturating_mul(8).min(u32::MAX as u64) as u32;
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let mut mac = prf.clone();
        mac.update(&(i as u32 + 1).to_be_bytes());
        mac.update(label);
        mac.update(&[0u8]);
        mac.update(context);
        mac.update(&l_bits.to_be_bytes());
        let block = mac.finalize().into_bytes();
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

/// SHA-512 pre-authentication integrity hash chain (MS-SMB2 3.3.5.4, 3.3.5.5).
///
/// Starts as 64 zero bytes; each NEGOTIATE / SESSION_SETUP message (whole,
/// header included) is folded in as `H = SHA-512(H || message)`.
#[derive(Clone, PartialEq, Eq)]
pub struct PreauthHash([u8; 64]);

impl PreauthHash {
    /// The initial value: 64 zero bytes (MS-SMB2 3.3.5.4).
    pub fn new() -> Self {
        PreauthHash([0u8; 64])
    }

    /// Folds one whole SMB2 message into the chain: `H = SHA-512(H || msg)`.
    pub fn update(&mut self, msg: &[u8]) {
        let digest = Sha512::new().chain_update(self.0).chain_update(msg).finalize();
        self.0.copy_from_slice(&digest);
    }

    /// The current hash value (the KDF context for SMB 3.1.1 keys).
    pub fn value(&self) -> &[u8; 64] {
        &self.0
    }
}

impl Default for PreauthHash {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for PreauthHash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Not secret, but 64 bytes of hex is noise in logs: show a prefix.
        write!(f, "PreauthHash(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// Keys of one authenticated session, from the server's point of view
/// (MS-SMB2 3.3.5.5.3).
///
/// For dialects 2.0.2 and 2.1 only `signing` and `application` are set
/// (both equal to the 16-byte session key) and the cipher keys are empty.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    /// Session.SigningKey: 16 bytes; 2.x uses it with HMAC-SHA256, 3.x with
    /// AES-CMAC or AES-GMAC.
    pub signing: Vec<u8>,
    /// Session.ApplicationKey: 16 bytes, handed to upper layers (e.g. RPC).
    pub application: Vec<u8>,
    /// Session.EncryptionKey: server-to-client cipher key, 16 or 32 bytes.
    pub encrypt_s2c: Vec<u8>,
    /// Session.DecryptionKey: client-to-server cipher key, 16 or 32 bytes.
    pub decrypt_c2s: Vec<u8>,
}

impl core::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never print key material.
        f.debug_struct("SessionKeys")
            .field("signing", &format_args!("[{} bytes]", self.signing.len()))
            .field("application", &format_args!("[{} bytes]", self.application.len()))
            .field("encrypt_s2c", &format_args!("[{} bytes]", self.encrypt_s2c.len()))
            .field("decrypt_c2s", &format_args!("[{} bytes]", self.decrypt_c2s.len()))
            .finish()
    }
}

/// KDF labels and contexts for dialects 3.0 / 3.0.2 (MS-SMB2 3.3.5.5.3).
mod label30 {
    pub const SIGN: (&[u8], &[u8]) = (b"SMB2AESCMAC\0", b"SmbSign\0");
    pub const APP: (&[u8], &[u8]) = (b"SMB2APP\0", b"SmbRpc\0");
    pub const ENC: (&[u8], &[u8]) = (b"SMB2AESCCM\0", b"ServerOut\0");
    pub const DEC: (&[u8], &[u8]) = (b"SMB2AESCCM\0", b"ServerIn \0");
}

/// KDF labels for dialect 3.1.1; the context is the preauth hash
/// (MS-SMB2 3.3.5.5.3).
mod label311 {
    pub const SIGN: &[u8] = b"SMBSigningKey\0";
    pub const APP: &[u8] = b"SMBAppKey\0";
    pub const ENC: &[u8] = b"SMBS2CCipherKey\0";
    pub const DEC: &[u8] = b"SMBC2SCipherKey\0";
}

impl SessionKeys {
    /// Derives the session's keys from the GSS session key
    /// (MS-SMB2 3.3.5.5.3, 3.1.4.2).
    ///
    /// * `0x0202` / `0x0210` (and anything below `0x0300`): signing and
    ///   application key are the session key; no cipher keys.
    /// * `0x0300` / `0x0302`: constant labels/contexts, AES-128-CCM keys
    ///   (`cipher` is ignored: 3.0.x only has AES-128-CCM).
    /// * `0x0311` (and anything above): labels `SMBSigningKey\0` etc. with the
    ///   preauth hash as context. A missing `preauth` is a caller bug; 64 zero
    ///   bytes are used rather than panicking. AES-256 ciphers get 32-byte
    ///   cipher keys derived with L = 256 from the full, untruncated session
    ///   key; `None` yields 16-byte cipher keys.
    ///
    /// Session.SessionKey is the first 16 bytes of `session_key`, right-padded
    /// with zeroes when shorter (MS-SMB2 3.3.5.5.3).
    pub fn derive(dialect: u16, session_key: &[u8], preauth: Option<&[u8; 64]>, cipher: Option<Cipher>) -> SessionKeys {
        let mut sk16 = [0u8; 16];
        let n = session_key.len().min(16);
        sk16[..n].copy_from_slice(&session_key[..n]);

        let derive16 = |label: &[u8], ctx: &[u8]| {
            let mut k = vec![0u8; 16];
            kdf(&sk16, label, ctx, &mut k);
            k
        };

        if dialect < crate::DIALECT_300 {
            return SessionKeys { signing: sk16.to_vec(), application: sk16.to_vec(), encrypt_s2c: Vec::new(), decrypt_c2s: Vec::new() };
        }

        if dialect < crate::DIALECT_311 {
            use label30::*;
            return SessionKeys {
                signing: derive16(SIGN.0, SIGN.1),
                application: derive16(APP.0, APP.1),
                encrypt_s2c: derive16(ENC.0, ENC.1),
                decrypt_c2s: derive16(DEC.0, DEC.1),
            };
        }

        use label311::*;
        let zero = [0u8; 64];
        let ctx: &[u8] = preauth.unwrap_or(&zero);
        let (enc_s2c, dec_c2s) = match cipher {
            Some(c) if c.key_len() == 32 => {
                // AES-256: L = 256 and the full session key as KDF input, so
                // the longer Kerberos keys contribute all their entropy.
                let mut e = vec![0u8; 32];
                let mut d = vec![0u8; 32];
                kdf(session_key, ENC, ctx, &mut e);
                kdf(session_key, DEC, ctx, &mut d);
                (e, d)
            }
            _ => (derive16(ENC, ctx), derive16(DEC, ctx)),
        };
        SessionKeys { signing: derive16(SIGN, ctx), application: derive16(APP, ctx), encrypt_s2c: enc_s2c, decrypt_c2s: dec_c2s }
    }
}
