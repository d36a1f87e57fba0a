//! Helpers shared by the integration tests that drive the real `braid` binary.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A number unique within this test process (for directory names).
pub fn unique() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Connects to braid on loopback, failing within a few seconds rather than hanging.
pub fn connect(port: u16) -> TcpStream {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"))
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

/// The `braid` binary: `BRAID_BIN`, else the one built beside this test, else the
/// workspace's debug or release build.
pub fn braid_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("BRAID_BIN") {
        return PathBuf::from(p);
    }
    let mut candidates = Vec::new();
    // target/<profile>/deps/this-test -> target/<profile>/braid
    if let Some(profile_dir) = std::env::current_exe().ok().and_then(|e| e.parent()?.parent().map(Path::to_path_buf)) {
        candidates.push(profile_dir.join("braid"));
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    candidates.push(target.join("debug/braid"));
    candidates.push(target.join("release/braid"));
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("braid binary not found: build it with `cargo build -p braid` or set BRAID_BIN"))
}

/// Adds a user to a config file with `braid user add --password-stdin`.
pub fn add_user(bin: &Path, config: &Path, user: &str, password: &str) {
    use std::io::Write;
    let mut add = Command::new(bin)
        .args(["user", "add", user, "--config"])
        .arg(config)
        .arg("--password-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} (cargo build -p braid, or set BRAID_BIN)", bin.display()));
    add.stdin.take().expect("stdin").write_all(format!("{password}\n").as_bytes()).expect("password");
    assert!(add.wait().expect("braid user add").success(), "braid user add failed");
}

/// Runs `braid serve --config CONFIG` with its output in `log`, and returns once it accepts
/// connections on `port` (panicking with the log after 10 s).
pub fn serve(bin: &Path, config: &Path, log: &Path, port: u16) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    let mut child = Command::new(bin)
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("start braid");
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // A bounded connect: a dropped SYN must not stall the test for minutes.
    while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("braid did not listen on port {port}; log:\n{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}
