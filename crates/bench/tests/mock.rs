//! The engine end to end against the in-memory mock target.

use std::time::Duration;

use braid_bench::session::mock::{MockConfig, MockTarget};
use braid_bench::session::{BenchFile, OpenMode, Session};
use braid_bench::{parse_meta_mix, run_sweep, run_target, table, BenchError, SweepSpec, Workload};

fn quick() -> Workload {
    Workload { duration_s: 0.3, file_size: 256 << 10, threads: 2, queue_depth: 4, ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_with_verify() {
    let t = MockTarget::new("mock", MockConfig { delay: Some(Duration::from_micros(50)), ..Default::default() });
    let wl = Workload { write_pct: 50, verify: true, files: 2, warmup_s: 0.1, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.errors, 0);
    assert!(r.ops > 10, "{r:?}");
    assert!(r.by_op.contains_key("read") && r.by_op.contains_key("write"));
    assert!(r.latency_us.p50 >= 50.0, "{:?}", r.latency_us);
    assert_eq!(t.contents("braid-bench/file1.dat").unwrap().len(), 256 << 10);
    let text = table(&[r]);
    assert!(text.contains("mock"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_reads_reuse_files() {
    let t = MockTarget::new("mock", MockConfig::default());
    let wl = Workload { random: false, block_size: 64 << 10, ..quick() };
    run_target(&t, &wl, false).await.unwrap();
    let writes = t.writes();
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(t.writes(), writes, "existing big-enough files are not rewritten");
    assert_eq!(r.bytes, r.ops * (64 << 10));
    assert_eq!(r.by_op.keys().collect::<Vec<_>>(), vec!["read"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_catches_corruption() {
    let t = MockTarget::new("mock", MockConfig { corrupt_after_writes: Some(70), ..Default::default() });
    let wl = Workload { write_pct: 50, verify: true, file_size: 64 << 10, ..quick() };
    let e = run_target(&t, &wl, false).await.unwrap_err();
    assert!(matches!(e, BenchError::Verify(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("verify failed: file") && msg.contains("braid-bench/file0.dat"), "{msg}");
    assert_eq!(msg.lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_rotate_over_channels() {
    // One thread, one request in flight: its requests still go over every channel in turn.
    let t = MockTarget::new("mock", MockConfig { delay: Some(Duration::from_micros(100)), ..Default::default() });
    let wl = Workload { channels: 4, threads: 1, queue_depth: 1, write_pct: 50, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.errors, 0);
    let per = t.ops_per_channel();
    assert_eq!(per.len(), 4, "{per:?}");
    // Channel 0 also laid down the file; the others saw the rotation only.
    let (lo, hi) = (per[1..].iter().min().copied().unwrap(), per[1..].iter().max().copied().unwrap());
    assert!(lo > 10 && hi - lo <= 1, "{per:?}");
    assert!(per[0] >= lo, "{per:?}");
}

#[tokio::test]
async fn channels_not_supported_and_bad_input() {
    let t = MockTarget::new("mock", MockConfig { no_multichannel: true, ..Default::default() });
    let e = run_target(&t, &Workload { channels: 2, ..quick() }, false).await.unwrap_err();
    assert!(matches!(e, BenchError::NotSupported(_)));
    assert!(e.to_string().starts_with("--channels 2: mock:"), "{e}");
    let small = MockTarget::new("mock", MockConfig { max_io: Some(65536), ..Default::default() });
    let e = run_target(&small, &Workload { block_size: 1 << 20, file_size: 1 << 20, ..quick() }, false).await.unwrap_err();
    assert_eq!(e.to_string(), "block size 1m exceeds the server's largest I/O (64k)");
    let down = MockTarget::new("mock", MockConfig { connect_error: Some("connection refused".into()), ..Default::default() });
    assert_eq!(run_target(&down, &quick(), false).await.unwrap_err().to_string(), "mock: connection refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_mix() {
    let t = MockTarget::new("mock", MockConfig::default());
    let wl = Workload { meta: Some(parse_meta_mix("create,open,close,delete,stat,mkdir,rmdir").unwrap()), files: 4, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.errors, 0);
    for op in ["create", "open", "close", "delete", "stat", "mkdir", "rmdir"] {
        assert!(r.by_op.get(op).is_some_and(|o| o.count > 0), "{op}: {:?}", r.by_op.keys());
    }
    assert!(t.file_names().is_empty(), "cleaned up: {:?}", t.file_names().len());
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert!(json["by_op"]["stat"]["latency_us"]["p99"].is_number());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_lists_the_whole_directory_and_keeps_it() {
    let t = MockTarget::new("mock", MockConfig::default());
    let wl = Workload { meta: Some(parse_meta_mix("list,stat").unwrap()), files: 300, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.errors, 0, "every listing saw the 300 entries");
    assert!(r.by_op.get("list").is_some_and(|o| o.count > 0), "{:?}", r.by_op.keys());
    let names = t.file_names();
    assert_eq!(names.len(), 300, "only the listed directory is left");
    assert!(names.iter().all(|n| n.starts_with("braid-bench/list-300/")), "{:?}", &names[..3]);
    // The next run of the same size reuses it: a refill would truncate this file again.
    let f = t.open("braid-bench/list-300/e7", OpenMode::ReadWrite).await.unwrap();
    f.write(0, b"kept").await.unwrap();
    f.close().await.unwrap();
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!((r.errors, t.file_names().len()), (0, 300));
    assert_eq!(t.contents("braid-bench/list-300/e7").unwrap(), b"kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_writes_csv_and_charts() {
    let a = MockTarget::new("braid", MockConfig::default());
    let b = MockTarget::new("samba", MockConfig { delay: Some(Duration::from_micros(100)), ..Default::default() });
    let out = std::env::temp_dir().join(format!("braid-bench-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let spec = SweepSpec { write_pcts: vec![0, 30], block_sizes: vec![4096, 65536], channels: vec![1], threads: vec![1] };
    let base = Workload { duration_s: 0.1, file_size: 256 << 10, ..Default::default() };
    let mut seen = Vec::new();
    let (rows, files) = run_sweep(&[a, b], &base, &spec, &out, false, |r| seen.push(r.report.target.clone())).await.unwrap();
    assert_eq!(rows.len(), 8);
    // Interleaved and rotated: point 0 braid,samba; point 1 samba,braid.
    assert_eq!(&seen[..4], &["braid", "samba", "samba", "braid"]);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 9);
    assert!(csv.starts_with("target,read_pct,write_pct,block_size"));
    let pngs: Vec<_> = files.iter().filter(|p| p.extension().is_some_and(|e| e == "png")).collect();
    let svgs: Vec<_> = files.iter().filter(|p| p.extension().is_some_and(|e| e == "svg")).collect();
    // rw and bs vary: per variable 2 groups x 2 metrics.
    assert_eq!(pngs.len(), 8, "{files:?}");
    assert_eq!(svgs.len(), 8);
    assert!(out.join("iops_vs_bs__rw70-30.png").exists(), "{files:?}");
    for p in pngs {
        let data = std::fs::read(p).unwrap();
        assert_eq!(&data[..8], b"\x89PNG\r\n\x1a\n");
    }
    for s in svgs {
        assert!(std::fs::read_to_string(s).unwrap().starts_with("<svg"));
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// The per-second series adds up to the report's counts (warm-up excluded), a partial last
/// second counting as a rate over its half second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_adds_up_to_the_report() {
    let t = MockTarget::new("mock", MockConfig { delay: Some(Duration::from_micros(200)), ..Default::default() });
    let wl = Workload { write_pct: 30, duration_s: 1.5, warmup_s: 0.2, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.timeline.iter().map(|p| p.second).collect::<Vec<_>>(), [0, 1]);
    let count = |f: fn(&braid_bench::timeline::Point) -> f64| f(&r.timeline[0]) + f(&r.timeline[1]) * 0.5;
    assert_eq!(count(|p| p.iops).round() as u64, r.ops, "{:?}", r.timeline);
    assert_eq!(count(|p| p.read_iops).round() as u64, r.by_op["read"].count);
    assert_eq!(count(|p| p.write_iops).round() as u64, r.by_op["write"].count);
    let mib = count(|p| p.mib_per_s);
    assert!((mib - r.bytes as f64 / 1048576.0).abs() < 0.01, "{mib} vs {}", r.bytes);
    assert!(r.timeline.iter().all(|p| p.read_iops > 0.0 && p.write_iops > 0.0), "{:?}", r.timeline);

    let wl = Workload { meta: Some(parse_meta_mix("create,close,stat").unwrap()), duration_s: 1.0, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.timeline.len(), 1);
    assert_eq!(r.timeline[0].iops as u64, r.ops);
    assert_eq!((r.timeline[0].read_iops, r.timeline[0].mib_per_s), (0.0, 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_with_verify() {
    let t = MockTarget::new("mock", MockConfig { delay: Some(Duration::from_micros(50)), ..Default::default() });
    let wl = Workload { clients: 20, ios_per_open: 4, write_pct: 50, verify: true, files: 3, threads: 1, queue_depth: 1, ..quick() };
    let r = run_target(&t, &wl, false).await.unwrap();
    assert_eq!(r.errors, 0);
    for op in ["open", "read", "write", "close"] {
        assert!(r.by_op.contains_key(op), "no {op}: {:?}", r.by_op.keys());
    }
    // An open carries at most ios_per_open reads and writes.
    let (opens, ios) = (r.by_op["open"].count, r.by_op["read"].count + r.by_op["write"].count);
    assert!(ios <= 4 * opens + 20 && ios >= opens, "{opens} opens, {ios} I/Os");
    let f = r.fairness.clone().expect("fairness");
    assert_eq!(f.clients, 20);
    assert_eq!(f.per_client_ops.iter().sum::<u64>(), r.ops);
    assert!(f.min_ops > 0 && f.jain > 0.5 && f.jain <= 1.0, "{f:?}");
    assert!(table(&[r]).contains("fairness mock: 20 clients"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_verify_catches_corruption() {
    let t = MockTarget::new("mock", MockConfig { corrupt_after_writes: Some(200), ..Default::default() });
    let wl = Workload { clients: 8, write_pct: 50, verify: true, file_size: 64 << 10, threads: 1, queue_depth: 1, ..quick() };
    let e = run_target(&t, &wl, false).await.unwrap_err();
    assert!(matches!(e, BenchError::Verify(_)), "{e}");
}

#[tokio::test]
async fn many_clients_checks() {
    let t = MockTarget::new("mock", MockConfig::default());
    // The mock cannot pick a source address; the SMB target can.
    let wl = Workload { clients: 2, source_ips: Some("127.2.0.1-127.2.0.2".into()), threads: 1, queue_depth: 1, ..quick() };
    assert!(matches!(run_target(&t, &wl, false).await.unwrap_err(), BenchError::NotSupported(_)));
    assert!(Workload { clients: 2, ..quick() }.validate().is_err(), "-t 2 -o 4 with --clients");
    let wl = Workload { clients: 2, threads: 1, queue_depth: 1, ..quick() };
    assert!(Workload { source_ips: Some("bogus".into()), ..wl.clone() }.validate().is_err());
    assert!(Workload { ios_per_open: 0, ..wl.clone() }.validate().is_err());
    assert!(Workload { source_ips: Some("127.0.0.1".into()), clients: 0, ..quick() }.validate().is_err());
    // --verify needs a block of every file per client: 64 blocks, 100 clients.
    let wl = Workload { clients: 100, verify: true, file_size: 64 << 12, ..wl };
    assert!(run_target(&t, &wl, false).await.unwrap_err().to_string().contains("--verify"));
}
