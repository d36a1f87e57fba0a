//! The cost of admission itself, without a server around it: nanoseconds per `admit` on an
//! unlimited share, and on a share whose every limit is far above what is asked (each bucket
//! is checked, nothing ever waits). The ceiling experiment behind BENCHMARKS.md's
//! "cost of enforcement": `cargo run --release -p braid-qos --example admit_cost`.

use std::time::Instant;

use braid_qos::{Io, Limits, ShareLimiter};

const N: u64 = 5_000_000;

async fn per_admit(limits: Limits, io: Io) -> f64 {
    let share = ShareLimiter::new("bench", limits);
    let client = share.client(1, "bench");
    let start = Instant::now();
    for i in 0..N {
        share.admit(&client, Some(i & 1023), io).await;
    }
    start.elapsed().as_nanos() as f64 / N as f64
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let far = Limits {
        iops: Some(1 << 40),
        burst_iops: Some(1 << 41),
        burst_credits: Some(1 << 42),
        throughput: Some(1 << 50),
        ingress: Some(1 << 50),
        egress: Some(1 << 50),
        max_file_iops: Some(1 << 40),
        max_file_throughput: Some(1 << 50),
    };
    for (name, io) in [("4 KiB read", Io::Read(4096)), ("1 MiB write", Io::Write(1 << 20)), ("metadata", Io::Meta)] {
        let free = rt.block_on(per_admit(Limits::default(), io));
        let held = rt.block_on(per_admit(far.clone(), io));
        println!("{name:12} unlimited {free:6.1} ns/admit   far-above limits {held:6.1} ns/admit");
    }
}
