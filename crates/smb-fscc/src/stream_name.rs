//! Stream names in a path (MS-FSCC 2.1.4, 2.1.5.2): `file:stream:type`, where the type is
//! `$DATA` (case-insensitive) or absent, and `file::$DATA` names the file's unnamed (main)
//! data stream.

/// A path split into the file and the stream it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPath<'a> {
    /// The file's path, without any stream part (may be empty: the share root).
    pub file: &'a str,
    /// The named stream, if one is named; `None` for the main stream.
    pub stream: Option<&'a str>,
    /// Whether the name said `::$DATA` (the main stream, named explicitly): then the path
    /// can only be a file, never a directory.
    pub main_data: bool,
}

/// The one error of a malformed stream part: the name is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadStreamName;

/// Splits `path` (components separated by `\`) into file and stream. The stream part is
/// refused when a colon stands in a directory component, the stream name holds `\`, `/`,
/// `:` or NUL, the type is other than `$DATA`, or the name is empty without the `$DATA`
/// type (`file:` and `file::` are invalid; `file::$DATA` is the main stream).
pub fn split_stream_path(path: &str) -> Result<StreamPath<'_>, BadStreamName> {
    let Some((file, rest)) = path.split_once(':') else {
        return Ok(StreamPath { file: path, stream: None, main_data: false });
    };
    let (name, kind) = match rest.split_once(':') {
        Some((n, k)) => (n, Some(k)),
        None => (rest, None),
    };
    if let Some(k) = kind {
        if !k.eq_ignore_ascii_case("$DATA") {
            return Err(BadStreamName);
        }
    }
    if name.contains(['\\', '/', '\0']) {
        return Err(BadStreamName);
    }
    match (name.is_empty(), kind) {
        (true, Some(_)) => Ok(StreamPath { file, stream: None, main_data: true }),
        (true, None) => Err(BadStreamName),
        (false, _) => Ok(StreamPath { file, stream: Some(name), main_data: false }),
    }
}

/// The name FileStreamInformation reports for stream `name`: `:name:$DATA`, and `::$DATA`
/// for the main stream (`name` empty).
pub fn stream_display_name(name: &str) -> String {
    format!(":{name}:$DATA")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(p: &str) -> (&str, Option<&str>, bool) {
        let s = split_stream_path(p).unwrap();
        (s.file, s.stream, s.main_data)
    }

    #[test]
    fn plain_and_main_stream() {
        assert_eq!(ok("dir\\f.txt"), ("dir\\f.txt", None, false));
        assert_eq!(ok("f.txt::$DATA"), ("f.txt", None, true));
        assert_eq!(ok("f.txt::$dAtA"), ("f.txt", None, true));
        assert_eq!(ok(""), ("", None, false));
    }

    #[test]
    fn named_streams() {
        assert_eq!(ok("f.txt:Stream One"), ("f.txt", Some("Stream One"), false));
        assert_eq!(ok("f.txt:Second Stream:$DaTa"), ("f.txt", Some("Second Stream"), false));
        assert_eq!(ok("d\\f:\u{5}Stream\n One:$DATA"), ("d\\f", Some("\u{5}Stream\n One"), false));
        assert_eq!(ok("f:?Stream*:$DATA"), ("f", Some("?Stream*"), false));
        assert_eq!(ok(":root stream"), ("", Some("root stream"), false));
    }

    #[test]
    fn invalid_stream_parts() {
        for p in ["f:", "f::", "f:s:", "f:s:$FOO", "f:s:?D*a", "f:a\\b:$DATA", "f:a/b", "f:a:b:$DATA", "d:x\\f", "f:a\0b", "f:::$DATA"] {
            assert_eq!(split_stream_path(p), Err(BadStreamName), "{p:?}");
        }
        assert_eq!(stream_display_name("Zone.Identifier"), ":Zone.Identifier:$DATA");
        assert_eq!(stream_display_name(""), "::$DATA");
    }
}
