//! The NFS keys.

use super::*;

const NFS: &str = r#"[server]
listen = ["127.0.0.1:4455"]
nfs_listen = ["127.0.0.1:2049"]
state_dir = "state"

[[share]]
name = "data"
path = "data"
nfs = true
nfs_clients = ["127.0.0.1", "10.0.0.0/8"]
nfs_root_squash = false
nfs_anonuid = 1000
nfs_anongid = 100
nfs_auth_none = true

[[share]]
name = "public"
path = "pub"
read_only = true
nfs = true

[[share]]
name = "smbonly"
path = "pub"
"#;

fn nfs_line(line: usize, new: &str) -> String {
    let mut lines: Vec<&str> = NFS.lines().collect();
    lines[line - 1] = new;
    lines.join("\n") + "\n"
}

#[test]
fn nfs_keys_parse() {
    let d = dir();
    let loaded = parse(NFS, "braid.toml", d.path()).unwrap();
    let n = &loaded.nfs;
    assert!(n.enabled());
    assert_eq!(n.config.listen, vec!["127.0.0.1:2049".parse::<SocketAddr>().unwrap()]);
    assert_eq!(n.config.state_dir, d.path().join("state"));
    assert_eq!(n.config.portmapper, nfs_server::PortmapperMode::Auto, "the default with nfs_listen");
    assert_eq!(n.exports.len(), 2, "smbonly is not exported");
    let (i, data) = &n.exports[0];
    assert_eq!(*i, 0);
    assert!(data.allows("10.1.2.3".parse().unwrap()) && !data.allows("192.0.2.1".parse().unwrap()));
    assert!(!data.root_squash && !data.all_squash && data.auth_none && !data.read_only);
    assert_eq!((data.anonuid, data.anongid), (1000, 100));
    let (i, public) = &n.exports[1];
    assert_eq!(*i, 1);
    assert_eq!(*public, nfs_server::ExportRules { read_only: true, ..Default::default() }, "defaults, and the share's read_only");
}

#[test]
fn nfs_is_off_by_default() {
    let d = dir();
    let loaded = parse(&example(), "braid.toml", d.path()).unwrap();
    assert!(!loaded.nfs.enabled() && loaded.nfs.exports.is_empty());
    assert_eq!(loaded.nfs.config.state_dir, std::path::PathBuf::from(nfs_server::DEFAULT_STATE_DIR));
}

#[test]
fn bad_nfs_keys() {
    error(&nfs_line(3, "nfs_listen = [\"2049\"]"), 3, &["server.nfs_listen", "IP:PORT"]);
    error(&nfs_line(3, "nfs_listen = [\"127.0.0.1:2049\", \"127.0.0.1:2049\"]"), 3, &["listed twice"]);
    error(&nfs_line(3, "nfs_listen = [\"127.0.0.1:4455\"]"), 3, &["also an SMB listen address"]);
    error(&nfs_line(4, "state_dir = \"afile\""), 4, &["server.state_dir", "not a directory"]);
    error(&nfs_line(4, "state_dir = \"\""), 4, &["server.state_dir"]);
    error(&nfs_line(10, "nfs_clients = [\"10.0.0.0/33\"]"), 10, &["share \"data\"", "nfs_clients", "prefix"]);
    error(&nfs_line(10, "nfs_clients = [\"somehost\"]"), 10, &["nfs_clients"]);
    error(&nfs_line(10, "nfs_clients = []"), 10, &["nfs_clients is empty"]);
    error(&nfs_line(12, "nfs_anonuid = -1"), 12, &["nfs_anonuid", "out of range"]);
    error(&nfs_line(13, "nfs_anongid = 4294967295"), 13, &["nfs_anongid", "out of range"]);
    error(&nfs_line(11, "nfs_root_squash = \"yes\""), 11, &["nfs_root_squash"]);
    error(&nfs_line(24, "path = \"pub\"\nnfs_all_squash = true"), 25, &["share \"smbonly\"", "nfs = true"]);
    error(&nfs_line(9, "nfs = false"), 10, &["share \"data\"", "nfs = true"]);
    error(&nfs_line(3, "nfs_listen = []"), 9, &["share \"data\"", "nfs_listen"]);
}

#[test]
fn memory_share_may_be_exported() {
    let d = dir();
    let text = "[server]\nnfs_listen = [\"127.0.0.1:2049\"]\n[[share]]\nname = \"m\"\nbackend = \"memory\"\nnfs = true\n";
    let loaded = parse(text, "braid.toml", d.path()).unwrap();
    assert_eq!(loaded.nfs.exports.len(), 1);
}

#[test]
fn nfs_portmapper_modes() {
    let d = dir();
    for (word, mode) in
        [("serve", nfs_server::PortmapperMode::Serve), ("register", nfs_server::PortmapperMode::Register), ("off", nfs_server::PortmapperMode::Off)]
    {
        let loaded = parse(&nfs_line(4, &format!("state_dir = \"state\"\nnfs_portmapper = \"{word}\"")), "braid.toml", d.path()).unwrap();
        assert_eq!(loaded.nfs.config.portmapper, mode);
    }
    error(&nfs_line(4, "state_dir = \"state\"\nnfs_portmapper = \"rpcbind\""), 5, &["server.nfs_portmapper", "\"serve\""]);
}
