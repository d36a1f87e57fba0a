//! What `braid serve` does without `--config`: use `./braid.toml`, writing it (and
//! `./braid-data`) with a fresh random password on the very first start.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use crate::{fsutil, password};

/// Name of the default configuration file.
pub const CONFIG_FILE: &str = "braid.toml";
/// Name of the default shared directory.
pub const DATA_DIR: &str = "braid-data";
/// Name of the user created on first start.
pub const FIRST_USER: &str = "braid";
/// Name of the share created on first start.
pub const FIRST_SHARE: &str = "data";

/// The default config file, and the new password if this call created it.
#[derive(Debug)]
pub struct Prepared {
    /// Path of the configuration file to load.
    pub config_path: PathBuf,
    /// The generated password of user `braid`, only when the file was just written.
    pub new_password: Option<String>,
}

/// Makes sure `base/braid-data` and `base/braid.toml` exist; on first start writes the file
/// with user `braid` (random password) and share `data`.
pub fn prepare(base: &Path) -> anyhow::Result<Prepared> {
    let config_path = base.join(CONFIG_FILE);
    // The default share directory is (re)created on every default start, not just the first.
    let data = base.join(DATA_DIR);
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    if config_path.exists() {
        return Ok(Prepared { config_path, new_password: None });
    }
    let data = std::fs::canonicalize(&data).with_context(|| format!("cannot resolve {}", data.display()))?;
    let data = data.to_str().ok_or_else(|| anyhow!("{} is not valid UTF-8", data.display()))?;

    let pw = password::generate(16);
    let text = render(data, &smb_auth::nt_hash(&pw));
    let mut file = match fsutil::create_private(&config_path) {
        Ok(f) => f,
        // Another `braid serve` won the race: use its file, not ours.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(Prepared { config_path, new_password: None }),
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", config_path.display())),
    };
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).with_context(|| format!("cannot write {}", config_path.display()))?;
    Ok(Prepared { config_path, new_password: Some(pw) })
}

/// The first-start configuration file.
fn render(data_path: &str, nt_hash: &[u8; 16]) -> String {
    // toml_edit quotes and escapes the path correctly whatever it contains.
    let path = toml_edit::Value::from(data_path).to_string();
    format!(
        r#"# Braid SMB server configuration, written by `braid serve` on first start.
# Check it with `braid check --config braid.toml`.

[server]
listen = ["127.0.0.1:4455"]
server_name = "BRAID"
domain = "WORKGROUP"
max_io_size = "1M"
max_connections = 1024
max_connections_per_client = 256   # a client address holds at most this many
max_unauthenticated = 256          # connections not logged on: the oldest goes past this
logon_timeout = "20s"              # a connection must log on within this
frame_timeout = "30s"              # a frame must arrive whole within this of its header
log = "info"

# Passwords are stored only as NT hashes. Add users or change a password with:
#   braid user add NAME --config braid.toml [--update]
[[user]]
name = "{FIRST_USER}"
nt_hash = "{hash}"

[[share]]
name = "{FIRST_SHARE}"
path = {path}
read_only = false
# users = ["{FIRST_USER}"]   # who may connect; empty or absent = every user
guest_ok = false
comment = "Braid data"
"#,
        hash = hex::encode(nt_hash),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::testdir::TestDir;

    #[test]
    fn first_start_writes_a_valid_config_once() {
        let dir = TestDir::new();
        let first = prepare(dir.path()).unwrap();
        let pw = first.new_password.expect("first start makes a password");
        assert_eq!(pw.len(), 16);
        assert!(pw.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(first.config_path, dir.path().join("braid.toml"));
        assert!(dir.path().join("braid-data").is_dir());

        let text = std::fs::read_to_string(&first.config_path).unwrap();
        assert!(!text.contains(&pw), "plaintext password written");
        let loaded = crate::config::parse(&text, "braid.toml", dir.path()).unwrap();
        let cfg = loaded.server;
        assert_eq!(cfg.users.len(), 1);
        assert_eq!(cfg.users[0].name, "braid");
        assert_eq!(cfg.users[0].nt_hash, smb_auth::nt_hash(&pw));
        assert_eq!(cfg.shares.len(), 1);
        assert_eq!(cfg.shares[0].name, "data");
        assert!(matches!(&cfg.shares[0].storage, smb_server::ShareStorage::Directory(p) if p.is_absolute()));
        assert_eq!(cfg.shares[0].storage, smb_server::ShareStorage::Directory(std::fs::canonicalize(dir.path().join("braid-data")).unwrap()));
        assert_eq!(cfg.listen, vec!["127.0.0.1:4455".parse().unwrap()]);

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&first.config_path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }

        // Second start: the file is reused, no password is shown, a removed data dir returns.
        std::fs::remove_dir(dir.path().join("braid-data")).unwrap();
        let second = prepare(dir.path()).unwrap();
        assert!(dir.path().join("braid-data").is_dir());
        assert!(second.new_password.is_none());
        assert_eq!(std::fs::read_to_string(&second.config_path).unwrap(), text);
    }

    #[test]
    fn odd_paths_are_quoted() {
        let text = render("/tmp/we\"ird\\dir", &[0; 16]);
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["share"][0]["path"].as_str(), Some("/tmp/we\"ird\\dir"));
    }
}
