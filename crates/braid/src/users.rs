//! `braid user add` / `braid user del`: editing `[[user]]` entries in place, keeping the
//! rest of the file (comments, order, formatting) untouched.

use std::path::Path;

use anyhow::{anyhow, Context};
use toml_edit::{value, ArrayOfTables, DocumentMut, Item, Table};

use crate::{fsutil, names};

/// What `add_user` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// A new `[[user]]` entry was appended.
    New,
    /// An existing user's `nt_hash` was replaced.
    Updated,
}

/// Adds (or with `update`, adds or replaces) user `name` with `nt_hash` in the config file.
pub fn add_to_file(path: &Path, name: &str, nt_hash: &[u8; 16], update: bool) -> anyhow::Result<Added> {
    let text = read(path)?;
    let (new_text, added) = add_user(&text, name, nt_hash, update).map_err(|e| at(path, e))?;
    fsutil::replace_file(path, &new_text)?;
    Ok(added)
}

/// Removes user `name` from the config file and from every share's `users` list; returns
/// how many shares' lists changed.
pub fn del_from_file(path: &Path, name: &str) -> anyhow::Result<usize> {
    let text = read(path)?;
    let (new_text, shares) = del_user(&text, name).map_err(|e| at(path, e))?;
    fsutil::replace_file(path, &new_text)?;
    Ok(shares)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Why an edit failed; `line` is set for syntax errors.
#[derive(Debug)]
pub struct EditError {
    /// 1-based line of a syntax error.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

fn fail<T>(message: String) -> Result<T, EditError> {
    Err(EditError { line: None, message })
}

/// Puts the file name in front of an edit error: `FILE:LINE: message` or `FILE: message`.
fn at(path: &Path, e: EditError) -> anyhow::Error {
    match e.line {
        Some(l) => anyhow!("{}:{l}: {}", path.display(), e.message),
        None => anyhow!("{}: {}", path.display(), e.message),
    }
}

fn parse(text: &str) -> Result<DocumentMut, EditError> {
    text.parse::<DocumentMut>().map_err(|e| EditError {
        line: e.span().map(|s| {
            let end = s.start.min(text.len());
            1 + text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count()
        }),
        message: e.message().trim().replace('\n', " "),
    })
}

fn same_name(item: Option<&Item>, name: &str) -> bool {
    item.and_then(Item::as_str).is_some_and(|n| n.to_lowercase() == name.to_lowercase())
}

fn users_table(doc: &mut DocumentMut) -> Result<Option<&mut ArrayOfTables>, EditError> {
    match doc.get_mut("user") {
        None => Ok(None),
        Some(Item::ArrayOfTables(a)) => Ok(Some(a)),
        Some(_) => fail("`user` must be written as [[user]] tables".into()),
    }
}

/// Adds user `name` to config `text`; returns the new text. See [`add_to_file`].
pub fn add_user(text: &str, name: &str, nt_hash: &[u8; 16], update: bool) -> Result<(String, Added), EditError> {
    if let Err(m) = names::check_user_name(name) {
        return fail(format!("user name {name:?} {m}"));
    }
    let mut doc = parse(text)?;
    let hash = hex::encode(nt_hash);

    let mut updated = false;
    if let Some(users) = users_table(&mut doc)? {
        let mut existing = users.iter_mut().find(|t| same_name(t.get("name"), name));
        if let Some(t) = existing.as_mut() {
            if !update {
                return fail(format!("user {name:?} already exists (use --update to change the password)"));
            }
            t.insert("nt_hash", value(hash.clone()));
            // A stray plaintext password would make the file invalid; drop it with the old hash.
            t.remove("password");
            updated = true;
        }
    }
    if updated {
        return Ok((doc.to_string(), Added::Updated));
    }

    let mut t = Table::new();
    t.insert("name", value(name));
    t.insert("nt_hash", value(hash));
    // Keep a blank line before the new table, as in hand-written files.
    t.decor_mut().set_prefix("\n");
    match users_table(&mut doc)? {
        // A new table without a position is written right after the last [[user]].
        Some(users) => users.push(t),
        None => {
            // First user: place it after [server] rather than after all shares.
            if let Some(pos) = doc.get("server").and_then(Item::as_table).and_then(Table::position) {
                t.set_position(pos);
            } else {
                t.set_position(0);
            }
            let mut users = ArrayOfTables::new();
            users.push(t);
            doc.insert("user", Item::ArrayOfTables(users));
        }
    }
    Ok((doc.to_string(), Added::New))
}

/// Removes user `name` from config `text`; returns the new text and the number of shares
/// whose `users` list changed.
///
/// Refuses when the user is the only one allowed on a share: an empty `users` list means
/// "everyone", so removing the last name would silently open the share to all users.
pub fn del_user(text: &str, name: &str) -> Result<(String, usize), EditError> {
    let mut doc = parse(text)?;
    let no_such = || EditError { line: None, message: format!("no user named {name:?}") };
    let users = users_table(&mut doc)?.ok_or_else(no_such)?;
    let index = users.iter().position(|t| same_name(t.get("name"), name)).ok_or_else(no_such)?;
    users.remove(index);
    if users.is_empty() {
        doc.remove("user");
    }

    let mut changed = 0;
    if let Some(Item::ArrayOfTables(shares)) = doc.get_mut("share") {
        for share in shares.iter_mut() {
            let share_name = share.get("name").and_then(Item::as_str).unwrap_or("?").to_string();
            let Some(list) = share.get_mut("users").and_then(Item::as_array_mut) else {
                continue;
            };
            let before = list.len();
            // The first element's leading space/newline is kept for whatever becomes first.
            let first_prefix = list.get(0).and_then(|v| v.decor().prefix()).and_then(|p| p.as_str()).map(str::to_string);
            list.retain(|v| match v.as_str() {
                Some(n) => n.to_lowercase() != name.to_lowercase(),
                None => true,
            });
            if list.len() == before {
                continue;
            }
            if list.is_empty() {
                return fail(format!(
                    "user {name:?} is the only user allowed on share {share_name:?}; \
                     change that share's `users` first (an empty list allows everyone)"
                ));
            }
            if let (Some(p), Some(first)) = (first_prefix, list.get_mut(0)) {
                first.decor_mut().set_prefix(p);
            }
            changed += 1;
        }
    }
    Ok((doc.to_string(), changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: [u8; 16] = [0xab; 16];

    const FILE: &str = r#"# main config
[server]
listen = ["127.0.0.1:4455"] # loopback only

# the admin
[[user]]
name = "alice"
nt_hash = "00000000000000000000000000000000"

[[user]]
name = "bob"   # bob's account
nt_hash = "11111111111111111111111111111111"

# shared stuff
[[share]]
name = "data"
path = "/tmp"
users = ["alice", "bob"]   # both
"#;

    #[test]
    fn add_then_del_round_trip_keeps_comments() {
        let (added, how) = add_user(FILE, "carol", &HASH, false).unwrap();
        assert_eq!(how, Added::New);
        let expected_user = format!(
            "nt_hash = \"11111111111111111111111111111111\"\n\n[[user]]\nname = \"carol\"\nnt_hash = \"{}\"\n\n# shared stuff\n",
            hex::encode(HASH)
        );
        assert!(added.contains(&expected_user), "{added}");
        assert!(added.contains("# main config"));
        assert!(added.contains("# loopback only"));
        assert!(added.contains("name = \"bob\"   # bob's account"));

        let (removed, shares) = del_user(&added, "carol").unwrap();
        assert_eq!(shares, 0);
        assert_eq!(removed, FILE);
    }

    #[test]
    fn existing_user_needs_update() {
        let err = add_user(FILE, "ALICE", &HASH, false).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        let (updated, how) = add_user(FILE, "alice", &HASH, true).unwrap();
        assert_eq!(how, Added::Updated);
        assert!(updated.contains(&hex::encode(HASH)));
        assert!(!updated.contains("00000000000000000000000000000000"));
        assert!(updated.contains("# the admin"));
    }

    #[test]
    fn del_removes_from_share_lists() {
        let (out, shares) = del_user(FILE, "alice").unwrap();
        assert_eq!(shares, 1);
        assert!(out.contains("users = [\"bob\"]   # both"), "{out}");
        assert!(!out.contains("alice"));
        assert!(out.contains("# main config"));
    }

    #[test]
    fn del_refuses_to_open_a_share_to_everyone() {
        let (once, _) = del_user(FILE, "alice").unwrap();
        let err = del_user(&once, "bob").unwrap_err();
        assert!(err.to_string().contains("only user allowed"), "{err}");
    }

    #[test]
    fn del_unknown_user_fails() {
        assert!(del_user(FILE, "zed").unwrap_err().to_string().contains("no user named"));
    }

    #[test]
    fn first_user_goes_after_server() {
        let text = "[server]\nlisten = [\"127.0.0.1:4455\"]\n\n[[share]]\nname = \"d\"\npath = \"/tmp\"\n";
        let (out, _) = add_user(text, "alice", &HASH, false).unwrap();
        let user = out.find("[[user]]").unwrap();
        assert!(user < out.find("[[share]]").unwrap(), "{out}");
        assert!(user > out.find("[server]").unwrap(), "{out}");
    }

    #[test]
    fn bad_names_and_syntax_are_refused() {
        assert!(add_user(FILE, "a,b", &HASH, false).is_err());
        let err = add_user("[server\n", "alice", &HASH, false).unwrap_err();
        assert_eq!(err.line, Some(1), "{err}");
    }
}
