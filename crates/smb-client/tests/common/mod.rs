//! Test servers: the real `braid` binary with a generated config, and a private Samba
//! smbd from `scripts/samba-peer.sh`. Each is stopped when its handle drops.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const USER: &str = "alice";
pub const PASSWORD: &str = "alice-pw";

/// A running server with a share `data` whose directory on disk is `data_dir`.
pub struct Server {
    pub name: &'static str,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    child: Option<Child>,
    samba_dir: Option<PathBuf>,
    tmp: Option<PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = &self.samba_dir {
            let _ = samba_peer(self.addr.port(), dir).arg("down").env("WIPE", "1").output();
        }
        if let Some(t) = &self.tmp {
            let _ = std::fs::remove_dir_all(t);
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Finds the braid binary: $BRAID_BIN, then debug/release under $CARGO_TARGET_DIR or the
/// workspace target dir; builds it with `cargo build -p braid` if none exists.
fn braid_bin() -> PathBuf {
    if let Ok(p) = std::env::var("BRAID_BIN") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"));
    let find = || ["debug", "release"].iter().map(|p| target.join(p).join("braid")).find(|p| p.is_file());
    if let Some(p) = find() {
        return p;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo).args(["build", "-p", "braid"]).current_dir(workspace_root()).status().expect("run cargo build -p braid");
    assert!(st.success(), "cargo build -p braid failed");
    find().expect("braid binary not found after cargo build -p braid (set BRAID_BIN)")
}

fn wait_port(addr: SocketAddr, child: &mut Option<Child>) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        if let Some(c) = child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                panic!("server exited early: {st}");
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("server did not listen on {addr}");
}

fn assert_port_free(port: u16) {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(), "127.0.0.1:{port} is already in use by another process");
}

/// Starts braid on 127.0.0.1:`port` with share `data` (read-write) and user alice.
pub fn braid(port: u16) -> Server {
    assert_port_free(port);
    let bin = braid_bin();
    let tmp = std::env::temp_dir().join(format!("smb-client-test-braid-{port}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let data = tmp.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let conf = tmp.join("braid.toml");
    std::fs::write(
        &conf,
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nserver_name = \"BRAIDTEST\"\nmax_io_size = \"4M\"\nlog = \"warn\"\n\n\
             [[share]]\nname = \"data\"\npath = \"data\"\nread_only = false\n"
        ),
    )
    .unwrap();
    let mut add = Command::new(&bin)
        .args(["user", "add", USER, "--config"])
        .arg(&conf)
        .arg("--password-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run braid user add");
    add.stdin.take().unwrap().write_all(PASSWORD.as_bytes()).unwrap();
    assert!(add.wait().unwrap().success(), "braid user add failed");
    let log = std::fs::File::create(tmp.join("serve.log")).unwrap();
    let child = Command::new(&bin).arg("serve").arg("--config").arg(&conf).stdout(log.try_clone().unwrap()).stderr(log).spawn().expect("start braid");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = Some(child);
    wait_port(addr, &mut child);
    Server { name: "braid", addr, data_dir: data.canonicalize().unwrap(), child, samba_dir: None, tmp: Some(tmp) }
}

fn samba_peer(port: u16, dir: &Path) -> Command {
    let mut c = Command::new("bash");
    c.arg(workspace_root().join("scripts/samba-peer.sh")).env("PORT", port.to_string()).env("DIR", dir).env("USERS", format!("{USER}:{PASSWORD}"));
    c
}

/// Starts a private smbd on 127.0.0.1:`port`, or None (with a message) if smbd is missing.
pub fn samba(port: u16) -> Option<Server> {
    let has_smbd = Command::new("sh").args(["-c", "command -v smbd"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !has_smbd {
        eprintln!("SKIPPED: smbd is not installed, the Samba half of the tests did not run (scripts/install-deps.sh)");
        return None;
    }
    let dir = PathBuf::from(format!("/dev/shm/smb-client-test-samba-{port}"));
    let out = samba_peer(port, &dir).arg("up").output().expect("run scripts/samba-peer.sh");
    if !out.status.success() {
        panic!("samba-peer.sh up failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut none = None;
    wait_port(addr, &mut none);
    Some(Server { name: "samba", addr, data_dir: dir.join("shares/data"), child: None, samba_dir: Some(dir), tmp: None })
}
