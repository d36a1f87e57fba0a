//! 8.3 alternate names (MS-FSCC 2.1.5.2.1 / MS-FSA 2.1.5.11.3 FileAlternateNameInformation).
//!
//! A name that already fits the 8.3 form is its own short name. Longer names get a
//! Windows-style hashed form (`AB12CD~1.TXT`): two leading characters, four hex digits of a
//! stable hash of the whole name and `~1`, so different long names in one directory are
//! unlikely to share a short name without the server keeping a table of them.

/// Characters allowed in an 8.3 name besides ASCII letters and digits.
const SPECIAL: &[u8] = b"!#$%&'()-@^_`{}~";

fn valid_83_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || SPECIAL.contains(&c)
}

/// Whether `name` is already a valid 8.3 name (1-8 characters, optionally a dot and 1-3
/// more, all from the 8.3 character set).
fn is_83(name: &str) -> bool {
    let b = name.as_bytes();
    let (base, ext) = match name.rfind('.') {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    let ok = |p: &[u8]| p.iter().all(|&c| valid_83_char(c));
    (1..=8).contains(&base.len()) && ok(base) && ext.is_none_or(|e| (1..=3).contains(&e.len()) && ok(e))
}

/// FNV-1a over the case-folded name: stable across runs and platforms.
fn hash(name: &str) -> u16 {
    let mut h: u32 = 0x811c_9dc5;
    for c in name.bytes().map(|c| c.to_ascii_uppercase()) {
        h ^= u32::from(c);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h ^ (h >> 16)) as u16
}

/// The 8.3 short name of the file name `name` (one component), or None for "." and ".."
/// and the empty name (the share root), which have none.
pub fn short_name(name: &str) -> Option<String> {
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    if is_83(name) {
        return Some(name.to_ascii_uppercase());
    }
    let upper_valid = |s: &str| -> String { s.bytes().filter(|&c| valid_83_char(c)).map(|c| char::from(c.to_ascii_uppercase())).collect() };
    // The extension is what follows the last dot, unless the name starts with that dot.
    let (base, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], upper_valid(&name[i + 1..])),
        _ => (name, String::new()),
    };
    let mut prefix: String = upper_valid(base).chars().take(2).collect();
    if prefix.is_empty() {
        prefix.push('_');
    }
    let mut out = format!("{prefix}{:04X}~1", hash(name));
    if !ext.is_empty() {
        out.push('.');
        out.extend(ext.chars().take(3));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(short_name("abc.txt").as_deref(), Some("ABC.TXT"));
        assert_eq!(short_name("README").as_deref(), Some("README"));
        assert_eq!(short_name("."), None);
        assert_eq!(short_name(""), None);
        let s = short_name("torture_search.txt").unwrap();
        assert!(s.starts_with("TO") && s.ends_with("~1.TXT") && s.len() == 12, "{s}");
        assert_ne!(short_name("long name one.doc"), short_name("long name two.doc"));
        let s = short_name(".bashrc_long").unwrap();
        assert!(s.len() <= 12 && !s.contains('.'), "{s}");
        let s = short_name("ünïcödé.txt").unwrap();
        assert!(s.is_ascii() && s.len() <= 12, "{s}");
        assert!(short_name("a.b.c.d.e.f.g").unwrap().len() <= 12);
    }
}
