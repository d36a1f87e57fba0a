//! A minimal RFC 4180 CSV writer (quotes only fields that need it).

/// Quotes a field when it holds a comma, quote or line break.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Builds CSV text from a header and rows.
pub fn to_csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = header.iter().map(|h| field(h)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in rows {
        out.push_str(&r.iter().map(|f| field(f)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        let csv = to_csv(&["a", "b"], &[vec!["x,y".into(), "say \"hi\"".into()], vec!["1".into(), "2".into()]]);
        assert_eq!(csv, "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n1,2\n");
    }
}
