//! Runs the built `braid` binary: help texts, `check`, and `user add/del`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A scratch directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("braid-cli-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn braid(args: &[&str], cwd: &Path, stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const CONFIG: &str = r#"# test config
[server]
listen = ["127.0.0.1:4455"]   # loopback

# people
[[user]]
name = "alice"
nt_hash = "8846f7eaee8fb117ad06bdd830b7586c"

[[share]]
name = "data"
path = "data"
users = ["alice"]
"#;

fn setup() -> TempDir {
    let dir = TempDir::new();
    std::fs::create_dir(dir.0.join("data")).unwrap();
    std::fs::write(dir.0.join("braid.toml"), CONFIG).unwrap();
    dir
}

#[test]
fn help_texts() {
    let tmp = std::env::temp_dir();
    let out = braid(&["--help"], &tmp, None);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for word in ["serve", "check", "user", "Examples"] {
        assert!(help.contains(word), "--help lacks {word}: {help}");
    }
    for sub in [&["serve", "--help"][..], &["check", "--help"], &["user", "add", "--help"], &["user", "del", "--help"]] {
        let out = braid(sub, &tmp, None);
        assert!(out.status.success(), "{sub:?}");
        let help = text(&out.stdout);
        assert!(help.contains("Examples:"), "{sub:?} help lacks examples: {help}");
        assert!(help.contains("--config"), "{sub:?}");
    }
    let add = text(&braid(&["user", "add", "--help"], &tmp, None).stdout);
    assert!(add.contains("--password-stdin") && add.contains("--update"));
    let serve = text(&braid(&["serve", "--help"], &tmp, None).stdout);
    assert!(serve.contains("--listen") && serve.contains("braid-data"));
}

#[test]
fn check_good_config() {
    let dir = setup();
    let out = braid(&["check", "--config", "braid.toml"], &dir.0, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    assert!(summary.contains("braid.toml: OK"), "{summary}");
    assert!(summary.contains("\"data\""), "{summary}");
    assert!(summary.contains("alice"), "{summary}");
}

#[test]
fn check_bad_config_names_line_and_key() {
    let dir = setup();
    let bad = CONFIG.replace("path = \"data\"", "path = \"/no/such/dir\"");
    std::fs::write(dir.0.join("bad.toml"), bad).unwrap();
    let out = braid(&["check", "--config", "bad.toml"], &dir.0, None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err, "braid: error: bad.toml:12: share \"data\": path \"/no/such/dir\" does not exist\n");

    let pw = CONFIG.replace("nt_hash = \"8846f7eaee8fb117ad06bdd830b7586c\"", "password = \"hunter2\"");
    std::fs::write(dir.0.join("pw.toml"), pw).unwrap();
    let out = braid(&["check", "--config", "pw.toml"], &dir.0, None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with("braid: error: pw.toml:8: user \"alice\": key `password`"), "{err}");
    assert_eq!(err.lines().count(), 1);

    let out = braid(&["check", "--config", "missing.toml"], &dir.0, None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("braid: error: cannot read missing.toml"));
}

#[test]
fn user_add_and_del_with_password_stdin() {
    let dir = setup();
    let file = dir.0.join("braid.toml");
    let args = ["user", "add", "bob", "--config", "braid.toml", "--password-stdin"];

    let out = braid(&args, &dir.0, Some("Password\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 1);
    let after = std::fs::read_to_string(&file).unwrap();
    // MS-NLMP 4.2.1: NT hash of "Password".
    assert!(after.contains("name = \"bob\"\nnt_hash = \"a4f49c406510bdcab6824ee7c30fd852\""), "{after}");
    assert!(after.contains("# loopback") && after.contains("# people"));
    assert!(braid(&["check", "-c", "braid.toml"], &dir.0, None).status.success());

    // Adding again is refused; --update replaces the hash.
    let out = braid(&args, &dir.0, Some("other\n"));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("already exists"));
    let mut update = args.to_vec();
    update.push("--update");
    let out = braid(&update, &dir.0, Some("other\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!std::fs::read_to_string(&file).unwrap().contains("a4f49c406510bdcab6824ee7c30fd852"));

    // An empty password is refused.
    let out = braid(&["user", "add", "carol", "-c", "braid.toml", "--password-stdin"], &dir.0, Some(""));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("empty"));

    let out = braid(&["user", "del", "bob", "--config", "braid.toml"], &dir.0, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), CONFIG);

    let out = braid(&["user", "del", "bob", "--config", "braid.toml"], &dir.0, None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "braid: error: braid.toml: no user named \"bob\"\n");
}
