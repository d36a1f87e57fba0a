//! Finding which key a byte offset belongs to, for messages from the TOML parser.

use toml_edit::{ImDocument, Item, Table};

/// A place in the file: a key and what it belongs to, or just a table.
pub struct Place {
    /// e.g. `server`, `share "data"`, `user "alice"`; `None` at the top level.
    pub owner: Option<String>,
    /// The key, unless the place is a table header.
    pub key: Option<String>,
}

impl Place {
    /// `server.listen`, `share "data": path`, `user "bob"`, ...
    pub fn describe(&self) -> String {
        match (&self.owner, &self.key) {
            (Some(o), Some(k)) if o == "server" => format!("server.{k}"),
            (Some(o), Some(k)) => format!("{o}: {k}"),
            (Some(o), None) => o.clone(),
            (None, Some(k)) => k.clone(),
            (None, None) => String::new(),
        }
    }
}

/// The key whose name or value covers `offset`, else the table whose header does, if
/// the text parses as TOML at all.
pub fn key_at(text: &str, offset: usize) -> Option<Place> {
    let doc = ImDocument::parse(text).ok()?;
    let root = doc.as_table();
    if let Some(key) = key_in(root, offset, false) {
        return Some(Place { owner: None, key: Some(key) });
    }
    let mut header = None;
    for (name, item) in root.iter() {
        let tables: Vec<&Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter().collect(),
            _ => continue,
        };
        for t in tables {
            let owner = match t.get("name").and_then(Item::as_str) {
                Some(n) if item.is_array_of_tables() => format!("{name} {n:?}"),
                _ => name.to_string(),
            };
            if let Some(key) = key_in(t, offset, true) {
                return Some(Place { owner: Some(owner), key: Some(key) });
            }
            if t.span().is_some_and(|r| r.contains(&offset)) {
                header = Some(Place { owner: Some(owner), key: None });
            }
        }
    }
    header
}

fn key_in(table: &Table, offset: usize, deep: bool) -> Option<String> {
    let hit = |r: Option<std::ops::Range<usize>>| r.is_some_and(|r| r.contains(&offset));
    for (key, item) in table.iter() {
        if !deep && !item.is_value() {
            continue;
        }
        let (k, _) = table.get_key_value(key)?;
        if hit(k.span()) || hit(item.span()) {
            return Some(key.to_string());
        }
    }
    None
}
