//! Command-line syntax: every subcommand, flag and help text.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Top-level `braid` command.
#[derive(Debug, Parser)]
#[command(
    name = "braid",
    version,
    about = "Braid: a memory-safe SMB 3.1.1 file server",
    long_about = "Braid: a memory-safe SMB 3.1.1 file server.\n\n\
        Shares are described in a TOML file (braid.toml). Users are stored as NT hashes, \
        never as plaintext passwords; manage them with `braid user`.",
    after_long_help = "Examples:\n  \
        braid serve                          # first run: creates ./braid.toml and ./braid-data\n  \
        braid serve --config /etc/braid.toml\n  \
        braid check --config /etc/braid.toml\n  \
        braid user add alice --config /etc/braid.toml"
)]
pub struct Cli {
    /// More logging: -v for debug, -vv for trace (overrides RUST_LOG and the config's `log`).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// Arguments of `braid status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Admin endpoint to read instead of the one the config names.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Print the raw JSON: {"sessions": [{..., "channels": [{...}]}]}.
    #[arg(long)]
    pub json: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the SMB server.
    #[command(
        long_about = "Run the SMB server until interrupted (Ctrl-C or SIGTERM: it stops accepting, \
            lets requests in flight finish for up to 10 s, closes open files and exits 0). \
            SIGHUP reloads the configuration file (see `braid reload`).\n\n\
            Without --config, braid works in the current directory: it serves ./braid-data \
            as share `data` on 127.0.0.1:4455. On the first start (no ./braid.toml yet) it \
            creates ./braid-data and writes ./braid.toml (mode 0600) with a user `braid` whose \
            random password is printed once and never stored in plaintext. Later starts read \
            ./braid.toml.",
        after_long_help = "Examples:\n  \
            braid serve\n  \
            braid serve --config /etc/braid.toml\n  \
            braid serve --config braid.toml --listen 0.0.0.0:445 --listen [::]:445\n  \
            braid serve -v"
    )]
    Serve(ServeArgs),

    /// Validate a configuration file and print a summary.
    #[command(
        long_about = "Validate a configuration file and print a summary of what would be \
            served. Exits non-zero, naming the file, line and key, if anything is wrong. \
            Share paths must exist.",
        after_long_help = "Examples:\n  \
            braid check --config /etc/braid.toml\n  \
            braid check                      # checks ./braid.toml"
    )]
    Check(ConfigArg),

    /// Show sessions and their channels of a running server.
    #[command(
        long_about = "Show the sessions of a running server and, per session, its channels \
            (TCP connections) with client address and bytes in/out, like \
            Get-SmbMultichannelConnection. Reads the server's admin endpoint on loopback, which \
            is found from the server's config file (`[server] admin`, by default 127.0.0.1 at the first \
            listen port + 10000).",
        after_long_help = "Examples:\n  \
            braid status\n  \
            braid status --config /etc/braid.toml --json\n  \
            braid status --admin 127.0.0.1:4456"
    )]
    Status(StatusArgs),

    /// Make a running server re-read its configuration file.
    #[command(
        long_about = "Check the configuration file as `braid check` does (exiting non-zero, \
            naming the file, line and key, if anything is wrong), then ask the server running \
            with it, through its admin endpoint on loopback, to reload. The server re-reads its \
            own file: shares, users and limits are added, changed or removed, NFS exports \
            follow; sessions keep working unless their share or user went away. Settings that \
            need a restart (listen addresses, server name, ...) are named in the answer. A file \
            the server finds wrong is refused and the running configuration stays (exit \
            status 1). SIGHUP to the server does the same.",
        after_long_help = "Examples:\n  \
            braid reload --config /etc/braid.toml\n  \
            braid reload --admin 127.0.0.1:14455\n  \
            kill -HUP $(pidof braid)              # the same, answer in the server's log"
    )]
    Reload(ReloadArgs),

    /// Add, update or remove users in a configuration file.
    #[command(subcommand)]
    User(UserCommand),

    /// Measure an SMB server: IOPS, MiB/s and latency (or sweep a matrix with `bench sweep`).
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        long_about = "Measure one or more SMB servers with a diskspd/fio-like workload: block \
            size, threads, queue depth per thread, read/write mix, random or sequential \
            offsets over one or more files, or a metadata mix (--meta). Data files are \
            created in DIR of the share (default braid-bench/) and pre-filled when missing or \
            too small. A live progress line goes to stderr; the result is a table (or JSON \
            with --json, one object per target) with IOPS, MiB/s, latency percentiles, \
            client CPU time and errors.\n\n\
            Targets are smb://[DOMAIN;]user[:password]@host[:port]/share. Without a password \
            in the URL, BRAID_BENCH_PASSWORD is used, else it is asked on the terminal. \
            Several targets are run one after the other with the same workload.\n\n\
            --verify writes a pattern encoding file, offset and write generation, checks \
            every byte read, and reads everything back at the end; a mismatch is reported \
            with its place and exits non-zero.\n\n\
            --timeline FILE writes the IOPS and MiB/s of every second (total, read, write) as \
            CSV; a FILE ending in .png or .svg is drawn as a chart instead, with the CSV beside \
            it (FILE.csv). Seconds count from the end of the warm-up; an operation falls in the \
            second it completed in, so the rows add up to the totals. With several targets \
            each gets its own files (NAME-1.csv, NAME-2.csv, ...). --json always includes \
            the series (`timeline`).",
        after_long_help = "Examples:\n  \
            braid bench smb://alice@127.0.0.1:4455/data\n  \
            braid bench -b 64k -t 4 -o 8 -w 30 -r -d 30 -W 5 smb://alice:pw@server/data\n  \
            braid bench -b 1m -s -c 1g -t 2 --channels 4 --encrypt --cipher aes-256-gcm URL\n  \
            braid bench --verify -w 50 -d 10 --json URL\n  \
            braid bench --meta create,open,close,delete,stat -t 4 URL\n  \
            braid bench --meta list -f 10000 -t 4 URL   (listings of a 10,000-entry directory)\n  \
            braid bench -d 60 -t 4 -o 8 --timeline burst.csv --timeline-chart burst.png URL\n  \
            braid bench --clients 1000 --source-ips 127.2.0.1-127.2.3.232 -w 30 -f 16 -d 60 URL\n  \
            braid bench sweep --rw 100:0,70:30,0:100 --bs 4k,64k,1m --out results URL1 URL2"
    )]
    Bench(Box<BenchCmd>),
}

/// `braid bench`: one workload, or the `sweep` subcommand.
#[derive(Debug, Args)]
pub struct BenchCmd {
    /// `braid bench sweep ...`.
    #[command(subcommand)]
    pub sub: Option<BenchSub>,

    /// The single-workload arguments.
    #[command(flatten)]
    pub run: BenchRunArgs,
}

/// Subcommands of `braid bench`.
#[derive(Debug, Subcommand)]
pub enum BenchSub {
    /// Run a matrix of workloads over one or more targets; write CSV and charts.
    #[command(
        long_about = "Run every combination of --rw x --bs x --channels x --threads against \
            every target. At each point the targets run back to back, in an order that \
            rotates from point to point, so drift on the machine affects all alike. \
            Writes results.csv plus, per swept variable, IOPS and MiB/s charts (PNG and \
            SVG, one line per target) into --out.",
        after_long_help = "Examples:\n  \
            braid bench sweep --bs 4k,8k,64k,256k,1m -t 4 -o 8 --out bs URL\n  \
            braid bench sweep --rw 100:0,75:25,50:50,25:75,0:100 --out rw URL1 URL2\n  \
            braid bench sweep --channels 1,2,4,8 --bs 1m -s --out mc URL\n  \
            braid bench sweep --preset anf-nfs -t 4 -o 8 --nconnect 8 --out anf nfs://HOST/data URL2"
    )]
    Sweep(Box<BenchSweepArgs>),

    /// Draw a timeline CSV (from `braid bench --timeline`) as a chart, e.g. runs joined.
    #[command(after_long_help = "Examples:\n  \
            braid bench chart --out burst.png --title \"burst and refill\" --iops-marks 500,2000 burst.csv")]
    Chart(BenchChartArgs),

    /// Copy a file to another on the same share, inside the server or through the client.
    #[command(
        long_about = "Copy one file to another on the same share and time it: by default \
            with server-side copy (FSCTL_SRV_COPYCHUNK_WRITE, 16 MiB per request), so no \
            data crosses the network; with --client-side by READ and WRITE through this \
            client. Prints one line: mode, bytes, seconds, MiB/s.",
        after_long_help = "Examples:\n  \
            braid bench copy --from big.bin --to big.copy smb://alice@host/data\n  \
            braid bench copy --client-side --depth 8 --from big.bin --to big.copy smb://alice@host/data"
    )]
    Copy(BenchCopyArgs),
}

/// Arguments of `braid bench copy`.
#[derive(Debug, Args)]
pub struct BenchCopyArgs {
    /// The target: smb://[DOMAIN;]user[:password]@host[:port]/share.
    #[arg(value_name = "URL")]
    pub target: String,

    /// The file to copy (a path on the share).
    #[arg(long, value_name = "PATH")]
    pub from: String,

    /// The copy (created, or overwritten).
    #[arg(long, value_name = "PATH")]
    pub to: String,

    /// Copy through the client (READ and WRITE) instead of inside the server.
    #[arg(long)]
    pub client_side: bool,

    /// Requests in flight.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub depth: u32,
}

/// Arguments of `braid bench chart`.
#[derive(Debug, Args)]
pub struct BenchChartArgs {
    /// The CSV: second,iops,read_iops,write_iops,mib_per_s,read_mib_per_s,write_mib_per_s.
    #[arg(value_name = "CSV")]
    pub csv: PathBuf,

    /// The chart to write (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,

    /// First line of the heading.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub title: String,

    /// Second line of the heading.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub subtitle: String,

    /// IOPS levels drawn as dashed reference lines, e.g. a baseline and a burst limit: 500,2000.
    #[arg(long = "iops-marks", value_name = "LIST")]
    pub iops_marks: Option<String>,
}

/// Workload flags shared by `braid bench` and `braid bench sweep`. Values are parsed by the
/// bench module so a bad value is one `braid: error:` line like every other error.
#[derive(Debug, Args)]
pub struct BenchCommonArgs {
    /// Target(s): smb://[DOMAIN;]user[:password]@host[:port]/share or
    /// nfs://host[:port]/export[?mountport=P&uid=N&gid=N] (NFSv3, AUTH_SYS).
    #[arg(value_name = "URL", required = true)]
    pub targets: Vec<String>,

    /// Outstanding I/Os per thread (queue depth).
    #[arg(short = 'o', long = "queue-depth", value_name = "N", default_value = "1")]
    pub queue_depth: String,

    /// Random offsets (the default).
    #[arg(short = 'r', long, conflicts_with = "sequential")]
    pub random: bool,

    /// Sequential offsets (each thread walks the files, wrapping at the end).
    #[arg(short = 's', long)]
    pub sequential: bool,

    /// Number of data files.
    #[arg(short = 'f', long, value_name = "N", default_value = "1")]
    pub files: String,

    /// Size of each data file (created or extended and pre-filled when missing or smaller).
    #[arg(short = 'c', long = "file-size", value_name = "SIZE", default_value = "64m")]
    pub file_size: String,

    /// Measured seconds.
    #[arg(short = 'd', long, value_name = "SECS", default_value = "10")]
    pub duration: String,

    /// Warm-up seconds before measuring (results discarded).
    #[arg(short = 'W', long, value_name = "SECS", default_value = "0")]
    pub warmup: String,

    /// Repeat the same random offsets on every run (default: seeded from the clock).
    #[arg(long)]
    pub randrepeat: bool,

    /// Sign every request.
    #[arg(long)]
    pub sign: bool,

    /// Encrypt every request (SMB 3).
    #[arg(long)]
    pub encrypt: bool,

    /// Cipher for --encrypt: aes-128-gcm, aes-128-ccm, aes-256-gcm or aes-256-ccm.
    #[arg(long, value_name = "CIPHER", requires = "encrypt")]
    pub cipher: Option<String>,

    /// Ask for durable v2 opens (DH2Q with a batch oplock) on every SMB open, to measure
    /// their cost (e.g. on the --meta open/close mix).
    #[arg(long)]
    pub durable: bool,

    /// Ask for persistent handles (DH2Q with SMB2_DHANDLE_FLAG_PERSISTENT, implies
    /// --durable): what a continuously available share grants, to measure their cost.
    #[arg(long)]
    pub persistent: bool,

    /// Directory in the share for the benchmark files.
    #[arg(long, value_name = "DIR", default_value = "braid-bench")]
    pub dir: String,

    /// TCP connections per nfs:// target; calls go round-robin over them.
    #[arg(long, value_name = "N", default_value = "1")]
    pub nconnect: String,
}

/// Arguments of `braid bench`.
#[derive(Debug, Args)]
pub struct BenchRunArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,

    /// Block (I/O) size, e.g. 4k, 64k, 1m.
    #[arg(short = 'b', long = "block-size", value_name = "SIZE", default_value = "4k")]
    pub block_size: String,

    /// Worker threads (tasks).
    #[arg(short = 't', long, value_name = "N", default_value = "1")]
    pub threads: String,

    /// Percentage of writes (0-100).
    #[arg(short = 'w', long = "write", value_name = "PCT", default_value = "0")]
    pub write_pct: String,

    /// Channels of the session (extra ones are bound with SMB 3 multichannel).
    #[arg(long, value_name = "N", default_value = "1")]
    pub channels: String,

    /// Check every byte read against a pattern encoding file, offset and generation.
    #[arg(long)]
    pub verify: bool,

    /// Metadata mix instead of data I/O, e.g. create,open,close,delete,stat (op:weight allowed;
    /// also mkdir, rmdir, and list: listings of one directory of --files entries).
    #[arg(long, value_name = "OPS")]
    pub meta: Option<String>,

    /// Many independent clients instead of -t x -o requests over one session: N clients,
    /// each with its own TCP connection, NEGOTIATE, SESSION_SETUP and TREE_CONNECT, each
    /// running one operation at a time in a loop: open one of the -f data files (picked at
    /// random; in turn with -s), --ios-per-open reads and writes of -b bytes at random
    /// offsets (-w percent writes), close. Opens, reads, writes and closes all count as
    /// operations. Clients connect 16 at a time before the clock starts. The report adds
    /// fairness: Jain's index over the clients' operation counts and the slowest client's
    /// count over the median's.
    #[arg(long, value_name = "N")]
    pub clients: Option<String>,

    /// With --clients: reads and writes between an open and its close.
    #[arg(long = "ios-per-open", value_name = "K", default_value = "8", requires = "clients")]
    pub ios_per_open: String,

    /// With --clients: local IPv4 addresses to connect from, FIRST[-LAST]; client i uses the
    /// i-th address, wrapping round. On loopback any 127.0.0.0/8 address works without
    /// setup, so 127.2.0.1-127.2.3.232 makes 1,000 clients look like 1,000 hosts (a server
    /// limits connections per client address: Braid to 256 by default).
    #[arg(long = "source-ips", value_name = "RANGE", requires = "clients")]
    pub source_ips: Option<String>,

    /// NLM v4 byte-range locks instead of data I/O (nfs:// targets): each of --clients N
    /// clients (default 1) MOUNTs the export, creates its own file DIR/lockN.dat, opens its
    /// own TCP connection to the server's NLM service and loops LOCK (exclusive,
    /// non-blocking, byte 0, its own owner) + UNLOCK for -W + -d seconds. IOPS counts
    /// lock+unlock pairs, latency is the pair's. Any answer but NLM4_GRANTED stops the run
    /// with an error.
    #[arg(long = "nlm-lock", conflicts_with_all = ["meta", "verify", "ios_per_open", "source_ips", "channels", "threads"])]
    pub nlm_lock: bool,

    /// With --nlm-lock: the server's NLM port (default: asked of the portmapper on port 111
    /// of the target's host, GETPORT program 100021 version 4 over TCP).
    #[arg(long = "nlm-port", value_name = "PORT", requires = "nlm_lock")]
    pub nlm_port: Option<u16>,

    /// Print one JSON object per target instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Write IOPS and MiB/s of every second (total, read, write) as CSV to FILE; a FILE
    /// ending in .png or .svg gets the chart, and the CSV goes beside it (FILE.csv).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,

    /// Also draw the per-second chart (IOPS and MiB/s over time) into FILE (.png or .svg).
    #[arg(long = "timeline-chart", value_name = "FILE")]
    pub timeline_chart: Option<PathBuf>,
}

/// Arguments of `braid bench sweep`.
#[derive(Debug, Args)]
pub struct BenchSweepArgs {
    #[command(flatten)]
    pub common: BenchCommonArgs,

    /// A named matrix in place of --rw and --bs. anf-nfs: the Azure NetApp Files NFS
    /// benchmark's, read:write in 25% steps x 4k, 8k, 64k, 256k (add -s for its sequential
    /// half, --nconnect for its connection counts).
    #[arg(long, value_name = "NAME", value_parser = ["anf-nfs"], conflicts_with_all = ["rw", "bs"])]
    pub preset: Option<String>,

    /// Read:write ratios, e.g. 100:0,75:25,50:50,25:75,0:100.
    #[arg(long, value_name = "LIST", default_value = "100:0")]
    pub rw: String,

    /// Block sizes, e.g. 4k,8k,64k,256k,1m.
    #[arg(short = 'b', long = "bs", value_name = "LIST", default_value = "4k")]
    pub bs: String,

    /// Channel counts, e.g. 1,2,4,8,16.
    #[arg(long, value_name = "LIST", default_value = "1")]
    pub channels: String,

    /// Thread counts, e.g. 1,2,4,8,16.
    #[arg(short = 't', long, value_name = "LIST", default_value = "1")]
    pub threads: String,

    /// Directory for results.csv and the charts.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    pub out: PathBuf,

    /// Also print one JSON object per run on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `braid reload`.
#[derive(Debug, Args)]
pub struct ReloadArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Admin endpoint to ask instead of the one the config names.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
}

/// Arguments of `braid serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file to use [default: ./braid.toml, created on first start].
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to listen on instead of the config's `listen` (repeatable; IPv6 as [::1]:4455).
    #[arg(short, long, value_name = "ADDR")]
    pub listen: Vec<SocketAddr>,
}

/// A `--config FILE` argument defaulting to ./braid.toml.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// Configuration file.
    #[arg(short, long, value_name = "FILE", default_value = "braid.toml")]
    pub config: PathBuf,
}

/// `braid user ...` subcommands.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user (or change a password with --update).
    #[command(
        long_about = "Add a user to the configuration file, storing the NT hash of the \
            password. The password is asked twice on the terminal (not echoed), or read \
            as one line from standard input with --password-stdin. The rest of the file, \
            comments and formatting included, is kept as it is.\n\n\
            An existing user is refused unless --update is given; with --update the user's \
            hash is replaced, or the user is added if missing.",
        after_long_help = "Examples:\n  \
            braid user add alice --config /etc/braid.toml\n  \
            echo 'S3cret-pass' | braid user add alice --config braid.toml --password-stdin\n  \
            braid user add alice --config braid.toml --update"
    )]
    Add(UserAddArgs),

    /// Remove a user (also from every share's `users` list).
    #[command(
        long_about = "Remove a user from the configuration file, and from the `users` list \
            of every share. The rest of the file is kept as it is.",
        after_long_help = "Examples:\n  \
            braid user del alice --config /etc/braid.toml"
    )]
    Del(UserDelArgs),
}

/// Arguments of `braid user add`.
#[derive(Debug, Args)]
pub struct UserAddArgs {
    /// User name.
    pub name: String,

    #[command(flatten)]
    pub config: ConfigArg,

    /// Read the password as one line from standard input instead of the terminal.
    #[arg(long)]
    pub password_stdin: bool,

    /// Replace the password of an existing user (adds the user if missing).
    #[arg(long)]
    pub update: bool,
}

/// Arguments of `braid user del`.
#[derive(Debug, Args)]
pub struct UserDelArgs {
    /// User name.
    pub name: String,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bench_and_sweep_parse() {
        let cli = Cli::try_parse_from(["braid", "bench", "-b", "64k", "-t", "4", "-s", "smb://u@h/s"]).unwrap();
        let Command::Bench(b) = cli.command else { panic!("not bench") };
        assert!(b.sub.is_none());
        assert_eq!((b.run.block_size.as_str(), b.run.threads.as_str()), ("64k", "4"));
        assert!(b.run.common.sequential);
        assert!(b.run.timeline.is_none() && b.run.timeline_chart.is_none());
        let cli = Cli::try_parse_from(["braid", "bench", "--timeline", "t.csv", "--timeline-chart", "t.svg", "smb://u@h/s"]).unwrap();
        let Command::Bench(b) = cli.command else { panic!("not bench") };
        assert_eq!((b.run.timeline.unwrap(), b.run.timeline_chart.unwrap()), (PathBuf::from("t.csv"), PathBuf::from("t.svg")));
        assert_eq!(b.run.common.nconnect, "1");
        let cli = Cli::try_parse_from(["braid", "bench", "--nconnect", "4", "nfs://h:2049/data"]).unwrap();
        let Command::Bench(b) = cli.command else { panic!("not bench") };
        assert_eq!((b.run.common.nconnect.as_str(), b.run.common.targets[0].as_str()), ("4", "nfs://h:2049/data"));
        let cli = Cli::try_parse_from(["braid", "bench", "sweep", "--bs", "4k,1m", "--out", "o", "smb://u@h/s", "smb://v@h/s"]).unwrap();
        let Command::Bench(b) = cli.command else { panic!("not bench") };
        let Some(BenchSub::Sweep(s)) = b.sub else { panic!("not sweep") };
        assert_eq!(s.bs, "4k,1m");
        assert_eq!(s.common.targets.len(), 2);
        assert!(Cli::try_parse_from(["braid", "bench"]).is_err());
        assert!(Cli::try_parse_from(["braid", "bench", "-r", "-s", "smb://u@h/s"]).is_err());
        let cli = Cli::try_parse_from(["braid", "bench", "sweep", "--preset", "anf-nfs", "nfs://h/data"]).unwrap();
        let Command::Bench(b) = cli.command else { panic!("not bench") };
        let Some(BenchSub::Sweep(s)) = b.sub else { panic!("not sweep") };
        assert_eq!(s.preset.as_deref(), Some("anf-nfs"));
        let cli = Cli::try_parse_from(["braid", "bench", "chart", "--out", "c.png", "t.csv"]).unwrap();
        let Command::Bench(b) = cli.command else { panic!("not bench") };
        let Some(BenchSub::Chart(c)) = b.sub else { panic!("not chart") };
        assert_eq!((c.csv, c.out), (PathBuf::from("t.csv"), PathBuf::from("c.png")));
        assert!(Cli::try_parse_from(["braid", "bench", "sweep", "--preset", "anf-nfs", "--bs", "4k", "nfs://h/d"]).is_err(), "a preset sets --bs");
        assert!(Cli::try_parse_from(["braid", "bench", "sweep", "--preset", "other", "nfs://h/d"]).is_err());
    }
}
