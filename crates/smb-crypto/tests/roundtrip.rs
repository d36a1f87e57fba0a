//! Property-style tests: sign/verify and seal/open round trips, tampering,
//! nonce uniqueness and malformed transform headers.

use std::collections::HashSet;
use std::sync::Arc;

use smb_crypto::{parse_transform_header, Cipher, CryptoError, Sealer, Signer, SigningAlgorithm, TRANSFORM_HEADER_LEN};

const ALGOS: [SigningAlgorithm; 3] = [SigningAlgorithm::HmacSha256, SigningAlgorithm::AesCmac, SigningAlgorithm::AesGmac];
const CIPHERS: [Cipher; 4] = [Cipher::Aes128Ccm, Cipher::Aes128Gcm, Cipher::Aes256Ccm, Cipher::Aes256Gcm];

/// A fake SMB2 message: header with the signed flag, then `body` bytes.
fn message(body: usize, message_id: u64, server: bool, command: u16) -> Vec<u8> {
    let mut m: Vec<u8> = (0..64 + body).map(|i| (i * 7 + 3) as u8).collect();
    m[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
    m[12..14].copy_from_slice(&command.to_le_bytes());
    let flags: u32 = 0x8 | u32::from(server);
    m[16..20].copy_from_slice(&flags.to_le_bytes());
    m[24..32].copy_from_slice(&message_id.to_le_bytes());
    m
}

#[test]
fn ids_round_trip() {
    for a in ALGOS {
        assert_eq!(SigningAlgorithm::from_id(a.id()), Some(a));
    }
    assert_eq!(SigningAlgorithm::from_id(3), None);
    assert_eq!(SigningAlgorithm::AesGmac.id(), 2);
    for c in CIPHERS {
        assert_eq!(Cipher::from_id(c.id()), Some(c));
    }
    assert_eq!(Cipher::from_id(0), None);
    assert_eq!(Cipher::from_id(5), None);
    assert_eq!(Cipher::Aes256Gcm.key_len(), 32);
    assert_eq!(Cipher::Aes128Ccm.key_len(), 16);
    assert_eq!(SigningAlgorithm::default_for_dialect(0x0210), SigningAlgorithm::HmacSha256);
    assert_eq!(SigningAlgorithm::default_for_dialect(0x0311), SigningAlgorithm::AesCmac);
}

#[test]
fn sign_verify_round_trip_and_tamper() {
    for algo in ALGOS {
        let s = Signer::new(algo, &[0x5A; 16]);
        assert_eq!(s.algorithm(), algo);
        for body in [0usize, 1, 15, 16, 17, 1000] {
            let mut m = message(body, 42, true, 0x0008);
            s.sign(&mut m);
            assert_ne!(&m[48..64], &[0u8; 16], "{algo:?}");
            let snapshot = m.clone();
            assert!(s.verify(&mut m), "{algo:?} body {body}");
            assert_eq!(m, snapshot, "verify must not modify the message");

            // Every byte outside the signature field is covered, and the
            // signature itself is checked.
            for pos in [0, 12, 16, 24, 31, 47, 48, 63, m.len() - 1] {
                let mut bad = snapshot.clone();
                bad[pos] ^= 0x01;
                assert!(!s.verify(&mut bad), "{algo:?} body {body} pos {pos}");
                assert_eq!(bad[pos], snapshot[pos] ^ 0x01);
            }
            // A different key does not verify.
            let other = Signer::new(algo, &[0x5B; 16]);
            assert!(!other.verify(&mut m.clone()), "{algo:?}");
        }
    }
}

#[test]
fn sign_ignores_previous_signature_field() {
    for algo in ALGOS {
        let s = Signer::new(algo, &[1; 16]);
        let mut a = message(100, 7, false, 5);
        let mut b = a.clone();
        b[48..64].fill(0xFF);
        s.sign(&mut a);
        s.sign(&mut b);
        assert_eq!(a, b, "{algo:?}");
    }
}

#[test]
fn gmac_binds_message_id_role_and_cancel() {
    let s = Signer::new(SigningAlgorithm::AesGmac, &[9; 16]);
    let sig = |m: &mut Vec<u8>| {
        s.sign(m);
        m[48..64].to_vec()
    };
    // The nonce fields are also covered as AAD, so compare sign outputs on
    // messages that differ only there: all must differ.
    let base = sig(&mut message(32, 1, false, 0x0005));
    assert_ne!(base, sig(&mut message(32, 2, false, 0x0005)));
    assert_ne!(base, sig(&mut message(32, 1, true, 0x0005)));
    assert_ne!(base, sig(&mut message(32, 1, false, 0x000C)));
}

#[test]
fn short_messages() {
    for algo in ALGOS {
        let s = Signer::new(algo, &[1; 16]);
        let mut short = vec![0xAB; 63];
        s.sign(&mut short);
        assert_eq!(short, vec![0xAB; 63], "sign leaves short input alone");
        assert!(!s.verify(&mut short));
        assert!(!s.verify(&mut []));
    }
}

#[test]
fn hmac_accepts_any_key_length_aes_pads() {
    // HMAC keys of any length work and differ.
    let m0 = {
        let mut m = message(10, 1, true, 1);
        Signer::new(SigningAlgorithm::HmacSha256, &[3; 100]).sign(&mut m);
        m
    };
    let m1 = {
        let mut m = message(10, 1, true, 1);
        Signer::new(SigningAlgorithm::HmacSha256, &[3; 16]).sign(&mut m);
        m
    };
    assert_ne!(m0, m1);
    // AES keys shorter than 16 bytes are zero-padded, longer ones truncated.
    let mut a = message(10, 1, true, 1);
    let mut b = a.clone();
    Signer::new(SigningAlgorithm::AesCmac, &[7; 8]).sign(&mut a);
    Signer::new(SigningAlgorithm::AesCmac, &[[7; 8], [0; 8]].concat()).sign(&mut b);
    assert_eq!(a, b);
}

fn sealed(s: &Sealer, session_id: u64, plain: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; TRANSFORM_HEADER_LEN];
    buf.extend_from_slice(plain);
    s.seal(session_id, &mut buf).unwrap();
    buf
}

#[test]
fn seal_open_round_trip_all_ciphers() {
    for c in CIPHERS {
        let key: Vec<u8> = (0..c.key_len() as u8).collect();
        let s = Sealer::new(c, &key).unwrap();
        assert_eq!(s.cipher(), c);
        for len in [0usize, 1, 64, 65, 4096, 100_000] {
            let plain: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let mut buf = sealed(&s, 0x1122_3344_5566_7788, &plain);
            assert_eq!(buf.len(), plain.len() + TRANSFORM_HEADER_LEN);
            if len >= 16 {
                assert_ne!(&buf[52..], &plain[..], "{c:?} payload must be encrypted");
            }
            let th = parse_transform_header(&buf).unwrap();
            assert_eq!(th.session_id, 0x1122_3344_5566_7788);
            assert_eq!(th.original_size as usize, len);
            assert_eq!(th.flags, 1);
            assert!(th.nonce[c.nonce_len()..].iter().all(|&b| b == 0), "{c:?} nonce padding");
            assert_eq!(&buf[..4], &[0xFD, b'S', b'M', b'B']);
            assert_eq!(&buf[40..42], &[0, 0], "reserved");

            let r = s.open(&mut buf).unwrap();
            assert_eq!(r, 52..52 + len);
            assert_eq!(&buf[r], &plain[..], "{c:?} len {len}");
        }
    }
}

#[test]
fn open_rejects_tampering_everywhere() {
    for c in CIPHERS {
        let s = Sealer::new(c, &vec![0x33; c.key_len()]).unwrap();
        let good = sealed(&s, 77, &[0x44; 300]);
        // Tag, nonce, size, reserved, flags, session id, payload.
        for pos in [4, 19, 20, 31, 40, 41, 44, 51, 52, 200, good.len() - 1] {
            let mut bad = good.clone();
            bad[pos] ^= 0x01;
            assert!(s.open(&mut bad).is_err(), "{c:?} pos {pos}");
        }
        // Session id is authenticated: rewriting it breaks the tag.
        let mut moved = good.clone();
        moved[44..52].copy_from_slice(&78u64.to_le_bytes());
        assert_eq!(s.open(&mut moved), Err(CryptoError::AuthFailed), "{c:?}");
        // Wrong key of the right size.
        let other = Sealer::new(c, &vec![0x34; c.key_len()]).unwrap();
        assert_eq!(other.open(&mut good.clone()), Err(CryptoError::AuthFailed));
        // Flags other than 0x0001 are refused before decryption.
        let mut flags = good.clone();
        flags[42] = 2;
        assert_eq!(s.open(&mut flags), Err(CryptoError::BadFlags(2)));
        // Truncated message: size check.
        let mut short = good.clone();
        short.pop();
        assert!(matches!(s.open(&mut short), Err(CryptoError::SizeMismatch { .. })));
        // Still opens untouched.
        assert!(s.open(&mut good.clone()).is_ok());
    }
}

#[test]
fn ciphers_are_not_interchangeable() {
    let k16 = [5u8; 16];
    let ccm = Sealer::new(Cipher::Aes128Ccm, &k16).unwrap();
    let gcm = Sealer::new(Cipher::Aes128Gcm, &k16).unwrap();
    let mut m = sealed(&ccm, 1, b"hello world, this is SMB");
    assert!(gcm.open(&mut m).is_err());
}

#[test]
fn sealer_rejects_bad_keys_and_buffers() {
    for c in CIPHERS {
        for len in [0, 15, 17, 24, 31, 33] {
            assert_eq!(Sealer::new(c, &vec![0; len]).err(), Some(CryptoError::InvalidKeyLength { expected: c.key_len(), got: len }));
        }
        let s = Sealer::new(c, &vec![0; c.key_len()]).unwrap();
        assert_eq!(s.seal(1, &mut [0u8; 51]), Err(CryptoError::TooShort(51)));
        // A bare header seals an empty message.
        let mut empty = [0u8; 52];
        s.seal(1, &mut empty).unwrap();
        assert_eq!(s.open(&mut empty), Ok(52..52));
    }
}

#[test]
fn parse_transform_header_errors() {
    assert_eq!(parse_transform_header(&[]), Err(CryptoError::TooShort(0)));
    assert_eq!(parse_transform_header(&[0xFD; 51]), Err(CryptoError::TooShort(51)));
    let mut h = [0u8; 60];
    h[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
    assert_eq!(parse_transform_header(&h), Err(CryptoError::BadProtocolId));
    h[0] = 0xFD;
    h[36..40].copy_from_slice(&9u32.to_le_bytes());
    assert_eq!(parse_transform_header(&h), Err(CryptoError::SizeMismatch { declared: 9, actual: 8 }));
    h[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(parse_transform_header(&h).is_err());
    h[36..40].copy_from_slice(&8u32.to_le_bytes());
    h[42] = 1;
    h[44..52].copy_from_slice(&0xDEAD_BEEFu64.to_le_bytes());
    let th = parse_transform_header(&h).unwrap();
    assert_eq!((th.original_size, th.flags, th.session_id), (8, 1, 0xDEAD_BEEF));
}

#[test]
fn nonces_unique_across_many_seals() {
    for c in CIPHERS {
        let s = Sealer::new(c, &vec![1; c.key_len()]).unwrap();
        let mut seen = HashSet::new();
        for _ in 0..20_000 {
            let mut buf = [0u8; 52 + 8];
            s.seal(9, &mut buf).unwrap();
            let n: [u8; 16] = buf[20..36].try_into().unwrap();
            assert!(seen.insert(n), "{c:?} nonce repeated");
        }
    }
    // Two Sealers with the same key (e.g. built separately by mistake) do
    // not start from the same nonce.
    let a = Sealer::new(Cipher::Aes128Gcm, &[2; 16]).unwrap();
    let b = Sealer::new(Cipher::Aes128Gcm, &[2; 16]).unwrap();
    let na = sealed(&a, 1, &[])[20..36].to_vec();
    let nb = sealed(&b, 1, &[])[20..36].to_vec();
    assert_ne!(na, nb);
}

#[test]
fn nonces_unique_across_threads() {
    let s = Arc::new(Sealer::new(Cipher::Aes256Gcm, &[8; 32]).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                (0..5_000)
                    .map(|_| {
                        let mut buf = [0u8; 52 + 4];
                        s.seal(t, &mut buf).unwrap();
                        let n: [u8; 16] = buf[20..36].try_into().unwrap();
                        n
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for h in handles {
        for n in h.join().unwrap() {
            assert!(seen.insert(n));
        }
    }
    assert_eq!(seen.len(), 20_000);
}

#[test]
fn debug_does_not_leak_keys() {
    let s = Sealer::new(Cipher::Aes128Gcm, &[0xC3; 16]).unwrap();
    let d = format!("{s:?}");
    assert!(d.contains("Aes128Gcm") && !d.to_lowercase().contains("c3"));
    let g = Signer::new(SigningAlgorithm::AesCmac, &[0xC3; 16]);
    let d = format!("{g:?}");
    assert!(d.contains("AesCmac") && !d.to_lowercase().contains("c3"));
}
