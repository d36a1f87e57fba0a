//! Differential tests: the aws-lc-rs backed AES-GCM sealing and AES-GMAC /
//! AES-CMAC signing must agree byte for byte with the independent RustCrypto
//! implementations (`aes-gcm`, `cmac`) over many lengths, block-boundary
//! cases included. Complements the fixed known-answer vectors.

use aes::Aes128;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm, Nonce};
use cmac::{Cmac, Mac};
use smb_crypto::{parse_transform_header, Cipher, Sealer, Signer, SigningAlgorithm, TRANSFORM_HEADER_LEN};

const LENGTHS: [usize; 14] = [64, 65, 79, 80, 81, 95, 96, 127, 128, 129, 1000, 4096, 65_536 + 13, 1 << 20];

/// Deterministic filler that differs per length and seed.
fn bytes(len: usize, seed: u8) -> Vec<u8> {
    let mut x = 0x9e37_79b9_u32 ^ u32::from(seed) ^ len as u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// An SMB2-looking message: the fields the GMAC nonce reads are set.
fn message(len: usize, message_id: u64, server: bool) -> Vec<u8> {
    let mut m = bytes(len, 1);
    m[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
    m[12..14].copy_from_slice(&8u16.to_le_bytes()); // READ
    m[16..20].copy_from_slice(&(if server { 0x9u32 } else { 0x8 }).to_le_bytes());
    m[24..32].copy_from_slice(&message_id.to_le_bytes());
    m
}

#[test]
fn gmac_signing_matches_rustcrypto() {
    let key = bytes(16, 2);
    let signer = Signer::new(SigningAlgorithm::AesGmac, &key);
    let reference = Aes128Gcm::new_from_slice(&key).unwrap();
    for (i, len) in LENGTHS.into_iter().enumerate() {
        for server in [false, true] {
            let mut msg = message(len, 1000 + i as u64, server);
            signer.sign(&mut msg);
            let sig = msg[48..64].to_vec();
            let mut zeroed = msg.clone();
            zeroed[48..64].fill(0);
            let mut nonce = [0u8; 12];
            nonce[..8].copy_from_slice(&msg[24..32]);
            nonce[8] = u8::from(server);
            let tag = reference.encrypt_in_place_detached(Nonce::from_slice(&nonce), &zeroed, &mut []).unwrap();
            assert_eq!(sig, tag.to_vec(), "len {len} server {server}");
            assert!(signer.verify(&mut msg));
        }
    }
}

#[test]
fn cmac_signing_matches_rustcrypto() {
    let key = bytes(16, 3);
    let signer = Signer::new(SigningAlgorithm::AesCmac, &key);
    for len in LENGTHS {
        let mut msg = message(len, 7, true);
        signer.sign(&mut msg);
        let sig = msg[48..64].to_vec();
        let mut zeroed = msg.clone();
        zeroed[48..64].fill(0);
        let mut mac = <Cmac<Aes128> as KeyInit>::new_from_slice(&key).unwrap();
        mac.update(&zeroed);
        assert_eq!(sig, mac.finalize().into_bytes().to_vec(), "len {len}");
        assert!(signer.verify(&mut msg));
    }
}

/// Decrypts a transform message with RustCrypto: (key, header, payload).
fn reference_open(cipher: Cipher, key: &[u8], buf: &mut [u8]) {
    let (hdr, payload) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
    let nonce = Nonce::from_slice(&hdr[20..32]);
    let tag = aes_gcm::Tag::from_slice(&hdr[4..20]);
    let aad = &hdr[20..];
    match cipher {
        Cipher::Aes128Gcm => Aes128Gcm::new_from_slice(key).unwrap().decrypt_in_place_detached(nonce, aad, payload, tag),
        Cipher::Aes256Gcm => Aes256Gcm::new_from_slice(key).unwrap().decrypt_in_place_detached(nonce, aad, payload, tag),
        _ => unreachable!(),
    }
    .expect("reference decrypt");
}

/// Encrypts in place with RustCrypto, filling a transform header.
fn reference_seal(cipher: Cipher, key: &[u8], session_id: u64, buf: &mut [u8]) {
    let size = (buf.len() - TRANSFORM_HEADER_LEN) as u32;
    let (hdr, payload) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
    hdr[..4].copy_from_slice(&[0xFD, b'S', b'M', b'B']);
    hdr[20..32].copy_from_slice(&bytes(12, 9));
    hdr[32..36].fill(0);
    hdr[36..40].copy_from_slice(&size.to_le_bytes());
    hdr[40..42].fill(0);
    hdr[42..44].copy_from_slice(&1u16.to_le_bytes());
    hdr[44..52].copy_from_slice(&session_id.to_le_bytes());
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&hdr[20..32]);
    let nonce = Nonce::from_slice(&nonce);
    let (aad, _) = hdr.split_at(TRANSFORM_HEADER_LEN);
    let aad = aad[20..].to_vec();
    let tag = match cipher {
        Cipher::Aes128Gcm => Aes128Gcm::new_from_slice(key).unwrap().encrypt_in_place_detached(nonce, &aad, payload),
        Cipher::Aes256Gcm => Aes256Gcm::new_from_slice(key).unwrap().encrypt_in_place_detached(nonce, &aad, payload),
        _ => unreachable!(),
    }
    .unwrap();
    hdr[4..20].copy_from_slice(&tag);
}

#[test]
fn gcm_sealing_matches_rustcrypto_both_ways() {
    for cipher in [Cipher::Aes128Gcm, Cipher::Aes256Gcm] {
        let key = bytes(cipher.key_len(), 4);
        let sealer = Sealer::new(cipher, &key).unwrap();
        for len in LENGTHS {
            let plain = message(len, 5, true);
            let mut buf = vec![0u8; TRANSFORM_HEADER_LEN];
            buf.extend_from_slice(&plain);

            // Braid seals, RustCrypto opens.
            sealer.seal(0x1122, &mut buf).unwrap();
            assert_eq!(parse_transform_header(&buf).unwrap().session_id, 0x1122);
            let mut copy = buf.clone();
            reference_open(cipher, &key, &mut copy);
            assert_eq!(&copy[TRANSFORM_HEADER_LEN..], &plain[..], "{cipher:?} len {len}");

            // RustCrypto seals, Braid opens.
            let mut buf = vec![0u8; TRANSFORM_HEADER_LEN];
            buf.extend_from_slice(&plain);
            reference_seal(cipher, &key, 0x3344, &mut buf);
            let r = sealer.open(&mut buf).expect("open reference ciphertext");
            assert_eq!(&buf[r], &plain[..], "{cipher:?} len {len}");
        }
    }
}
