//! `braid check`: validate a config file and summarise it.

use std::fmt::Write;
use std::path::Path;

use crate::config;

/// Validates the file and returns a human-readable summary.
pub fn run(path: &Path) -> anyhow::Result<String> {
    let loaded = config::load(path)?;
    Ok(summary(path, &loaded))
}

fn summary(path: &Path, loaded: &config::Loaded) -> String {
    let c = &loaded.server;
    let mut s = String::new();
    let listen: Vec<String> = c.listen.iter().map(ToString::to_string).collect();
    let users: Vec<&str> = c.users.iter().map(|u| u.name.as_str()).collect();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "{}: OK", path.display());
    let _ = writeln!(s, "  listen:       {}", listen.join(", "));
    let _ = writeln!(s, "  server name:  {} (domain {})", c.server_name, c.domain);
    let io = if c.max_io_size % (1 << 20) == 0 { format!("{} MiB", c.max_io_size >> 20) } else { format!("{} KiB", c.max_io_size >> 10) };
    let _ = writeln!(s, "  limits:       max I/O {io}, max {} connections", c.max_connections);
    let _ = writeln!(
        s,
        "  admission:    {} per client, {} not logged on (oldest closed first), logon within {:?}, frames within {:?}",
        c.max_connections_per_client, c.max_unauthenticated, c.logon_timeout, c.frame_timeout
    );
    let _ = writeln!(s, "  log:          {}", loaded.log.as_deref().unwrap_or("info"));
    let _ = writeln!(s, "  users:        {}", if users.is_empty() { "(none)".to_string() } else { users.join(", ") });
    if c.shares.is_empty() {
        let _ = writeln!(s, "  shares:       (none)");
    }
    for sh in &c.shares {
        let who = if sh.users.is_empty() { "all users".to_string() } else { sh.users.join(", ") };
        let _ = writeln!(
            s,
            "  share {:?}: {} ({}; {}{}{}{}{})",
            sh.name,
            sh.storage,
            if sh.read_only { "read-only" } else { "read-write" },
            who,
            if sh.guest_ok { "; guests allowed" } else { "" },
            match sh.storage {
                smb_server::ShareStorage::Directory(_) => format!("; {}", sh.metadata_cache),
                smb_server::ShareStorage::Memory { .. } => String::new(),
            },
            if sh.directory_leases { "" } else { "; no directory leases" },
            match sh.max_watches {
                smb_server::DEFAULT_MAX_WATCHES => String::new(),
                0 => "; change watches unlimited".to_string(),
                n => format!("; at most {n} change watches"),
            }
        );
    }
    for sh in &c.shares {
        let _ = writeln!(s, "  share {:?} limits: {}", sh.name, config::describe_limits(&sh.limits));
    }
    ca_summary(c, &mut s);
    nfs_summary(loaded, &mut s);
    s
}

/// The continuously available shares and where their persistent handles are kept.
fn ca_summary(c: &smb_server::ServerConfig, s: &mut String) {
    let ca: Vec<&str> = c.shares.iter().filter(|sh| sh.continuous_availability).map(|sh| sh.name.as_str()).collect();
    if !ca.is_empty() {
        let store = c.state_dir.join(braid_handlestore::FILE_NAME);
        let _ = writeln!(s, "  continuously available: {} (persistent handles in {})", ca.join(", "), store.display());
    }
}

/// The NFS lines: listeners, state directory and each export's rules.
fn nfs_summary(loaded: &config::Loaded, s: &mut String) {
    let n = &loaded.nfs;
    if !n.enabled() {
        let _ = writeln!(s, "  nfs:          off (set [server] nfs_listen and nfs = true on a share)");
        return;
    }
    let listen: Vec<String> = n.config.listen.iter().map(ToString::to_string).collect();
    let _ = writeln!(s, "  nfs:          {} (state in {})", listen.join(", "), n.config.state_dir.display());
    let _ = writeln!(s, "  portmapper:   {} (port 111: nfs_portmapper)", n.config.portmapper.word());
    if n.exports.is_empty() {
        let _ = writeln!(s, "  nfs exports:  (none: no share has nfs = true)");
    }
    for (i, rules) in &n.exports {
        let name = loaded.server.shares.get(*i).map_or("?", |sh| sh.name.as_str());
        let _ = writeln!(s, "  nfs export /{name}: {rules}{}", if rules.read_only { "; read-only" } else { "" });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfs_lines() {
        let dir = std::env::temp_dir().join(format!("braid-check-nfs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let text = "[server]\nnfs_listen = [\"127.0.0.1:2049\"]\nstate_dir = \"st\"\n[[share]]\nname = \"data\"\npath = \"data\"\nnfs = true\nnfs_all_squash = true\nread_only = true\n";
        let loaded = config::parse(text, "braid.toml", &dir).unwrap();
        let s = summary(Path::new("braid.toml"), &loaded);
        assert!(s.contains("  nfs:          127.0.0.1:2049 (state in "), "{s}");
        assert!(s.contains("  portmapper:   auto (port 111"), "{s}");
        assert!(s.contains("nfs export /data: every client; all squashed to 65534:65534; read-only"), "{s}");
        let off = config::parse("", "braid.toml", &dir).unwrap();
        assert!(summary(Path::new("braid.toml"), &off).contains("nfs:          off"));
        let ca = config::parse(
            "[server]\nstate_dir = \"st\"\n[[share]]\nname = \"data\"\npath = \"data\"\ncontinuous_availability = true\n",
            "braid.toml",
            &dir,
        )
        .unwrap();
        let s = summary(Path::new("braid.toml"), &ca);
        assert!(s.contains("  continuously available: data (persistent handles in "), "{s}");
        assert!(s.contains("st/handles.redb)"), "{s}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_limits_line_per_share() {
        let dir = std::env::temp_dir().join(format!("braid-check-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = "[[share]]\nname = \"fast\"\nbackend = \"memory\"\n[[share]]\nname = \"data\"\nbackend = \"memory\"\n\
                    provisioned = { model = \"azure-v1\", size = \"1TiB\" }\n";
        let loaded = config::parse(text, "braid.toml", &dir).unwrap();
        let s = summary(Path::new("braid.toml"), &loaded);
        assert!(s.contains("  share \"fast\" limits: unlimited\n"), "{s}");
        assert!(s.contains("  share \"data\" limits: 4024 IOPS, burst 10000 IOPS (21513600 credits, 60 min), throughput 203 MiB/s\n"), "{s}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
