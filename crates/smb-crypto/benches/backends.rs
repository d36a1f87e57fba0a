//! Raw backend comparison behind the choice in docs/decisions.md
//! ("Crypto backends: aws-lc-rs for GCM, GMAC and CMAC; RustCrypto for CCM and HMAC").
//!
//! Each case processes one 1 MiB buffer in place, the way smb-crypto uses the
//! primitive: seal+open with a detached tag for the AEADs (two passes),
//! one MAC over 1 MiB for GMAC / HMAC-SHA256 / CMAC. `rustcrypto/*` and
//! `aws-lc-rs/*` run the same operation so the numbers compare directly.

use aes::Aes128;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm, Nonce};
use aws_lc_rs::aead::{self as lc_aead, Aad, LessSafeKey, UnboundKey};
use aws_lc_rs::{cmac as lc_cmac, hmac as lc_hmac};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const LEN: usize = 1 << 20;
/// A typical small signed SMB2 message (CREATE / CLOSE / QUERY_INFO size):
/// shows the fixed per-message cost of each backend.
const SMALL: usize = 256;

fn data() -> Vec<u8> {
    (0..LEN).map(|i| (i * 31 % 251) as u8).collect()
}

fn bench_aead(c: &mut Criterion) {
    let mut g = c.benchmark_group("aead_seal_open_1MiB");
    g.throughput(Throughput::Bytes(LEN as u64));
    let aad = [7u8; 32];
    let nonce = [9u8; 12];

    let mut buf = data();
    let k = Aes128Gcm::new_from_slice(&[1; 16]).unwrap();
    g.bench_function("rustcrypto/aes-128-gcm", |b| {
        b.iter(|| {
            let tag = k.encrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, black_box(&mut buf)).unwrap();
            k.decrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, black_box(&mut buf), &tag).unwrap();
        })
    });
    let k = Aes256Gcm::new_from_slice(&[1; 32]).unwrap();
    g.bench_function("rustcrypto/aes-256-gcm", |b| {
        b.iter(|| {
            let tag = k.encrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, black_box(&mut buf)).unwrap();
            k.decrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, black_box(&mut buf), &tag).unwrap();
        })
    });
    for (name, alg, klen) in [("aws-lc-rs/aes-128-gcm", &lc_aead::AES_128_GCM, 16), ("aws-lc-rs/aes-256-gcm", &lc_aead::AES_256_GCM, 32)] {
        let k = LessSafeKey::new(UnboundKey::new(alg, &vec![1; klen]).unwrap());
        g.bench_function(name, |b| {
            b.iter(|| {
                let n = lc_aead::Nonce::assume_unique_for_key(nonce);
                let tag = k.seal_in_place_separate_tag(n, Aad::from(&aad), black_box(&mut buf)).unwrap();
                let n = lc_aead::Nonce::assume_unique_for_key(nonce);
                k.open_in_place_separate_tag(n, Aad::from(&aad), tag.as_ref(), black_box(&mut buf)).unwrap();
            })
        });
    }
    g.finish();
}

fn bench_mac(c: &mut Criterion) {
    for len in [LEN, SMALL] {
        bench_mac_len(c, len);
    }
}

fn bench_mac_len(c: &mut Criterion, len: usize) {
    let mut g = c.benchmark_group(if len == LEN { "mac_1MiB".to_string() } else { format!("mac_{len}B") });
    g.throughput(Throughput::Bytes(len as u64));
    let mut msg = data();
    msg.truncate(len);
    let nonce = [9u8; 12];

    let k = Aes128Gcm::new_from_slice(&[1; 16]).unwrap();
    g.bench_function("rustcrypto/aes-gmac", |b| b.iter(|| k.encrypt_in_place_detached(Nonce::from_slice(&nonce), black_box(&msg), &mut []).unwrap()));
    let k = LessSafeKey::new(UnboundKey::new(&lc_aead::AES_128_GCM, &[1; 16]).unwrap());
    g.bench_function("aws-lc-rs/aes-gmac", |b| {
        b.iter(|| {
            let n = lc_aead::Nonce::assume_unique_for_key(nonce);
            k.seal_in_place_separate_tag(n, Aad::from(black_box(&msg[..])), &mut []).unwrap()
        })
    });

    let k = <Hmac<Sha256> as Mac>::new_from_slice(&[1; 16]).unwrap();
    g.bench_function("rustcrypto/hmac-sha256", |b| {
        b.iter(|| {
            let mut m = k.clone();
            m.update(black_box(&msg));
            m.finalize().into_bytes()
        })
    });
    let k = lc_hmac::Key::new(lc_hmac::HMAC_SHA256, &[1; 16]);
    g.bench_function("aws-lc-rs/hmac-sha256", |b| b.iter(|| lc_hmac::sign(&k, black_box(&msg))));

    let k = <cmac::Cmac<Aes128> as KeyInit>::new_from_slice(&[1; 16]).unwrap();
    g.bench_function("rustcrypto/aes-cmac", |b| {
        b.iter(|| {
            let mut m = k.clone();
            m.update(black_box(&msg));
            m.finalize().into_bytes()
        })
    });
    let k = lc_cmac::Key::new(lc_cmac::AES_128, &[1; 16]).unwrap();
    g.bench_function("aws-lc-rs/aes-cmac", |b| b.iter(|| lc_cmac::sign(&k, black_box(&msg)).unwrap()));
    g.finish();
}

criterion_group!(benches, bench_aead, bench_mac);
criterion_main!(benches);
