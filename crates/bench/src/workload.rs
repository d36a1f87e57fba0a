//! Workload parameters and their checks.

use serde::Serialize;

use crate::size::format_size;
use crate::BenchError;

/// A metadata operation of `--meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetaOp {
    /// Create a new empty file (the handle stays open).
    Create,
    /// Open an existing file (the handle stays open).
    Open,
    /// Close an open handle.
    Close,
    /// Delete a closed file.
    Delete,
    /// Query a file's metadata.
    Stat,
    /// Create a directory.
    Mkdir,
    /// Remove an empty directory.
    Rmdir,
    /// List a directory of `--files` entries (open, QUERY_DIRECTORY to the end, close),
    /// shared by all workers, filled before the clock starts and kept (DIR/list-N) like data
    /// files.
    List,
}

impl MetaOp {
    /// Every operation, in report order.
    pub const ALL: [MetaOp; 8] =
        [MetaOp::Create, MetaOp::Open, MetaOp::Close, MetaOp::Delete, MetaOp::Stat, MetaOp::Mkdir, MetaOp::Rmdir, MetaOp::List];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            MetaOp::Create => "create",
            MetaOp::Open => "open",
            MetaOp::Close => "close",
            MetaOp::Delete => "delete",
            MetaOp::Stat => "stat",
            MetaOp::Mkdir => "mkdir",
            MetaOp::Rmdir => "rmdir",
            MetaOp::List => "list",
        }
    }
}

/// Parses `create,open,close,delete,stat` or with weights `create:2,stat:5`.
pub fn parse_meta_mix(s: &str) -> Result<Vec<(MetaOp, u32)>, BenchError> {
    let names = MetaOp::ALL.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ");
    let mut mix: Vec<(MetaOp, u32)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = match part.split_once(':') {
            Some((n, w)) => (
                n,
                w.parse::<u32>()
                    .ok()
                    .filter(|&w| w > 0 && w <= 1000)
                    .ok_or_else(|| BenchError::BadInput(format!("--meta: bad weight in {part:?} (1..1000)")))?,
            ),
            None => (part, 1),
        };
        let op = MetaOp::ALL
            .into_iter()
            .find(|o| o.name() == name)
            .ok_or_else(|| BenchError::BadInput(format!("--meta: unknown operation {name:?} (known: {names})")))?;
        if mix.iter().any(|(o, _)| *o == op) {
            return Err(BenchError::BadInput(format!("--meta: {name} given twice")));
        }
        mix.push((op, weight));
    }
    if mix.is_empty() {
        return Err(BenchError::BadInput(format!("--meta: no operations (known: {names})")));
    }
    Ok(mix)
}

/// Every parameter of one run; serialized into the JSON report as is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    /// I/O size in bytes.
    pub block_size: u64,
    /// Worker tasks ("threads").
    pub threads: u32,
    /// I/Os in flight per thread.
    pub queue_depth: u32,
    /// Percentage of I/Os that are writes (0..=100).
    pub write_pct: u8,
    /// Random (true) or sequential offsets.
    pub random: bool,
    /// Number of data files.
    pub files: u32,
    /// Size of each data file in bytes.
    pub file_size: u64,
    /// Measured seconds.
    pub duration_s: f64,
    /// Warm-up seconds before measuring (discarded).
    pub warmup_s: f64,
    /// Same random offsets on every run (fio randrepeat=1).
    pub randrepeat: bool,
    /// Channels of the session (1 = no extra channel).
    pub channels: u32,
    /// Sign every request.
    pub sign: bool,
    /// Encrypt every request.
    pub encrypt: bool,
    /// Cipher asked for with --encrypt (None: client's preference order).
    pub cipher: Option<String>,
    /// Check every byte read against the written pattern.
    pub verify: bool,
    /// Metadata mix instead of data I/O.
    pub meta: Option<Vec<(MetaOp, u32)>>,
    /// Directory in the share holding the benchmark files.
    pub dir: String,
    /// Independent clients (`--clients`): each its own connection, session and tree, one
    /// operation at a time (see [`crate::clients`]); 0: `threads x queue_depth` workers over
    /// one session.
    pub clients: u32,
    /// With `clients`: reads and writes between an open and its close (`--ios-per-open`).
    pub ios_per_open: u32,
    /// With `clients`: the local IPv4 addresses the clients connect from, `FIRST[-LAST]` as
    /// given (`--source-ips`); client `i` uses the `i`-th, wrapping round.
    pub source_ips: Option<String>,
    /// NLM v4 lock and unlock pairs instead of data I/O (`--nlm-lock`, NFS only): each of
    /// `clients` clients (at least one) on its own file and NLM connection (see
    /// [`crate::nfs::nlm`]).
    pub nlm_lock: bool,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            block_size: 4096,
            threads: 1,
            queue_depth: 1,
            write_pct: 0,
            random: true,
            files: 1,
            file_size: 64 << 20,
            duration_s: 10.0,
            warmup_s: 0.0,
            randrepeat: false,
            channels: 1,
            sign: false,
            encrypt: false,
            cipher: None,
            verify: false,
            meta: None,
            dir: "braid-bench".into(),
            clients: 0,
            ios_per_open: 8,
            source_ips: None,
            nlm_lock: false,
        }
    }
}

impl Workload {
    /// Checks values that do not need the server.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::BadInput(m));
        if self.block_size == 0 || self.block_size > u64::from(u32::MAX) {
            return bad(format!("block size {} is out of range", self.block_size));
        }
        if self.threads == 0 || self.threads > 4096 {
            return bad(format!("-t {}: threads must be 1..4096", self.threads));
        }
        if self.queue_depth == 0 || self.queue_depth > 1024 {
            return bad(format!("-o {}: queue depth must be 1..1024", self.queue_depth));
        }
        if self.write_pct > 100 {
            return bad(format!("-w {}: write percentage must be 0..100", self.write_pct));
        }
        if self.files == 0 || self.files > 100_000 {
            return bad(format!("-f {}: files must be 1..100000", self.files));
        }
        if self.channels == 0 || self.channels > 64 {
            return bad(format!("--channels {}: must be 1..64", self.channels));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return bad(format!("-d {}: duration must be > 0 seconds", self.duration_s));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0) {
            return bad(format!("-W {}: warm-up must be >= 0 seconds", self.warmup_s));
        }
        if self.meta.is_none() && self.file_size < self.block_size {
            return bad(format!("file size {} is smaller than the block size {}", format_size(self.file_size), format_size(self.block_size)));
        }
        if self.verify && self.meta.is_some() {
            return bad("--verify applies to data I/O, not to --meta".into());
        }
        if self.nlm_lock {
            self.validate_nlm()?;
        } else {
            self.validate_clients()?;
        }
        if self.dir.is_empty() || self.dir.starts_with('/') || self.dir.split('/').any(|c| c.is_empty() || c == "..") {
            return bad(format!("--dir {:?}: must be a relative path inside the share", self.dir));
        }
        Ok(())
    }

    /// The checks of the many-clients mode.
    fn validate_clients(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::BadInput(m));
        if self.clients == 0 {
            if self.source_ips.is_some() {
                return bad("--source-ips needs --clients".into());
            }
            return Ok(());
        }
        if self.clients > 100_000 {
            return bad(format!("--clients {}: must be 1..100000", self.clients));
        }
        if self.ios_per_open == 0 || self.ios_per_open > 1_000_000 {
            return bad(format!("--ios-per-open {}: must be 1..1000000", self.ios_per_open));
        }
        // Each client is one connection with one operation at a time: the knobs of the
        // shared-session mode would silently mean something else here.
        if self.threads != 1 || self.queue_depth != 1 || self.channels != 1 {
            return bad("--clients runs one operation at a time per client: leave -t, -o and --channels at 1".into());
        }
        if self.meta.is_some() {
            return bad("--clients runs the open/read/write/close loop, not --meta".into());
        }
        if let Some(s) = &self.source_ips {
            crate::clients::SourceRange::parse(s)?;
        }
        Ok(())
    }

    /// The checks of the lock workload: one lock at a time per client, nothing else.
    fn validate_nlm(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::BadInput(m.into()));
        if self.meta.is_some() || self.verify {
            return bad("--nlm-lock is a workload of its own: no --meta or --verify");
        }
        if self.threads != 1 || self.queue_depth != 1 || self.channels != 1 {
            return bad("--nlm-lock runs one lock at a time per client: leave -t, -o and --channels at 1 (more load: --clients)");
        }
        if self.source_ips.is_some() {
            return bad("--nlm-lock does not choose source addresses (--source-ips)");
        }
        if self.clients > 100_000 {
            return bad(&format!("--clients {}: must be 1..100000", self.clients));
        }
        Ok(())
    }

    /// A short human description, e.g. `4k random 30% write, 4 threads x QD 8, 1 channel`.
    pub fn summary(&self) -> String {
        if self.nlm_lock {
            return format!(
                "NLM v4 LOCK + UNLOCK pairs (exclusive, non-blocking, 1 byte; IOPS = pairs/s), {} client(s) x QD 1, a file and an NLM connection each",
                self.clients.max(1)
            );
        }
        let kind = if let Some(mix) = &self.meta {
            format!(
                "metadata {}",
                mix.iter().map(|(o, w)| if *w == 1 { o.name().to_string() } else { format!("{}:{w}", o.name()) }).collect::<Vec<_>>().join(",")
            )
        } else {
            format!("{} {} {}% write", format_size(self.block_size), if self.random { "random" } else { "sequential" }, self.write_pct)
        };
        let who = if self.clients > 0 {
            format!("{} client(s) x QD 1, open + {} I/O(s) + close", self.clients, self.ios_per_open)
        } else {
            format!("{} thread(s) x QD {}, {} channel(s)", self.threads, self.queue_depth, self.channels)
        };
        format!(
            "{kind}, {who}, {} file(s) of {}{}{}{}",
            self.files,
            format_size(self.file_size),
            if self.sign { ", signed" } else { "" },
            if self.encrypt { ", encrypted" } else { "" },
            if self.verify { ", verify" } else { "" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_mix() {
        assert_eq!(parse_meta_mix("create,stat:3").unwrap(), vec![(MetaOp::Create, 1), (MetaOp::Stat, 3)]);
        assert!(parse_meta_mix("create,bogus").unwrap_err().to_string().contains("unknown operation"));
        assert_eq!(parse_meta_mix("list").unwrap(), vec![(MetaOp::List, 1)]);
        assert!(parse_meta_mix("stat,stat").is_err());
        assert!(parse_meta_mix("stat:0").is_err());
        assert!(parse_meta_mix("").is_err());
    }

    #[test]
    fn validation() {
        assert!(Workload::default().validate().is_ok());
        let small = Workload { block_size: 1 << 20, file_size: 64 << 10, ..Default::default() };
        assert_eq!(small.validate().unwrap_err().to_string(), "file size 64k is smaller than the block size 1m");
        assert!(Workload { threads: 0, ..Default::default() }.validate().is_err());
        assert!(Workload { write_pct: 101, ..Default::default() }.validate().is_err());
        assert!(Workload { duration_s: 0.0, ..Default::default() }.validate().is_err());
        assert!(Workload { dir: "../x".into(), ..Default::default() }.validate().is_err());
        assert!(Workload::default().summary().contains("4k random 0% write"));
        let nlm = Workload { nlm_lock: true, clients: 8, ..Default::default() };
        assert!(nlm.validate().is_ok());
        assert!(nlm.summary().contains("NLM v4 LOCK + UNLOCK pairs") && nlm.summary().contains("8 client(s)"), "{}", nlm.summary());
        assert!(Workload { threads: 2, ..nlm.clone() }.validate().unwrap_err().to_string().contains("one lock at a time"));
        assert!(Workload { meta: Some(vec![(MetaOp::Stat, 1)]), ..nlm.clone() }.validate().is_err());
        assert!(Workload { source_ips: Some("127.0.0.1".into()), ..nlm }.validate().is_err());
    }
}
