//! NTLMv2 key derivation and session security primitives (MS-NLMP 3.3.2, 3.4.4, 3.4.5).

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use rc4::{consts::U16, KeyInit, Rc4, StreamCipher};

use crate::flags;

type HmacMd5 = Hmac<Md5>;

/// HMAC_MD5(key, concatenation of `parts`) (MS-NLMP 6).
pub(crate) fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    // HMAC is defined for keys of every length, so this cannot fail.
    let mut mac = <HmacMd5 as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// MD5 over the concatenation of `parts`.
fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// UTF-16LE encoding of a string, as NTLM puts it on the wire.
pub(crate) fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Upper-cases like Windows does: one UTF-16 unit maps to one unit, so
/// characters whose Unicode upper case expands (e.g. 'ß') stay unchanged.
fn windows_upper(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) if u.len_utf16() == c.len_utf16() => u,
                _ => c,
            }
        })
        .collect()
}

/// NTOWFv2 = HMAC_MD5(NT hash, UTF16LE(Uppercase(user) || domain)) (MS-NLMP 3.3.2).
pub(crate) fn ntowf_v2(nt_hash: &[u8; 16], user: &str, domain: &str) -> [u8; 16] {
    let mut who = utf16le(&windows_upper(user));
    who.extend_from_slice(&utf16le(domain));
    hmac_md5(nt_hash, &[&who])
}

/// Compares two byte strings in time independent of where they differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An RC4 cipher state keyed with a 16-byte key (MS-NLMP 3.4.5.3 "handle").
pub(crate) struct Rc4Handle(Rc4<U16>);

impl Rc4Handle {
    /// Initialises RC4 with `key`.
    pub(crate) fn new(key: &[u8; 16]) -> Self {
        Rc4Handle(Rc4::new(key.into()))
    }

    /// Encrypts or decrypts `data` in place, advancing the key stream.
    pub(crate) fn apply(&mut self, data: &mut [u8]) {
        self.0.apply_keystream(data);
    }
}

/// One-shot RC4K(key, data) (MS-NLMP 6).
pub(crate) fn rc4k(key: &[u8; 16], data: &[u8; 16]) -> [u8; 16] {
    let mut out = *data;
    Rc4Handle::new(key).apply(&mut out);
    out
}

/// Direction of traffic, which selects the magic constant for key derivation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Messages sent by the client (initiator).
    ClientToServer,
    /// Messages sent by the server (acceptor).
    ServerToClient,
}

/// SIGNKEY with extended session security (MS-NLMP 3.4.5.2).
pub(crate) fn sign_key(exported: &[u8; 16], dir: Direction) -> [u8; 16] {
    let magic: &[u8] = match dir {
        Direction::ClientToServer => b"session key to client-to-server signing key magic constant\0",
        Direction::ServerToClient => b"session key to server-to-client signing key magic constant\0",
    };
    md5(&[exported, magic])
}

/// SEALKEY with extended session security (MS-NLMP 3.4.5.3); the key strength
/// (128, 56 or 40 bits) selects how much of the session key is hashed.
pub(crate) fn seal_key(exported: &[u8; 16], negotiated: u32, dir: Direction) -> [u8; 16] {
    let used = if negotiated & flags::NEGOTIATE_128 != 0 {
        16
    } else if negotiated & flags::NEGOTIATE_56 != 0 {
        7
    } else {
        5
    };
    let magic: &[u8] = match dir {
        Direction::ClientToServer => b"session key to client-to-server sealing key magic constant\0",
        Direction::ServerToClient => b"session key to server-to-client sealing key magic constant\0",
    };
    md5(&[&exported[..used], magic])
}

/// NTLMSSP_MESSAGE_SIGNATURE with extended session security (MS-NLMP 3.4.4.2):
/// Version 1, HMAC_MD5(SignKey, SeqNum || message)[0..8], optionally
/// RC4-encrypted with the sealing handle when KEY_EXCH was negotiated, SeqNum.
pub(crate) fn mac(sign_key: &[u8; 16], seal: Option<&mut Rc4Handle>, seq: u32, message: &[u8]) -> [u8; 16] {
    let seq_bytes = seq.to_le_bytes();
    let digest = hmac_md5(sign_key, &[&seq_bytes, message]);
    let mut checksum = [0u8; 8];
    checksum.copy_from_slice(&digest[..8]);
    if let Some(handle) = seal {
        handle.apply(&mut checksum);
    }
    let mut sig = [0u8; 16];
    sig[..4].copy_from_slice(&1u32.to_le_bytes());
    sig[4..12].copy_from_slice(&checksum);
    sig[12..].copy_from_slice(&seq_bytes);
    sig
}

/// Signature of a SPNEGO mechListMIC: the first message signed in `dir`
/// (sequence number 0, fresh RC4 handle) over the DER MechTypeList.
pub(crate) fn mech_list_mic(exported: &[u8; 16], negotiated: u32, dir: Direction, mech_types: &[u8]) -> [u8; 16] {
    let sk = sign_key(exported, dir);
    if negotiated & flags::KEY_EXCH != 0 {
        let mut handle = Rc4Handle::new(&seal_key(exported, negotiated, dir));
        mac(&sk, Some(&mut handle), 0, mech_types)
    } else {
        mac(&sk, None, 0, mech_types)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nt_hash;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    // MS-NLMP 4.2.4.1.1: NTOWFv2("Password", "User", "Domain").
    #[test]
    fn ntowf_v2_vector() {
        let k = ntowf_v2(&nt_hash("Password"), "User", "Domain");
        assert_eq!(k.to_vec(), hex("0c 86 8a 40 3b fd 7a 93 a3 00 1e f2 2e f0 2e 3f"));
    }

    // MS-NLMP 4.2.4.4: SIGNKEY/SEALKEY for RandomSessionKey 0x55 * 16 and the
    // GSS_WrapEx signature (data sealed first with the same RC4 handle).
    #[test]
    fn sign_seal_vectors() {
        let exported = [0x55u8; 16];
        let negotiated = 0xe28a_8233;
        let sk = sign_key(&exported, Direction::ClientToServer);
        assert_eq!(sk.to_vec(), hex("47 88 dc 86 1b 47 82 f3 5d 43 fd 98 fe 1a 2d 39"));
        let seal = seal_key(&exported, negotiated, Direction::ClientToServer);
        assert_eq!(seal.to_vec(), hex("59 f6 00 97 3c c4 96 0a 25 48 0a 7c 19 6e 4c 58"));

        let plaintext = utf16le("Plaintext");
        let mut handle = Rc4Handle::new(&seal);
        let mut sealed = plaintext.clone();
        handle.apply(&mut sealed);
        assert_eq!(sealed, hex("54 e5 01 65 bf 19 36 dc 99 60 20 c1 81 1b 0f 06 fb 5f"));
        assert_eq!(hmac_md5(&sk, &[&[0, 0, 0, 0], &plaintext])[..8].to_vec(), hex("70 35 28 51 f2 56 43 09"));
        let sig = mac(&sk, Some(&mut handle), 0, &plaintext);
        assert_eq!(sig.to_vec(), hex("01 00 00 00 7f b3 8e c5 c5 5d 49 76 00 00 00 00"));
    }

    #[test]
    fn rc4k_vector() {
        // MS-NLMP 4.2.4.2.3: EncryptedRandomSessionKey = RC4K(SessionBaseKey, 0x55 * 16).
        let sbk: [u8; 16] = hex("8d e4 0c ca db c1 4a 82 f1 5c b0 ad 0d e9 5c a3").try_into().unwrap();
        assert_eq!(rc4k(&sbk, &[0x55; 16]).to_vec(), hex("c5 da d2 54 4f c9 79 90 94 ce 1c e9 0b c9 d0 3e"));
    }

    #[test]
    fn upper_and_ct_eq() {
        assert_eq!(windows_upper("user_ß_é"), "USER_ß_É");
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
