//! Throughput of signing and sealing a 1 MiB SMB2 message per algorithm.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use smb_crypto::{Cipher, Sealer, Signer, SigningAlgorithm, TRANSFORM_HEADER_LEN};

const MSG_LEN: usize = 1 << 20;

/// A 1 MiB "message" with a plausible SMB2 header prefix.
fn message() -> Vec<u8> {
    let mut m: Vec<u8> = (0..MSG_LEN).map(|i| (i * 31 % 251) as u8).collect();
    m[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
    m[16..20].copy_from_slice(&0x9u32.to_le_bytes());
    m
}

fn bench_sign(c: &mut Criterion) {
    let mut g = c.benchmark_group("sign_verify_1MiB");
    g.throughput(Throughput::Bytes(MSG_LEN as u64));
    for algo in [SigningAlgorithm::HmacSha256, SigningAlgorithm::AesCmac, SigningAlgorithm::AesGmac] {
        let signer = Signer::new(algo, &[0x42; 16]);
        let mut msg = message();
        g.bench_with_input(BenchmarkId::from_parameter(format!("{algo:?}")), &(), |b, _| {
            b.iter(|| {
                signer.sign(black_box(&mut msg));
                assert!(signer.verify(black_box(&mut msg)));
            })
        });
    }
    g.finish();
}

fn bench_seal(c: &mut Criterion) {
    let mut g = c.benchmark_group("seal_open_1MiB");
    g.throughput(Throughput::Bytes(MSG_LEN as u64));
    for cipher in [Cipher::Aes128Ccm, Cipher::Aes128Gcm, Cipher::Aes256Ccm, Cipher::Aes256Gcm] {
        let key = vec![0x24; cipher.key_len()];
        let sealer = Sealer::new(cipher, &key).expect("valid key");
        let mut buf = vec![0u8; TRANSFORM_HEADER_LEN];
        buf.extend_from_slice(&message());
        g.bench_with_input(BenchmarkId::from_parameter(format!("{cipher:?}")), &(), |b, _| {
            b.iter(|| {
                sealer.seal(7, black_box(&mut buf)).expect("seal");
                sealer.open(black_box(&mut buf)).expect("open");
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_sign, bench_seal);
criterion_main!(benches);
