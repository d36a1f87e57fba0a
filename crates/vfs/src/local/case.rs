//! Case-insensitive, case-preserving name lookup, as Windows clients expect.
//!
//! Names are stored with the spelling they were created with. When a component is not found
//! with the client's exact spelling, the parent directory is scanned for an entry that is
//! equal under simple case folding; an exact match always wins, otherwise the first match in
//! byte order. The result is a [`SharePath`] of on-disk spellings that the caller then opens
//! through the ordinary `openat2(RESOLVE_BENEATH)` path, so this module never widens what can
//! be reached: it only reads directory entries of directories already resolved beneath the
//! root, and compares single validated components.

use super::meta::statx_at;
use super::{open_beneath, Root};
use crate::path::validate_component;
use crate::{SharePath, VfsError};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{openat, AtFlags, Dir, Mode, OFlags};

/// The single character `it` yields, if it yields exactly one.
fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
    let c = it.next()?;
    it.next().is_none().then_some(c)
}

/// Simple (one-to-one) case folding of `c`.
///
/// std offers only the full mappings; restricting them to their one-character results and
/// going through upper case first gives the simple folding for practically every character
/// (`ſ`→`s`, `ς`→`σ`, `K` (Kelvin)→`k`) while leaving characters whose only mapping is
/// multi-character (`ß`, `İ`) alone, as simple folding does.
pub(crate) fn fold_char(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let up = single(c.to_uppercase()).unwrap_or(c);
    single(up.to_lowercase()).unwrap_or(up)
}

/// Whether `a` and `b` are equal under simple case folding.
pub(crate) fn eq_fold(a: &str, b: &str) -> bool {
    // Simple folding maps characters one to one, so the character counts must agree.
    let mut ai = a.chars();
    let mut bi = b.chars();
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x == y || fold_char(x) == fold_char(y) => {}
            _ => return false,
        }
    }
}

/// Whether `name` could match a different spelling at all: names made only of ASCII
/// characters without case (digits, punctuation) have a single spelling, and the scan can
/// be skipped for them.
pub(crate) fn has_case_variants(name: &str) -> bool {
    name.chars().any(|c| !c.is_ascii() || c.is_ascii_alphabetic())
}

/// The entry of directory `dir` that matches `name` case-insensitively: `name` itself if
/// present, otherwise the first match in byte order. `None` when nothing matches or the
/// directory cannot be read.
pub(crate) fn find_in_dir(dir: BorrowedFd<'_>, name: &str) -> Option<String> {
    if !has_case_variants(name) {
        return None;
    }
    // `dir` may be an O_PATH fd, which getdents refuses: reopen the same directory (".",
    // never a traversal) for reading.
    let fd = openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut entries = Dir::new(fd).ok()?;
    let mut best: Option<String> = None;
    while let Some(ent) = entries.read() {
        // A failing read ends the scan; what was found so far still counts.
        let Ok(ent) = ent else { break };
        let bytes = ent.file_name().to_bytes();
        if bytes == name.as_bytes() {
            return Some(name.to_owned());
        }
        let Ok(cand) = std::str::from_utf8(bytes) else {
            continue;
        };
        // Only names a client could have spelled are candidates (this also skips . and ..).
        if validate_component(cand).is_err() || !eq_fold(cand, name) {
            continue;
        }
        if best.as_deref().is_none_or(|b| cand.as_bytes() < b.as_bytes()) {
            best = Some(cand.to_owned());
        }
    }
    best
}

/// `path` with each component replaced by its on-disk spelling where only a differently
/// cased entry exists; `None` if nothing had to change. Resolution stops at the first
/// component that matches nothing (or cannot be searched); the rest is kept as given, so
/// the caller's lookup fails as it would have.
pub(crate) fn resolve(root: &Root, path: &SharePath) -> Option<SharePath> {
    let comps = path.components();
    let mut out: Vec<String> = Vec::with_capacity(comps.len());
    let mut changed = false;
    // The directory the next component lives in; `None` is the root.
    let mut dir: Option<OwnedFd> = None;
    for (i, c) in comps.iter().enumerate() {
        let dfd = dir.as_ref().map_or(root.fd.as_fd(), |d| d.as_fd());
        let found = match statx_at(dfd, c, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Some(c.clone()),
            Err(VfsError::NotFound) => {
                let f = find_in_dir(dfd, c);
                changed |= f.is_some();
                f
            }
            Err(_) => None,
        };
        let Some(name) = found else {
            out.extend(comps[i..].iter().cloned());
            break;
        };
        out.push(name);
        if i + 1 < comps.len() {
            // Descend the way every lookup does, beneath the root, so a symlink in the
            // path is followed only while it stays inside the share.
            let rel = out.join("/");
            match open_beneath(root, &rel, OFlags::PATH | OFlags::DIRECTORY) {
                Ok(fd) => dir = Some(fd),
                Err(_) => {
                    out.extend(comps[i + 1..].iter().cloned());
                    break;
                }
            }
        }
    }
    changed.then(|| SharePath::from_components(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding() {
        assert!(eq_fold("foo.TXT", "FOO.txt"));
        assert!(eq_fold("ÄÖÜ", "äöü"));
        assert!(eq_fold("ΣΑΣ", "σας"));
        assert!(eq_fold("\u{212A}elvin", "kelvin"));
        assert!(eq_fold("ſ", "S"));
        assert!(!eq_fold("foo", "fooo"));
        assert!(!eq_fold("ß", "ss"));
        assert!(!eq_fold("a", "b"));
        assert!(eq_fold("", ""));
        assert!(!has_case_variants("0123-_.txt".trim_end_matches(".txt")));
        assert!(has_case_variants("1é"));
    }
}
