//! Share-relative paths, validated once when they come off the wire.

/// A validated path inside a share: zero or more components, none empty, `.`, `..`, or
/// containing `/`, `\`, `:`, NUL or other characters Windows forbids in names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SharePath {
    components: Vec<String>,
}
