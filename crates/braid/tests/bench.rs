//! `braid bench` end to end: a real `braid serve` on a loopback port, a short verified
//! mixed workload with JSON output, a sweep, the per-second timeline (SMB and NFS), and the
//! error lines for a wrong password and an unreachable host.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");
/// Ports reserved for these tests.
const PORTS: std::ops::RangeInclusive<u16> = 4501..=4516;

struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
    /// The NFS port, when the share is also exported over NFS.
    nfs_port: Option<u16>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Our own child only.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free port of [`PORTS`] that no other test in this process has taken (tests run in
/// parallel, and a port checked free is only taken once the server binds it).
fn free_port() -> Option<u16> {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    loop {
        let p = PORTS.start() + NEXT.fetch_add(1, Ordering::Relaxed);
        if p > *PORTS.end() {
            return None;
        }
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return Some(p);
        }
    }
}

/// Starts `braid serve` with user alice/pw-alice and share `data`, or None (with a message)
/// when that is not possible here.
fn start_server(tag: &str) -> Option<Server> {
    start_server_with(tag, false)
}

/// [`start_server`], with the share also exported over NFS (`nfs`).
fn start_server_with(tag: &str, nfs: bool) -> Option<Server> {
    let (Some(port), Some(nfs_port)) = (free_port(), if nfs { free_port().map(Some) } else { Some(None) }) else {
        eprintln!("skipping: no free port in {PORTS:?}");
        return None;
    };
    let dir = std::env::temp_dir().join(format!("braid-bench-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let cfg = dir.join("braid.toml");
    let (nfs_listen, export) = match nfs_port {
        Some(p) => {
            (format!("nfs_listen = [\"127.0.0.1:{p}\"]\nnfs_portmapper = \"off\"\nstate_dir = \"state\"\n"), "nfs = true\nnfs_root_squash = false\n")
        }
        None => (String::new(), ""),
    };
    std::fs::write(&cfg, format!("[server]\nlisten = [\"127.0.0.1:{port}\"]\n{nfs_listen}\n[[share]]\nname = \"data\"\npath = \"data\"\n{export}"))
        .unwrap();
    let mut add = Command::new(BRAID)
        .args(["user", "add", "alice", "--config"])
        .arg(&cfg)
        .arg("--password-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(b"pw-alice\n").unwrap();
    assert!(add.wait().unwrap().success());
    let child = Command::new(BRAID).args(["serve", "--config"]).arg(&cfg).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let server = Server { child, dir, port, nfs_port };
    let addr = SocketAddr::from(([127, 0, 0, 1], nfs_port.unwrap_or(port)));
    let t0 = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if t0.elapsed() > Duration::from_secs(10) {
            eprintln!("skipping: braid serve did not listen on {addr}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(server)
}

fn bench(args: &[&str]) -> Output {
    Command::new(BRAID).arg("bench").args(args).env_remove("BRAID_BENCH_PASSWORD").stdin(Stdio::null()).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A `--json` run that succeeded with I/O done and no errors.
fn assert_clean_run(out: &Output) {
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = text(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["errors"], 0, "{v}");
    assert!(v["iops"].as_f64().unwrap() > 0.0, "{v}");
}

/// Large unsigned reads take the server's sendfile path; many in flight at once, every byte
/// checked.
#[test]
fn verified_large_blocks_zero_copy_path() {
    let Some(srv) = start_server("verify-large") else { return };
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", srv.port);
    let out = bench(&["-d", "2", "-t", "2", "-o", "8", "-w", "30", "-r", "-b", "256k", "-c", "8m", "-f", "2", "--verify", "--json", &url]);
    assert_clean_run(&out);
}

#[test]
fn verified_mixed_workload_reports_json() {
    let Some(srv) = start_server("verify") else { return };
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", srv.port);
    let out = bench(&["-d", "2", "-t", "2", "-o", "4", "-w", "50", "-b", "8k", "-c", "2m", "-f", "2", "--verify", "--json", &url]);
    let stderr = text(&out.stderr);
    if stderr.contains("not supported") || stderr.contains("not implemented") {
        eprintln!("skipping: smb-client is not ready: {stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let stdout = text(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["errors"], 0, "{v}");
    assert!(v["iops"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["mib_per_s"].as_f64().unwrap() > 0.0);
    for k in ["p50", "p90", "p99", "p999", "max"] {
        assert!(v["latency_us"][k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
    assert!(v["cpu_seconds"].is_number());
    assert_eq!(
        (v["block_size"].as_u64(), v["threads"].as_u64(), v["queue_depth"].as_u64(), v["write_pct"].as_u64()),
        (Some(8192), Some(2), Some(4), Some(50))
    );
    assert_eq!(v["verify"], true);
    assert!(!stdout.contains("pw-alice"), "password leaked");
    let on_disk = std::fs::metadata(srv.dir.join("data/braid-bench/file1.dat")).unwrap();
    assert_eq!(on_disk.len(), 2 << 20);

    // Metadata mix on the same server.
    let out = bench(&["-d", "1", "-t", "2", "--meta", "create,open,close,delete,stat", "--json", &url]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(v["errors"], 0, "{v}");
    assert!(v["by_op"]["create"]["count"].as_u64().unwrap() > 0, "{v}");

    // A small sweep writes CSV and charts.
    let outdir = srv.dir.join("sweep");
    let out = Command::new(BRAID)
        .args(["bench", "sweep", "--bs", "4k,64k", "--rw", "100:0,50:50", "-d", "0.5", "-c", "1m", "--out"])
        .arg(&outdir)
        .arg(&url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(outdir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    let png = std::fs::read(outdir.join("iops_vs_bs__rw100-0.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(std::fs::read_to_string(outdir.join("mib_per_s_vs_rw__bs64k.svg")).unwrap().starts_with("<svg"));
}

/// `--clients`: more clients than Braid admits from one address (256), each from its own
/// loopback address, every byte checked; the JSON carries the fairness figures.
#[test]
fn many_clients_from_their_own_addresses() {
    let Some(srv) = start_server("clients") else { return };
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", srv.port);
    let args = ["--clients", "300", "--ios-per-open", "4", "-w", "30", "-c", "2m", "-f", "2"];
    let out = bench(&[&args[..], &["--source-ips", "127.3.0.1-127.3.1.44", "-d", "2", "--verify", "--json", &url]].concat());
    assert_clean_run(&out);
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    let f = &v["fairness"];
    assert_eq!(f["clients"], 300, "{v}");
    assert_eq!(f["per_client_ops"].as_array().map(Vec::len), Some(300));
    assert!(f["min_ops"].as_u64().unwrap() > 0, "a client did nothing: {f}");
    assert!(f["jain"].as_f64().unwrap() > 0.0 && f["slowest_to_median"].as_f64().unwrap() > 0.0, "{f}");
    for op in ["open", "read", "write", "close"] {
        assert!(v["by_op"][op]["count"].as_u64().unwrap() > 0, "{op}: {v}");
    }
    // From one address, the same run meets the per-address limit.
    let out = bench(&[&args[..], &["-d", "1", "--json", &url]].concat());
    assert!(!out.status.success(), "300 clients from one address were all admitted");
}

/// `--durable`: the metadata mix and a verified single-thread data run with durable v2 opens
/// (the server's on-disk files are the same); data I/O over several handles of one file is
/// refused before anything runs.
#[test]
fn durable_opens_meta_mix_and_verified_data() {
    let Some(srv) = start_server("durable") else { return };
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", srv.port);
    let out = bench(&["-d", "1", "-t", "2", "--durable", "--meta", "create,open,close,delete,stat", "--json", &url]);
    assert_clean_run(&out);
    let out = bench(&["-d", "1", "-t", "1", "-o", "4", "-w", "50", "-b", "8k", "-c", "1m", "--durable", "--verify", "--json", &url]);
    assert_clean_run(&out);
    let out = bench(&["-d", "1", "-t", "2", "--durable", "--json", &url]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--durable on data I/O needs -t 1"), "{}", text(&out.stderr));
}

/// A loopback TCP proxy to `upstream` whose connections [`Proxy::cut`] ends at once (both
/// directions shut down), as a network failure would; new connections are forwarded again.
/// It counts the client's requests flagged SMB2_FLAGS_REPLAY_OPERATION.
struct Proxy {
    port: u16,
    live: Arc<Mutex<Vec<TcpStream>>>,
    replays: Arc<std::sync::atomic::AtomicUsize>,
}

/// Forwards the client's frames (a 4-byte length, then the message) to the server, counting
/// those whose (first) SMB2 header has SMB2_FLAGS_REPLAY_OPERATION (0x2000_0000) in Flags.
fn forward_counting_replays(mut from: TcpStream, mut to: TcpStream, replays: &std::sync::atomic::AtomicUsize) {
    use std::io::{Read, Write};
    let mut frame = Vec::new();
    loop {
        let mut len = [0u8; 4];
        if from.read_exact(&mut len).is_err() {
            return;
        }
        frame.resize(u32::from_be_bytes(len) as usize & 0xFF_FFFF, 0);
        if from.read_exact(&mut frame).is_err() {
            return;
        }
        if frame.starts_with(b"\xfeSMB") && frame.get(19).is_some_and(|f| f & 0x20 != 0) {
            replays.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if to.write_all(&len).and_then(|_| to.write_all(&frame)).is_err() {
            return;
        }
    }
}

impl Proxy {
    fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let live = Arc::new(Mutex::new(Vec::new()));
        let conns = live.clone();
        let replays = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = replays.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { return };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let pipe = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                };
                let (from, to, counted) = (client.try_clone().unwrap(), server.try_clone().unwrap(), counted.clone());
                std::thread::spawn(move || {
                    forward_counting_replays(from, to.try_clone().unwrap(), &counted);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
                pipe(server.try_clone().unwrap(), client.try_clone().unwrap());
                conns.lock().unwrap().extend([client, server]);
            }
        });
        Proxy { port, live, replays }
    }

    /// Requests flagged as replays forwarded so far.
    fn replays(&self) -> usize {
        self.replays.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Ends every connection made so far; returns how many pairs there were.
    fn cut(&self) -> usize {
        let mut conns = self.live.lock().unwrap();
        for c in conns.iter() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        let n = conns.len() / 2;
        conns.clear();
        n
    }
}

/// A verified `--durable` run on one channel whose TCP connection is cut mid-run: the session
/// reconnects, reclaims its open (DH2C), retries what was in flight as replays (flagged
/// SMB2_FLAGS_REPLAY_OPERATION, which nothing sends before the cut), and every byte read is
/// checked; the report counts the reconnect.
#[test]
fn durable_run_survives_a_cut_connection() {
    let Some(srv) = start_server("durable-cut") else { return };
    let proxy = Proxy::start(srv.port);
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", proxy.port);
    let child = Command::new(BRAID)
        .args(["bench", "-d", "3", "-t", "1", "-o", "8", "-w", "50", "-b", "64k", "-c", "4m", "--durable", "--verify", "--json", &url])
        .env_remove("BRAID_BENCH_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(proxy.replays(), 0, "a replay before any connection was lost");
    assert_eq!(proxy.cut(), 1, "the run should use one connection");
    let out = child.wait_with_output().unwrap();
    assert_clean_run(&out);
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(v["reconnects"], 1, "{v}");
    assert!(proxy.replays() > 0, "the requests in flight at the cut were not retried as replays: {}", text(&out.stderr));
    assert_eq!(v["verify"], true);
    assert!(v["by_op"]["read"]["count"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn wrong_password_and_unreachable_host_are_one_line() {
    let Some(srv) = start_server("errors") else { return };
    let out = bench(&["-d", "1", &format!("smb://alice:wrong@127.0.0.1:{}/data", srv.port)]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("braid: error: smb://alice@127.0.0.1:") && err.contains("LOGON_FAILURE") && err.contains("wrong user name or password"),
        "{err}"
    );
    assert!(!err.contains("wrong@"), "password leaked: {err}");

    let out = bench(&["-d", "1", &format!("smb://alice:pw-alice@127.0.0.1:{}/nosuch", srv.port)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.starts_with("braid: error: ") && err.contains("no such share") && err.lines().count() == 1, "{err}");

    // A port nobody listens on: bind one, note it, release it.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = bench(&["-d", "1", &format!("smb://alice:pw@127.0.0.1:{dead}/data")]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.starts_with(&format!("braid: error: smb://alice@127.0.0.1:{dead}/data: cannot connect")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let out = bench(&["-b", "64k", "-c", "4k", "smb://alice:pw@127.0.0.1:1/data"]);
    assert_eq!(text(&out.stderr), "braid: error: file size 4k is smaller than the block size 64k\n");
    let out = bench(&["-t", "zero", "smb://alice:pw@127.0.0.1:1/data"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("braid: error: -t \"zero\""));
}

/// The `timeline` array of a `--json` report and the CSV `--timeline` wrote agree with each
/// other and add up to the report's totals: `seconds` rows of one second each.
fn check_timeline(v: &serde_json::Value, csv: &str, seconds: usize) {
    let rows: Vec<Vec<f64>> = csv.lines().skip(1).map(|l| l.split(',').map(|f| f.parse::<f64>().unwrap()).collect()).collect();
    assert_eq!(csv.lines().next(), Some("second,iops,read_iops,write_iops,mib_per_s,read_mib_per_s,write_mib_per_s"));
    assert_eq!(rows.len(), seconds, "{csv}");
    let timeline = v["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), seconds, "{v}");
    for (i, (row, point)) in rows.iter().zip(timeline).enumerate() {
        assert_eq!(row[0], i as f64);
        assert_eq!(row[1], point["iops"].as_f64().unwrap(), "{csv}");
        assert_eq!(row[2] + row[3], row[1], "read + write = total: {csv}");
        assert!(row[1] > 0.0, "every second saw I/O: {csv}");
    }
    let sum = |c: usize| rows.iter().map(|r| r[c]).sum::<f64>();
    let count = |op: &str| v["by_op"][op]["count"].as_u64().unwrap_or(0) as f64;
    assert_eq!(sum(1), v["ops"].as_u64().unwrap() as f64, "{csv}\n{v}");
    assert_eq!((sum(2), sum(3)), (count("read"), count("write")), "{csv}\n{v}");
    let mib = v["bytes"].as_u64().unwrap() as f64 / 1048576.0;
    // Each cell is rounded to 1/1000 MiB.
    assert!((sum(4) - mib).abs() <= 0.001 * seconds as f64 + 1e-9, "{} vs {mib}", sum(4));
}

/// Width and height of a PNG file, after checking its signature, header and end chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 1000, "{} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

/// `--timeline` over SMB with several workers and a warm-up: one CSV row per measured
/// second, the rows summing to the report, the same series in the JSON, and a PNG chart.
#[test]
fn timeline_csv_json_and_chart_over_smb() {
    let Some(srv) = start_server("timeline") else { return };
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", srv.port);
    let (csv, png) = (srv.dir.join("t.csv"), srv.dir.join("t.png"));
    let out = bench(&[
        "-d",
        "3",
        "-W",
        "1",
        "-t",
        "2",
        "-o",
        "4",
        "-w",
        "40",
        "-c",
        "4m",
        "--timeline",
        csv.to_str().unwrap(),
        "--timeline-chart",
        png.to_str().unwrap(),
        "--json",
        &url,
    ]);
    assert_clean_run(&out);
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    check_timeline(&v, &std::fs::read_to_string(&csv).unwrap(), 3);
    assert!(count_nonzero(&v, "write_iops") == 3, "{v}");
    assert_eq!(png_size(&std::fs::read(&png).unwrap()), (1000, 720));
    assert!(text(&out.stderr).contains("t.png"), "{}", text(&out.stderr));

    // `braid bench chart` draws the CSV again, with reference lines.
    let redrawn = srv.dir.join("redrawn.png");
    let out = Command::new(BRAID)
        .args(["bench", "chart", "--title", "again", "--iops-marks", "100,200", "--out"])
        .arg(&redrawn)
        .arg(&csv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(png_size(&std::fs::read(&redrawn).unwrap()), (1000, 720));

    // Two targets: a file each; a bad directory is refused before anything runs.
    let base = srv.dir.join("two.svg");
    let out = bench(&["-d", "1", "-c", "1m", "--timeline", base.to_str().unwrap(), &url, &url]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for n in ["two-1.csv", "two-2.csv", "two-1.svg", "two-2.svg"] {
        assert!(srv.dir.join(n).is_file(), "{n}");
    }
    assert!(std::fs::read_to_string(srv.dir.join("two-2.svg")).unwrap().starts_with("<svg"));
    let out = bench(&["-d", "1", "--timeline", "/nonexistent-dir/t.csv", &url]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no such directory /nonexistent-dir"), "{}", text(&out.stderr));
}

fn count_nonzero(v: &serde_json::Value, key: &str) -> usize {
    v["timeline"].as_array().unwrap().iter().filter(|p| p[key].as_f64().unwrap() > 0.0).count()
}

/// `--timeline` over NFS with two connections: a .png name writes the chart and the CSV
/// beside it.
#[test]
fn timeline_over_nfs() {
    let Some(srv) = start_server_with("timeline-nfs", true) else { return };
    let url = format!("nfs://127.0.0.1:{}/data", srv.nfs_port.unwrap());
    let png = srv.dir.join("nfs.png");
    let out = bench(&[
        "-d",
        "2",
        "-t",
        "2",
        "-o",
        "2",
        "-b",
        "64k",
        "-s",
        "-c",
        "4m",
        "--nconnect",
        "2",
        "--timeline",
        png.to_str().unwrap(),
        "--json",
        &url,
    ]);
    assert_clean_run(&out);
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    check_timeline(&v, &std::fs::read_to_string(srv.dir.join("nfs.csv")).unwrap(), 2);
    assert_eq!(count_nonzero(&v, "write_iops"), 0);
    assert_eq!(png_size(&std::fs::read(&png).unwrap()), (1000, 720));
}

/// A private Samba smbd (scripts/samba-peer.sh) for side-by-side runs; stopped on drop.
struct SambaPeer {
    port: u16,
    dir: PathBuf,
}

impl Drop for SambaPeer {
    fn drop(&mut self) {
        let _ =
            Command::new("bash").arg(samba_script()).arg("down").env("PORT", self.port.to_string()).env("DIR", &self.dir).env("WIPE", "1").output();
    }
}

fn samba_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/samba-peer.sh")
}

/// Starts the Samba peer with user alice/pw-alice, or None (with a message) when smbd is not
/// installed or cannot start here.
fn start_samba() -> Option<SambaPeer> {
    if Command::new("smbd").arg("--version").output().is_err() {
        eprintln!("skipping: smbd is not installed");
        return None;
    }
    let port = free_port()?;
    let dir = PathBuf::from(format!("/dev/shm/braid-bench-samba-{}", std::process::id()));
    let out = Command::new("bash")
        .arg(samba_script())
        .arg("up")
        .env("PORT", port.to_string())
        .env("DIR", &dir)
        .env("USERS", "alice:pw-alice")
        .output()
        .ok()?;
    let peer = SambaPeer { port, dir };
    if !out.status.success() {
        eprintln!("skipping: samba peer did not start: {}", text(&out.stderr));
        return None;
    }
    Some(peer)
}

/// The same verified workload against Samba: the bench and its client work with an
/// independent server, not only with Braid.
#[test]
fn verified_workload_against_samba() {
    let Some(peer) = start_samba() else { return };
    let url = format!("smb://alice:pw-alice@127.0.0.1:{}/data", peer.port);
    let out = bench(&["-d", "2", "-t", "2", "-o", "4", "-w", "50", "-r", "-b", "64k", "-c", "4m", "-f", "2", "--verify", "--json", &url]);
    assert_clean_run(&out);
}

/// LOCKs seen per file handle.
type LocksPerFile = Arc<Mutex<std::collections::HashMap<Vec<u8>, u64>>>;

/// A stand-in NLM v4 service on a loopback port (the NLM client is tested against the real
/// nfs-ganesha by bench/nlm-compare.sh): answers every LOCK and UNLOCK with `stat` and the
/// call's cookie, and counts the LOCKs per file handle.
fn fake_nlm(stat: nfs_wire::nlm4::Nlm4Stats) -> (u16, LocksPerFile) {
    use nfs_wire::nlm4::{Nlm4Args, Nlm4Proc, Nlm4Res};
    use nfs_wire::record::{reserve_mark, set_mark, RecordReader};
    use nfs_wire::rpc::{decode_call, encode_accepted, AcceptStat};
    use std::io::Read;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let locks = Arc::new(Mutex::new(std::collections::HashMap::new()));
    let counts = locks.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let (Ok(mut s), counts) = (s, counts.clone()) else { return };
            std::thread::spawn(move || {
                let (mut rr, mut buf) = (RecordReader::new(1 << 20), vec![0u8; 64 << 10]);
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    rr.feed(&buf[..n]);
                    while let Ok(Some(rec)) = rr.next_record() {
                        let (hdr, args) = decode_call(&rec).unwrap();
                        assert_eq!((hdr.prog, hdr.vers), (100_021, 4));
                        let cookie = match Nlm4Args::decode(Nlm4Proc::from_u32(hdr.proc_).unwrap(), &mut nfs_wire::XdrReader::new(args)).unwrap() {
                            Nlm4Args::Lock(a) => {
                                *counts.lock().unwrap().entry(a.alock.fh.0.clone()).or_insert(0) += 1;
                                a.cookie
                            }
                            Nlm4Args::Unlock(a) => a.cookie,
                            other => panic!("unexpected {other:?}"),
                        };
                        let mut out = Vec::new();
                        let at = reserve_mark(&mut out);
                        encode_accepted(hdr.xid, AcceptStat::Success, &mut out);
                        Nlm4Res { cookie, stat }.encode(&mut nfs_wire::XdrWriter::new(&mut out));
                        set_mark(&mut out, at);
                        if s.write_all(&out).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, locks)
}

/// `--nlm-lock`: files made over Braid's NFS, locks taken at an NLM port; a pair is one
/// operation, and each client locks its own file.
#[test]
fn nlm_lock_pairs_on_files_made_over_nfs() {
    let Some(srv) = start_server_with("nlm", true) else { return };
    let url = format!("nfs://127.0.0.1:{}/data", srv.nfs_port.unwrap());
    let (nlm, locks) = fake_nlm(nfs_wire::nlm4::Nlm4Stats::Granted);
    let out = bench(&["--nlm-lock", "--clients", "3", "--nlm-port", &nlm.to_string(), "-d", "1", "--json", &url]);
    assert_clean_run(&out);
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(v["nlm_lock"], true);
    assert_eq!(v["target"], format!("{url} (NLM 127.0.0.1:{nlm})"));
    assert_eq!(v["by_op"].as_object().unwrap().keys().collect::<Vec<_>>(), ["lock+unlock"]);
    assert_eq!(v["fairness"]["clients"], 3);
    for i in 0..3 {
        assert!(srv.dir.join(format!("data/braid-bench/lock{i}.dat")).is_file());
    }
    // Three files, each locked by its client only; every measured pair was a LOCK sent.
    let locks = locks.lock().unwrap();
    assert_eq!(locks.len(), 3, "{locks:?}");
    assert!(locks.values().sum::<u64>() >= v["ops"].as_u64().unwrap());
}

#[test]
fn nlm_lock_refusals_and_bad_flags_are_one_line() {
    let Some(srv) = start_server_with("nlm-errors", true) else { return };
    let url = format!("nfs://127.0.0.1:{}/data", srv.nfs_port.unwrap());
    let (nlm, _) = fake_nlm(nfs_wire::nlm4::Nlm4Stats::DeniedGracePeriod);
    let out = bench(&["--nlm-lock", "--nlm-port", &nlm.to_string(), "-d", "1", &url]);
    let err = text(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(1), 1), "{err}");
    assert!(err.contains("client 0 of 1: NLM4 LOCK to 127.0.0.1:") && err.contains("NLM4_DENIED_GRACE_PERIOD"), "{err}");

    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = bench(&["--nlm-lock", "--nlm-port", &dead.to_string(), "-d", "1", &url]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains(&format!("NLM: cannot connect to 127.0.0.1:{dead}")), "{err}");

    let out = bench(&["--nlm-lock", "smb://alice:pw@127.0.0.1:1/data"]);
    assert!(text(&out.stderr).contains("the targets must be nfs:// URLs"), "{}", text(&out.stderr));
    let out = bench(&["--nlm-port", "4045", &url]);
    assert!(text(&out.stderr).contains("--nlm-lock"), "{}", text(&out.stderr));
    let out = bench(&["--nlm-lock", "-t", "2", &url]);
    assert!(text(&out.stderr).contains("cannot be used with"), "{}", text(&out.stderr));
}
