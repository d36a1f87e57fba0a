use super::*;
use crate::fsutil::testdir::TestDir;

const HASH: &str = "8846f7eaee8fb117ad06bdd830b7586c";

/// A valid file whose share paths are relative to the test directory.
fn example() -> String {
    format!(
        r#"# example
[server]
listen = ["127.0.0.1:4455", "[::1]:4455"]
server_name = "FILES"
domain = "HOME"
max_io_size = "4MiB"
max_connections = 64
log = "debug"

[[user]]
name = "alice"
nt_hash = "{HASH}"

[[user]]
name = "bob"
nt_hash = "{HASH}"

[[share]]
name = "data"
path = "data"
users = ["alice"]

[[share]]
name = "public"
path = "pub"
read_only = true
guest_ok = true
comment = "for everyone"
"#
    )
}

fn dir() -> TestDir {
    let d = TestDir::new();
    std::fs::create_dir(d.path().join("data")).unwrap();
    std::fs::create_dir(d.path().join("pub")).unwrap();
    std::fs::write(d.path().join("afile"), "x").unwrap();
    d
}

/// Parses `text` and returns the error, asserting its line and that it mentions `needles`.
fn error(text: &str, line: usize, needles: &[&str]) -> ConfigError {
    let d = dir();
    let e = parse(text, "braid.toml", d.path()).expect_err("config should be refused");
    let shown = e.to_string();
    assert_eq!(e.line, Some(line), "wrong line in {shown:?}");
    assert!(shown.starts_with(&format!("braid.toml:{line}: ")), "{shown}");
    for n in needles {
        assert!(shown.contains(n), "{shown:?} should mention {n:?}");
    }
    e
}

/// The example with line `line` (1-based) replaced by `new`.
fn with_line(line: usize, new: &str) -> String {
    let text = example();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[line - 1] = new;
    lines.join("\n") + "\n"
}

#[test]
fn valid_example() {
    let d = dir();
    let loaded = parse(&example(), "braid.toml", d.path()).unwrap();
    let c = loaded.server;
    assert_eq!(c.listen, vec!["127.0.0.1:4455".parse::<SocketAddr>().unwrap(), "[::1]:4455".parse().unwrap()]);
    assert_eq!(c.server_name, "FILES");
    assert_eq!(c.domain, "HOME");
    assert_eq!(c.max_io_size, 4 << 20);
    assert_eq!(c.max_connections, 64);
    assert_eq!(loaded.log.as_deref(), Some("debug"));
    assert_eq!(c.users.len(), 2);
    assert_eq!(c.users[0].name, "alice");
    assert_eq!(hex::encode(c.users[0].nt_hash), HASH);
    assert_eq!(c.shares.len(), 2);
    let data = &c.shares[0];
    assert_eq!(data.name, "data");
    assert_eq!(data.storage, ShareStorage::Directory(std::fs::canonicalize(d.path().join("data")).unwrap()));
    assert!(!data.read_only && !data.guest_ok);
    assert_eq!(data.users, vec!["alice".to_string()]);
    let public = &c.shares[1];
    assert!(public.read_only && public.guest_ok);
    assert!(public.users.is_empty());
    assert_eq!(public.comment, "for everyone");
}

#[test]
fn minimal_file_gets_defaults() {
    let d = dir();
    let loaded = parse("", "braid.toml", d.path()).unwrap();
    let def = ServerConfig::default();
    assert_eq!(loaded.server.listen, def.listen);
    assert_eq!(loaded.server.max_io_size, def.max_io_size);
    assert!(loaded.log.is_none());
}

#[test]
fn io_sizes() {
    for (v, bytes) in [("\"1M\"", 1 << 20), ("\"8M\"", 8 << 20), ("\"2mib\"", 2 << 20), ("\"2048K\"", 2 << 20), ("1048576", 1 << 20)] {
        let d = dir();
        let text = format!("[server]\nmax_io_size = {v}\n");
        let c = parse(&text, "braid.toml", d.path()).unwrap();
        assert_eq!(c.server.max_io_size, bytes, "{v}");
    }
    for bad in ["\"16M\"", "\"512K\"", "0", "-1", "\"1G\"", "\"lots\"", "1.5", "true"] {
        let text = format!("[server]\n\nmax_io_size = {bad}\n");
        error(&text, 3, &["max_io_size"]);
    }
}

#[test]
fn unknown_keys() {
    error(&with_line(4, "name = \"x\""), 4, &["unknown field", "name"]);
    error(&with_line(22, "writable = true"), 22, &["share \"data\"", "writable"]);
    error(&with_line(1, "[global]"), 1, &["global"]);
}

#[test]
fn plaintext_password_is_refused() {
    error(&with_line(12, "password = \"secret\""), 12, &["user \"alice\"", "password", "nt_hash"]);
}

#[test]
fn bad_nt_hash() {
    error(&with_line(12, "nt_hash = \"1234\""), 12, &["user \"alice\"", "nt_hash"]);
    error(&with_line(16, &format!("nt_hash = \"{}\"", "zz".repeat(16))), 16, &["user \"bob\"", "nt_hash"]);
    error(&with_line(12, "nt_hash = 5"), 12, &["nt_hash", "invalid type"]);
}

#[test]
fn duplicate_user() {
    error(&with_line(15, "name = \"ALICE\""), 15, &["user \"ALICE\"", "duplicate"]);
}

#[test]
fn missing_and_bad_share_paths() {
    error(&with_line(20, "path = \"/nope/not/here\""), 20, &["share \"data\"", "path \"/nope/not/here\" does not exist"]);
    error(&with_line(20, "path = \"afile\""), 20, &["share \"data\"", "not a directory"]);
}

#[test]
fn duplicate_and_reserved_share_names() {
    error(&with_line(24, "name = \"DATA\""), 24, &["share \"DATA\"", "duplicate"]);
    error(&with_line(24, "name = \"ipc$\""), 24, &["share \"ipc$\"", "reserved"]);
}

#[test]
fn invalid_share_names() {
    error(&with_line(19, "name = \"a/b\""), 19, &["share \"a/b\"", "name", "'/'"]);
    error(&with_line(19, "name = \"tab\\there\""), 19, &["name", "'\\t'"]);
    let long = format!("name = \"{}\"", "x".repeat(81));
    error(&with_line(19, &long), 19, &["name", "81 characters"]);
}

#[test]
fn unknown_user_in_share() {
    error(&with_line(21, "users = [\"alice\",\n  \"carol\"]"), 22, &["share \"data\"", "users", "unknown user \"carol\""]);
}

#[test]
fn bad_listen_addresses() {
    error(&with_line(3, "listen = [\"localhost:445\"]"), 3, &["server.listen", "localhost:445"]);
    error(&with_line(3, "listen = [\"1.2.3.4\"]"), 3, &["server.listen"]);
    error(&with_line(3, "listen = []"), 3, &["server.listen", "at least one"]);
    error(&with_line(3, "listen = \"1.2.3.4:445\""), 3, &["listen", "invalid type"]);
}

#[test]
fn other_server_values() {
    error(&with_line(4, "server_name = \"has space\""), 4, &["server.server_name"]);
    error(&with_line(7, "max_connections = 0"), 7, &["server.max_connections"]);
    error(&with_line(8, "log = \"[[[\""), 8, &["server.log"]);
}

#[test]
fn admission_keys() {
    let d = dir();
    let text = example().replace(
        "log = \"debug\"",
        "log = \"debug\"\nmax_connections_per_client = 8\nmax_unauthenticated = 16\nlogon_timeout = \"5s\"\nframe_timeout = 2\nnfs_max_connections_per_client = 4\nnfs_max_calls_per_client = 99\nstorage_timeout = \"9s\"\nstorage_threads_per_share = 12",
    );
    let loaded = parse(&text, "braid.toml", d.path()).unwrap();
    let c = &loaded.server;
    assert_eq!((c.max_connections_per_client, c.max_unauthenticated), (8, 16));
    assert_eq!((c.logon_timeout, c.frame_timeout), (std::time::Duration::from_secs(5), std::time::Duration::from_secs(2)));
    assert_eq!((c.storage_timeout, c.storage_threads_per_share), (std::time::Duration::from_secs(9), 12));
    let n = &loaded.nfs.config;
    assert_eq!((n.max_connections_per_client, n.max_calls_per_client, n.record_timeout), (4, 99, std::time::Duration::from_secs(2)));
    error(&with_line(7, "max_unauthenticated = 0"), 7, &["server.max_unauthenticated", "out of range"]);
    error(&with_line(7, "logon_timeout = \"10ms\""), 7, &["server.logon_timeout", "too short"]);
    error(&with_line(7, "frame_timeout = \"soon\""), 7, &["server.frame_timeout", "not a duration"]);
    error(&with_line(7, "nfs_max_calls_per_client = -1"), 7, &["server.nfs_max_calls_per_client"]);
}

#[test]
fn missing_required_keys() {
    error(&with_line(20, ""), 18, &["share \"data\"", "missing field `path`"]);
    error(&with_line(12, ""), 10, &["user \"alice\"", "nt_hash"]);
    error(&with_line(11, ""), 10, &["user", "missing field `name`"]);
}

#[test]
fn syntax_error_has_a_line() {
    error(&with_line(13, "this is not toml"), 13, &[]);
}

#[test]
fn load_reads_relative_to_the_file() {
    let d = dir();
    let path = d.path().join("braid.toml");
    std::fs::write(&path, example()).unwrap();
    let loaded = load(&path).unwrap();
    assert_eq!(loaded.server.shares.len(), 2);
    let missing = load(&d.path().join("nope.toml")).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
}

#[test]
fn multichannel_keys() {
    let d = dir();
    let def = parse("", "braid.toml", d.path()).unwrap().server;
    assert!(def.multichannel);
    assert_eq!(def.max_channels, 32);
    assert!(def.interfaces.is_empty());
    let text = "[server]\nmultichannel = false\nmax_channels = 4\n\n\
                [[server.interface]]\naddress = \"192.0.2.7\"\nspeed = 1000000000\nrss = false\nrdma = true\n\n\
                [[server.interface]]\naddress = \"2001:db8::7\"\n";
    let c = parse(text, "braid.toml", d.path()).unwrap().server;
    assert!(!c.multichannel);
    assert_eq!(c.max_channels, 4);
    assert_eq!(c.interfaces.len(), 2);
    let a = &c.interfaces[0];
    assert_eq!((a.address, a.speed, a.rss, a.rdma), ("192.0.2.7".parse().unwrap(), 1_000_000_000, false, true));
    let b = &c.interfaces[1];
    assert_eq!((b.address, b.speed, b.rss, b.rdma), ("2001:db8::7".parse().unwrap(), 10_000_000_000, true, false));
}

#[test]
fn splice_keys() {
    let d = dir();
    let def = parse("", "braid.toml", d.path()).unwrap().server;
    assert!(def.splice_writes);
    assert_eq!(def.splice_min_concurrent, 1);
    let c = parse("[server]\nsplice_writes = false\nsplice_min_concurrent = 2\n", "braid.toml", d.path()).unwrap().server;
    assert!(!c.splice_writes);
    assert_eq!(c.splice_min_concurrent, 2);
    error("[server]\nsplice_min_concurrent = 0\n", 2, &["server.splice_min_concurrent", "out of range"]);
    error("[server]\n\nsplice_min_concurrent = \"2\"\n", 3, &["splice_min_concurrent"]);
}

#[test]
fn apple_model() {
    let d = dir();
    assert_eq!(parse("", "braid.toml", d.path()).unwrap().server.apple_model, "Braid");
    let c = parse("[server]\napple_model = \"MacPro7,1\"\n", "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.apple_model, "MacPro7,1");
    error("[server]\napple_model = \"\"\n", 2, &["server.apple_model"]);
    error("[server]\n\napple_model = \"a\\nb\"\n", 3, &["server.apple_model"]);
}

#[test]
fn multichannel_errors() {
    error("[server]\nmax_channels = 0\n", 2, &["server.max_channels", "out of range"]);
    error("[server]\n\nmax_channels = 257\n", 3, &["server.max_channels", "257"]);
    error("[server]\nmultichannel = \"yes\"\n", 2, &["multichannel"]);
    error("[[server.interface]]\naddress = \"nope\"\n", 2, &["server.interface", "\"nope\""]);
    error("[[server.interface]]\naddress = \"0.0.0.0\"\n", 2, &["server.interface", "0.0.0.0"]);
    error("[[server.interface]]\naddress = \"10.0.0.1\"\n\n[[server.interface]]\naddress = \"10.0.0.1\"\n", 5, &["listed twice"]);
    error("[[server.interface]]\naddress = \"10.0.0.1\"\nspeed = -1\n", 3, &["speed"]);
    error("[[server.interface]]\nspeed = 1\n", 1, &["missing key `address`"]);
    error("[[server.interface]]\naddress = \"10.0.0.1\"\nmtu = 9000\n", 3, &["mtu"]);
}

#[test]
fn memory_shares() {
    let d = dir();
    let text = "[[share]]\nname = \"ram\"\nbackend = \"memory\"\ncapacity = \"64M\"\n\n[[share]]\nname = \"ram2\"\nbackend = \"memory\"\n\n[[share]]\nname = \"disk\"\nbackend = \"local\"\npath = \"data\"\n";
    let c = parse(text, "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.shares[0].storage, ShareStorage::Memory { capacity: 64 << 20 });
    assert_eq!(c.shares[1].storage, ShareStorage::Memory { capacity: 1 << 30 });
    assert_eq!(c.shares[2].storage, ShareStorage::Directory(std::fs::canonicalize(d.path().join("data")).unwrap()));
    let c = parse("[[share]]\nname = \"ram\"\nbackend = \"memory\"\ncapacity = 2147483648\n", "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.shares[0].storage, ShareStorage::Memory { capacity: 2 << 30 });

    error(&with_line(20, "backend = \"tape\""), 20, &["share \"data\"", "backend \"tape\"", "memory"]);
    error(&with_line(21, "backend = \"memory\""), 20, &["share \"data\"", "memory share has no path"]);
    error(&with_line(21, "capacity = \"1G\""), 21, &["share \"data\"", "capacity applies only"]);
    for bad in ["\"lots\"", "\"1K\"", "-5", "true"] {
        let text = format!("[[share]]\nname = \"ram\"\nbackend = \"memory\"\ncapacity = {bad}\n");
        error(&text, 4, &["share \"ram\"", "capacity"]);
    }
}

#[test]
fn metadata_cache_keys() {
    let d = dir();
    let c = parse("[[share]]\nname = \"disk\"\npath = \"data\"\n", "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.shares[0].metadata_cache, smb_server::MetadataCache::default());
    assert!(c.shares[0].metadata_cache.enabled);
    let text = "[[share]]\nname = \"disk\"\npath = \"data\"\nmetadata_cache = false\nmetadata_ttl = \"250ms\"\n\
                metadata_cache_entries = 5000\nmetadata_cache_bytes = \"8MiB\"\n";
    let m = parse(text, "braid.toml", d.path()).unwrap().server.shares[0].metadata_cache;
    assert!(!m.enabled);
    assert_eq!(m.ttl, std::time::Duration::from_millis(250));
    assert_eq!((m.max_entries, m.max_bytes), (5000, 8 << 20));
    let m = parse("[[share]]\nname = \"disk\"\npath = \"data\"\nmetadata_ttl = 2\n", "braid.toml", d.path()).unwrap().server.shares[0].metadata_cache;
    assert_eq!(m.ttl, std::time::Duration::from_secs(2));
    for (key, bad, needle) in [
        ("metadata_ttl", "\"soon\"", "not a duration"),
        ("metadata_ttl", "\"2h\"", "too long"),
        ("metadata_ttl", "-1", "negative"),
        ("metadata_cache_entries", "10", "out of range"),
        ("metadata_cache_bytes", "\"1K\"", "out of range"),
        ("metadata_cache_bytes", "\"lots\"", "not a size"),
    ] {
        let text = format!("[[share]]\nname = \"disk\"\npath = \"data\"\n\n{key} = {bad}\n");
        error(&text, 5, &["share \"disk\"", key, needle]);
    }
    error("[[share]]\nname = \"disk\"\npath = \"data\"\nmetadata_cache = \"yes\"\n", 4, &["metadata_cache"]);
    error("[[share]]\nname = \"ram\"\nbackend = \"memory\"\n\nmetadata_ttl = \"1s\"\n", 5, &["share \"ram\"", "directory shares"]);
}

#[test]
fn directory_leases_default_on_and_can_be_switched_off() {
    let d = dir();
    let text = "[[share]]\nname = \"a\"\npath = \"data\"\n\n[[share]]\nname = \"b\"\npath = \"pub\"\ndirectory_leases = false\n";
    let c = parse(text, "braid.toml", d.path()).unwrap().server;
    assert!(c.shares[0].directory_leases);
    assert!(!c.shares[1].directory_leases);
    error("[[share]]\nname = \"a\"\npath = \"data\"\ndirectory_leases = \"yes\"\n", 4, &["directory_leases"]);
}

#[test]
fn share_watch_limits() {
    let d = dir();
    let share = |extra: &str| format!("[[share]]\nname = \"ram\"\nbackend = \"memory\"\n{extra}");
    let c = parse(&share(""), "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.shares[0].max_watches, smb_server::DEFAULT_MAX_WATCHES);
    let c = parse(&share("max_watches = 500\n"), "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.shares[0].max_watches, 500);
    let c = parse(&share("max_watches = 0\n"), "braid.toml", d.path()).unwrap().server;
    assert_eq!(c.shares[0].max_watches, 0, "0: no limit");
    error(&share("max_watches = -1\n"), 4, &["share \"ram\"", "max_watches", "out of range"]);
    error(&share("max_watches = 2000000\n"), 4, &["share \"ram\"", "max_watches"]);
    error(&share("max_watches = \"many\"\n"), 4, &["max_watches"]);
}

mod ca;
mod limits;
mod nfs;
