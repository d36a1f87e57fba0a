//! Share-relative paths, validated once when they come off the wire.

use crate::VfsError;
use std::fmt;

/// Longest single component, in UTF-8 bytes (the common Linux `NAME_MAX`).
pub const MAX_COMPONENT_LEN: usize = 255;

/// Longest whole path, in UTF-8 bytes.
pub const MAX_PATH_LEN: usize = 32 * 1024;

/// A validated path inside a share: zero or more components, none empty, `.`, `..`, or
/// containing `/`, `\`, `:`, NUL or other characters Windows forbids in names.
///
/// The empty path (no components) is the share root.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SharePath {
    components: Vec<String>,
}

impl SharePath {
    /// The share root.
    pub fn root() -> SharePath {
        SharePath::default()
    }

    /// Parses an SMB path: components separated by `\`.
    ///
    /// One leading and one trailing `\` are tolerated (`\dir\` is `dir`); the empty string and
    /// `\` are the root. `/` is not a separator in SMB, so a `/` inside a name is invalid.
    /// Fails with [`VfsError::InvalidName`] on empty, `.` or `..` components, forbidden
    /// characters (control characters, `" * < > ? | / :`), over-long components or paths.
    pub fn from_smb(name: &str) -> Result<SharePath, VfsError> {
        if name.len() > MAX_PATH_LEN {
            return Err(VfsError::InvalidName);
        }
        let inner = name.strip_prefix('\\').unwrap_or(name);
        if inner.is_empty() {
            return Ok(SharePath::root());
        }
        // `\\` is not the root with a trailing separator but an empty component.
        let inner = inner.strip_suffix('\\').unwrap_or(inner);
        let components = inner.split('\\').map(|c| validate_component(c).map(|()| c.to_owned())).collect::<Result<Vec<_>, _>>()?;
        Ok(SharePath { components })
    }

    /// A path from components that are already valid (on-disk names found by a lookup that
    /// only accepts names passing [`validate_component`]).
    pub(crate) fn from_components(components: Vec<String>) -> SharePath {
        debug_assert!(components.iter().all(|c| validate_component(c).is_ok()));
        SharePath { components }
    }

    /// The validated components, outermost first.
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// Whether this is the share root.
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The containing directory; `None` for the root.
    pub fn parent(&self) -> Option<SharePath> {
        let (_, rest) = self.components.split_last()?;
        Some(SharePath { components: rest.to_vec() })
    }

    /// The last component; `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.components.last().map(String::as_str)
    }

    /// This path with one more component, validated like any other.
    pub fn join(&self, name: &str) -> Result<SharePath, VfsError> {
        validate_component(name)?;
        let total: usize = self.components.iter().map(|c| c.len() + 1).sum::<usize>() + name.len();
        if total > MAX_PATH_LEN {
            return Err(VfsError::InvalidName);
        }
        let mut components = self.components.clone();
        components.push(name.to_owned());
        Ok(SharePath { components })
    }

    /// Backslash-joined components without a leading backslash (`""` for the root).
    pub fn to_smb_string(&self) -> String {
        self.components.join("\\")
    }

    /// The path relative to the share root as the kernel wants it: `/`-joined, `.` for the
    /// root. Safe because no component may contain `/` or be `.`/`..`.
    pub(crate) fn to_fs_relative(&self) -> String {
        if self.is_root() {
            ".".to_owned()
        } else {
            self.components.join("/")
        }
    }
}

impl fmt::Display for SharePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_smb_string())
    }
}

/// Checks one path component (a file name) against the rules of [`SharePath`].
pub fn validate_component(c: &str) -> Result<(), VfsError> {
    if c.is_empty() || c == "." || c == ".." || c.len() > MAX_COMPONENT_LEN {
        return Err(VfsError::InvalidName);
    }
    let bad = |ch: char| {
        // `:` would be stream syntax, which this VFS does not support.
        ch < '\u{20}' || matches!(ch, '"' | '*' | '<' | '>' | '?' | '|' | '/' | '\\' | ':')
    };
    if c.chars().any(bad) {
        return Err(VfsError::InvalidName);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps(p: &str) -> Option<Vec<String>> {
        SharePath::from_smb(p).ok().map(|p| p.components().to_vec())
    }

    #[test]
    fn valid_paths() {
        let table: &[(&str, &[&str])] = &[
            ("", &[]),
            ("\\", &[]),
            ("a", &["a"]),
            ("\\a", &["a"]),
            ("a\\", &["a"]),
            ("\\a\\b\\", &["a", "b"]),
            ("dir\\file.txt", &["dir", "file.txt"]),
            ("...", &["..."]),
            (".hidden", &[".hidden"]),
            ("spa ce\\ünïcødé 日本", &["spa ce", "ünïcødé 日本"]),
        ];
        for (input, want) in table {
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(comps(input), Some(want), "input {input:?}");
        }
    }

    #[test]
    fn invalid_paths() {
        let long = "x".repeat(256);
        let huge = "abc\\".repeat(9000);
        let table = [
            "a\\\\b",
            "\\\\a",
            "a\\\\",
            "\\\\",
            ".",
            "..",
            "a\\..\\b",
            "a\\.\\b",
            "..\\etc",
            "a/b",
            "/etc/passwd",
            "a:stream",
            "file::$DATA",
            "C:\\x",
            "a\0b",
            "a\x01b",
            "a\x1fb",
            "a\"b",
            "a*b",
            "a<b",
            "a>b",
            "a?b",
            "a|b",
            long.as_str(),
            huge.as_str(),
        ];
        for input in table {
            assert!(matches!(SharePath::from_smb(input), Err(VfsError::InvalidName)), "input {input:?} should be invalid");
        }
        // 255 bytes is still fine, even in multi-byte characters.
        assert!(SharePath::from_smb(&"x".repeat(255)).is_ok());
        assert!(SharePath::from_smb(&"é".repeat(128)).is_err());
    }

    #[test]
    fn accessors() {
        let p = SharePath::from_smb("\\a\\b\\c").unwrap();
        assert!(!p.is_root());
        assert_eq!(p.file_name(), Some("c"));
        assert_eq!(p.to_smb_string(), "a\\b\\c");
        assert_eq!(p.to_string(), "a\\b\\c");
        assert_eq!(p.to_fs_relative(), "a/b/c");
        let parent = p.parent().unwrap();
        assert_eq!(parent.to_smb_string(), "a\\b");
        let root = SharePath::from_smb("").unwrap();
        assert!(root.is_root());
        assert_eq!(root.parent(), None);
        assert_eq!(root.file_name(), None);
        assert_eq!(root.to_fs_relative(), ".");
        assert_eq!(root.join("x").unwrap(), SharePath::from_smb("x").unwrap());
        assert!(matches!(p.join(".."), Err(VfsError::InvalidName)));
        assert!(matches!(p.join("a\\b"), Err(VfsError::InvalidName)));
        assert!(matches!(p.join(""), Err(VfsError::InvalidName)));
    }
}
