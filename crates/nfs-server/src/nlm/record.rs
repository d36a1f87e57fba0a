//! What the lock service keeps in `state_dir` across restarts: the NSM state number
//! (`nsm-state`, bumped on every start, odd while up, as NSM requires) and the log of lock
//! holders (`nlm-holders`): the client hosts that held locks, told of the restart by
//! SM_NOTIFY so they reclaim, and the files they held, which the grace period protects
//! from other protocols' new locks while the reclaims come in.
//!
//! A host line is synced when the host first takes a lock (as rpc.statd does before its
//! first SM_MON answer); file lines are appended unsynced (they survive the process dying,
//! and an operating system crash restarts the clients' view anyway). The log starts afresh
//! at each start; hosts that could not be told are carried into the next one.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use braid_filestate::FileKey;

const STATE_FILE: &str = "nsm-state";
const HOLDERS_FILE: &str = "nlm-holders";
/// Lines read back from a log at most (a damaged or hostile file cannot exhaust memory).
const MAX_LINES: usize = 1 << 20;

/// A client host that held locks: its caller name and its address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostRecord {
    pub name: Vec<u8>,
    pub addr: IpAddr,
}

/// What the previous run left.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Previous {
    pub hosts: Vec<HostRecord>,
    pub files: Vec<FileKey>,
}

/// The open log of this run.
#[derive(Debug)]
pub struct Record {
    log: Mutex<Log>,
    path: PathBuf,
}

#[derive(Debug)]
struct Log {
    file: File,
    hosts: HashSet<HostRecord>,
    files: HashSet<FileKey>,
}

/// Bumps the NSM state number in `dir` to the next odd number and returns it.
pub fn next_state(dir: &Path) -> std::io::Result<i32> {
    let path = dir.join(STATE_FILE);
    let old: i32 = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    // Odd while up; wrapping keeps it odd (i32::MAX is odd; MIN + 1 is odd).
    let new = if old % 2 != 0 { old.wrapping_add(2) } else { old.wrapping_add(1) };
    write_synced(&path, format!("{new}\n").as_bytes())?;
    Ok(new)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Reads what the previous run logged, and starts this run's log empty.
pub fn open(dir: &Path) -> std::io::Result<(Record, Previous)> {
    let path = dir.join(HOLDERS_FILE);
    let previous = std::fs::read_to_string(&path).map(|t| parse(&t)).unwrap_or_default();
    let file = OpenOptions::new().create(true).write(true).truncate(true).open(&path)?;
    let log = Log { file, hosts: HashSet::new(), files: HashSet::new() };
    Ok((Record { log: Mutex::new(log), path }, previous))
}

/// Parses a log; lines that do not parse are skipped (a torn last line after a crash).
pub fn parse(text: &str) -> Previous {
    let mut p = Previous::default();
    for line in text.lines().take(MAX_LINES) {
        let mut w = line.split(' ');
        match (w.next(), w.next(), w.next(), w.next()) {
            (Some("host"), Some(addr), Some(name), None) => {
                if let (Ok(addr), Some(name)) = (addr.parse(), hex::decode(name).ok()) {
                    let h = HostRecord { name, addr };
                    if !p.hosts.contains(&h) {
                        p.hosts.push(h);
                    }
                }
            }
            (Some("file"), Some(share), Some(id), None) => {
                if let (Ok(share), Ok(id)) = (share.parse(), id.parse()) {
                    if !p.files.contains(&(share, id)) {
                        p.files.push((share, id));
                    }
                }
            }
            _ => {}
        }
    }
    p
}

impl Record {
    /// Logs that `host` holds locks (synced), once per run.
    pub fn host(&self, host: &HostRecord) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.hosts.contains(host) {
            return;
        }
        let line = format!("host {} {}\n", host.addr, hex::encode(&host.name));
        if append(&mut log.file, line.as_bytes(), true, &self.path) {
            log.hosts.insert(host.clone());
        }
    }

    /// Logs that a lock is held on `key`, once per run.
    pub fn file(&self, key: FileKey) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.files.contains(&key) {
            return;
        }
        let line = format!("file {} {}\n", key.0, key.1);
        if append(&mut log.file, line.as_bytes(), false, &self.path) {
            log.files.insert(key);
        }
    }
}

/// Appends a line; false (and a warning) when it could not be written.
fn append(f: &mut File, line: &[u8], sync: bool, path: &Path) -> bool {
    let r = f.write_all(line).and_then(|()| if sync { f.sync_data() } else { Ok(()) });
    if let Err(e) = &r {
        tracing::warn!(path = %path.display(), error = %e, "cannot log a lock holder; a restart will not tell it to reclaim");
    }
    r.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_number_is_odd_and_grows() {
        let dir = std::env::temp_dir().join(format!("braid-nsm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(dir.join(STATE_FILE));
        assert_eq!(next_state(&dir).unwrap(), 1);
        assert_eq!(next_state(&dir).unwrap(), 3);
        std::fs::write(dir.join(STATE_FILE), "8\n").unwrap();
        assert_eq!(next_state(&dir).unwrap(), 9, "an even (down) number becomes the next odd one");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_log_lists_hosts_and_files_once_and_starts_afresh() {
        let dir = std::env::temp_dir().join(format!("braid-nlm-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (rec, prev) = open(&dir).unwrap();
        assert_eq!(prev, Previous::default());
        let h = HostRecord { name: b"client one".to_vec(), addr: "10.0.0.7".parse().unwrap() };
        rec.host(&h);
        rec.host(&h);
        rec.file((1, 42));
        rec.file((1, 42));
        drop(rec);
        let (_rec, prev) = open(&dir).unwrap();
        assert_eq!(prev, Previous { hosts: vec![h], files: vec![(1, 42)] });
        let (_rec, prev) = open(&dir).unwrap();
        assert_eq!(prev, Previous::default(), "each start begins a new log");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_lines_are_skipped() {
        let p = parse("host 10.0.0.1 61\nhost nonsense 61\nfile 1\nfile 1 x\nhost 10.0.0.2 6\nfile 0 7\ngarbage\n");
        assert_eq!(p.hosts, vec![HostRecord { name: b"a".to_vec(), addr: "10.0.0.1".parse().unwrap() }]);
        assert_eq!(p.files, vec![(0, 7)]);
    }
}
