#![no_main]
//! Fuzzes the receive path of SMB2 encryption: TRANSFORM_HEADER parsing and
//! in-place decryption (MS-SMB2 2.2.41, 3.3.5.2.1.1), plus signature
//! verification of arbitrary messages. None of it may panic.

use libfuzzer_sys::fuzz_target;
use smb_crypto::{parse_transform_header, Cipher, Sealer, Signer, SigningAlgorithm};

fuzz_target!(|data: &[u8]| {
    // First byte picks the cipher / signing algorithm; the rest is the wire.
    let Some((&sel, wire)) = data.split_first() else {
        return;
    };
    let _ = parse_transform_header(wire);

    let cipher = Cipher::from_id(u16::from(sel % 4) + 1).unwrap_or(Cipher::Aes128Gcm);
    let key = [0x11u8; 32];
    if let Ok(sealer) = Sealer::new(cipher, &key[..cipher.key_len()]) {
        let mut buf = wire.to_vec();
        if let Ok(range) = sealer.open(&mut buf) {
            // Forged tags should never pass; if one does, the range must at
            // least be in bounds.
            assert!(range.end <= buf.len());
        }

        // Round trip whatever the input is as plaintext.
        let mut sealed = vec![0u8; 52];
        sealed.extend_from_slice(wire);
        if sealer.seal(u64::from(sel), &mut sealed).is_ok() {
            let r = sealer.open(&mut sealed).expect("own message must open");
            assert_eq!(&sealed[r], wire);
        }
    }

    let algo = SigningAlgorithm::from_id(u16::from(sel % 3)).unwrap_or(SigningAlgorithm::AesCmac);
    let signer = Signer::new(algo, &key[..16]);
    let mut msg = wire.to_vec();
    let _ = signer.verify(&mut msg);
    assert_eq!(msg, wire, "verify must leave the message unchanged");
    signer.sign(&mut msg);
    if msg.len() >= 64 {
        assert!(signer.verify(&mut msg));
    }
});
