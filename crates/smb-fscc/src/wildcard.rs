//! QUERY_DIRECTORY name matching (MS-FSA 2.1.4.4, wildcard set per
//! MS-FSA 2.1.4.3).

/// MS-FSA 2.1.4.3 DOS_STAR: zero or more characters up to the final '.'.
const DOS_STAR: char = '<';
/// MS-FSA 2.1.4.3 DOS_QM: one character, or nothing at a '.' or name end.
const DOS_QM: char = '>';
/// MS-FSA 2.1.4.3 DOS_DOT: a '.' or nothing at name end.
const DOS_DOT: char = '"';

/// MS-FSA 2.1.4.3: true if `pattern` contains any of `* ? < > "`.
pub fn has_wildcards(pattern: &str) -> bool {
    pattern.chars().any(|c| matches!(c, '*' | '?' | DOS_STAR | DOS_QM | DOS_DOT))
}

/// Unicode simple uppercase: characters whose full uppercase mapping is
/// several characters (e.g. 'ß') are left alone, as the NTFS upcase table does.
fn upcase(c: char) -> char {
    let mut it = c.to_uppercase();
    match (it.next(), it.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// MS-FSA 2.1.4.4: case-insensitive match of `name` against `pattern`.
///
/// `*` matches zero or more characters, `?` exactly one, `<` (DOS_STAR)
/// zero or more up to but excluding the final '.', `>` (DOS_QM) any one
/// character except '.', or nothing at a '.' or the end of the name, `"`
/// (DOS_DOT) a '.' or nothing at the end of the name. Without wildcards this
/// is case-insensitive equality. Runs in O(pattern × name) time with
/// O(pattern) memory, so hostile patterns cannot cause blow-up.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    // Part 1 special cases of MS-FSA 2.1.4.4.
    match (pattern.is_empty(), name.is_empty()) {
        (true, true) => return true,
        (true, false) | (false, true) => return false,
        _ => {}
    }
    if pattern == "*" || pattern == "*.*" {
        return true;
    }
    let pat: Vec<char> = pattern.chars().map(upcase).collect();
    let nm: Vec<char> = name.chars().map(upcase).collect();
    // Index of the last '.' in the name: DOS_STAR may not consume it.
    let last_dot = nm.iter().rposition(|&c| c == '.');

    // Simulate the pattern as an NFA whose states are pattern positions;
    // state pat.len() is "whole pattern matched".
    let n_states = pat.len() + 1;
    let mut cur = vec![false; n_states];
    let mut next = vec![false; n_states];
    let mut stack = Vec::with_capacity(n_states);
    cur[0] = true;

    for pos in 0..=nm.len() {
        let ch = nm.get(pos).copied();
        close(&pat, &mut cur, &mut stack, ch);
        let Some(ch) = ch else { break };
        next.iter_mut().for_each(|s| *s = false);
        let mut any = false;
        for (i, &p) in pat.iter().enumerate() {
            if !cur[i] {
                continue;
            }
            let target = match p {
                '*' => Some(i),
                DOS_STAR if ch != '.' || last_dot != Some(pos) => Some(i),
                DOS_STAR => None,
                '?' => Some(i + 1),
                DOS_QM if ch != '.' => Some(i + 1),
                DOS_QM => None,
                DOS_DOT if ch == '.' => Some(i + 1),
                DOS_DOT => None,
                lit if lit == ch => Some(i + 1),
                _ => None,
            };
            if let Some(t) = target {
                next[t] = true;
                any = true;
            }
        }
        if !any {
            return false;
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur[pat.len()]
}

/// Adds the states reachable without consuming input, given the next name
/// character (`None` at the end of the name).
fn close(pat: &[char], set: &mut [bool], stack: &mut Vec<usize>, ch: Option<char>) {
    stack.clear();
    stack.extend((0..set.len()).filter(|&i| set[i]));
    while let Some(i) = stack.pop() {
        let Some(&p) = pat.get(i) else { continue };
        let skip = match p {
            '*' | DOS_STAR => true,
            DOS_QM => matches!(ch, None | Some('.')),
            DOS_DOT => ch.is_none(),
            _ => false,
        };
        if skip && !set[i + 1] {
            set[i + 1] = true;
            stack.push(i + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, &str, bool)] = &[
            // Special cases of MS-FSA 2.1.4.4 part 1.
            ("", "", true),
            ("", "a", false),
            ("a", "", false),
            ("*", "", false),
            ("*", "anything.at.all", true),
            ("*.*", "noext", true),
            // Plain names: case-insensitive equality.
            ("ABC", "abc", true),
            ("abc", "abd", false),
            ("abc", "abcd", false),
            ("ÄBÇ", "äbç", true),
            // '*' and '?'.
            ("*.txt", "a.txt", true),
            ("*.TXT", "a.txt", true),
            ("*.txt", "a.txt.bak", false),
            ("*.txt", ".txt", true),
            ("a*", "a", true),
            ("*a", "bba", true),
            ("*a*b", "xaxb", true),
            ("*a*b", "xaxbc", false),
            ("a?c", "abc", true),
            ("a?c", "a.c", true),
            ("a?c", "ac", false),
            ("a?c", "abcd", false),
            ("??", "ab", true),
            ("??", "a", false),
            // DOS_STAR '<': up to the final dot.
            ("<.txt", "a.txt", true),
            ("<.txt", "a.b.txt", true),
            ("<.txt", "atxt", false),
            ("<", "abc", true),
            ("<", "a.b", false),
            ("<.<", "a.b.c", true),
            // DOS "*." sent as <" : names without an extension.
            ("<\"", "abc", true),
            ("<\"", "abc.", true),
            ("<\"", "a.b", false),
            // DOS_QM '>': one char, or nothing at '.' / end.
            ("a>>", "a", true),
            ("a>>", "ab", true),
            ("a>>", "abc", true),
            ("a>>", "abcd", false),
            ("a>>.txt", "a.txt", true),
            ("a>>.txt", "ab.txt", true),
            ("a>>.txt", "abcd.txt", false),
            (">", ".", false),
            // DOS_DOT '"': a dot, or nothing at the end.
            ("a\"", "a", true),
            ("a\"", "a.", true),
            ("a\"", "ab", false),
            ("a\"b", "a.b", true),
            ("a\"b", "ab", false),
        ];
        for &(p, n, want) in cases {
            assert_eq!(wildcard_match(p, n), want, "pattern {p:?} name {n:?}");
        }
    }

    #[test]
    fn detects_wildcards() {
        for p in ["*", "a?", "<", ">", "\""] {
            assert!(has_wildcards(p));
        }
        assert!(!has_wildcards("plain.txt"));
        assert!(!has_wildcards(""));
    }

    #[test]
    fn hostile_pattern_is_fast() {
        let p = "*a".repeat(2000) + "b";
        let n = "a".repeat(255);
        assert!(!wildcard_match(&p, &n));
    }
}
