//! Rules for user, share and server names. Each check returns what is wrong, phrased to
//! follow "name" in a message (e.g. `share "a/b": name contains '/'`).

/// Characters Windows refuses in share names.
const SHARE_FORBIDDEN: &[char] = &['\\', '/', ':', '*', '?', '"', '<', '>', '|'];
/// Characters Windows refuses in account names.
const USER_FORBIDDEN: &[char] = &['"', '/', '\\', '[', ']', ':', ';', '|', '=', ',', '+', '*', '?', '<', '>'];

/// Checks a share name: 1..=80 characters, none of `\/:*?"<>|` or control characters, and
/// not the reserved `IPC$`.
pub fn check_share_name(name: &str) -> Result<(), String> {
    common(name, 80, SHARE_FORBIDDEN)?;
    if name.eq_ignore_ascii_case("IPC$") {
        return Err("\"IPC$\" is reserved".into());
    }
    Ok(())
}

/// Checks a user name: 1..=104 characters (the SAM limit), none of the characters
/// Windows refuses in account names, no control characters.
pub fn check_user_name(name: &str) -> Result<(), String> {
    common(name, 104, USER_FORBIDDEN)
}

/// Checks a NetBIOS-style server or domain name: 1..=15 ASCII letters, digits, `-` or `_`.
pub fn check_netbios_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 15 {
        return Err(format!("{name:?} must be 1 to 15 characters"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(format!("{name:?} contains {c:?} (only letters, digits, '-' and '_' are allowed)"));
    }
    Ok(())
}

fn common(name: &str, max: usize, forbidden: &[char]) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty".into());
    }
    let len = name.chars().count();
    if len > max {
        return Err(format!("is {len} characters long (at most {max})"));
    }
    if let Some(c) = name.chars().find(|c| c.is_control() || forbidden.contains(c)) {
        return Err(format!("contains {c:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_names() {
        assert!(check_share_name("data").is_ok());
        assert!(check_share_name("Backups$").is_ok());
        assert!(check_share_name("ipc$").is_err());
        assert!(check_share_name("").is_err());
        assert!(check_share_name(&"x".repeat(81)).is_err());
        assert!(check_share_name(&"x".repeat(80)).is_ok());
        for bad in ["a/b", "a\\b", "a:b", "a*", "a?", "a\"", "a<", "a>", "a|", "a\tb"] {
            assert!(check_share_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn user_and_server_names() {
        assert!(check_user_name("alice").is_ok());
        assert!(check_user_name("alice@example.com").is_ok());
        assert!(check_user_name("a,b").is_err());
        assert!(check_netbios_name("BRAID").is_ok());
        assert!(check_netbios_name("TOO-LONG-A-NAME-X").is_err());
        assert!(check_netbios_name("a b").is_err());
    }
}
