//! Writing configuration files safely: private permissions, no half-written files.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Opens a new file readable only by its owner (mode 0600 on Unix); fails if it exists.
pub fn create_private(path: &Path) -> std::io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Replaces the contents of `path` atomically (write a sibling file, then rename), keeping
/// the original file's permissions, so a crash never leaves a truncated config behind.
pub fn replace_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    let perms = fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.permissions();
    let tmp = sibling_tmp(path);
    let result = (|| -> std::io::Result<()> {
        let mut f = create_private(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        fs::set_permissions(&tmp, perms)?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

fn sibling_tmp(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".braid-tmp-{}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
pub mod testdir {
    //! Scratch directories for tests, removed on drop.

    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh empty directory under the system temp dir.
    pub struct TestDir(PathBuf);

    impl TestDir {
        /// Creates a new, unique, empty directory.
        pub fn new() -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("braid-test-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TestDir(dir)
        }

        /// The directory's path.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testdir::TestDir;
    use super::*;

    #[cfg(unix)]
    #[test]
    fn replace_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TestDir::new();
        let p = dir.path().join("c.toml");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        replace_file(&p, "new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
