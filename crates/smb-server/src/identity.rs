//! Who a session is to a security descriptor: its user's SID and the groups in its token.
//!
//! Braid's users are names in the configuration, so their SIDs are made from the names:
//! `S-1-5-21-<Braid's fixed machine part>-<RID>`, the RID from a hash of the lower-case
//! name (1000 and up, as local accounts are numbered), stable across restarts and reloads
//! so that stored ACLs keep naming the same user. Every named user acts on the share's
//! files as the server's one POSIX identity, so every named user is also in BUILTIN\
//! Administrators, the owner Braid reports for files without a stored descriptor; guests
//! are in BUILTIN\Guests, anonymous sessions are ANONYMOUS LOGON.

use smb_fscc::Sid;

use crate::session::User;

/// The machine part of Braid users' SIDs.
const MACHINE: &str = "S-1-5-21-3461712906-1092545710-2180893425";

fn sid(s: &str) -> Sid {
    s.parse().unwrap_or_else(|_| Sid::everyone())
}

/// A named user's SID.
pub fn user_sid(name: &str) -> Sid {
    // FNV-1a over the lower-case name: the same name gives the same RID everywhere.
    let mut h: u32 = 0x811C_9DC5;
    for b in name.to_lowercase().bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    sid(&format!("{MACHINE}-{}", 1000 + h % 0x3FFF_FC00))
}

/// The SIDs a session's token holds, its own first.
pub fn token(user: &User) -> Vec<Sid> {
    match user {
        User::Named(name) => vec![user_sid(name), sid("S-1-5-32-544"), sid("S-1-5-32-545"), Sid::everyone(), sid("S-1-5-11")],
        User::Guest => vec![sid(&format!("{MACHINE}-501")), sid("S-1-5-32-546"), Sid::everyone()],
        User::Anonymous => vec![sid("S-1-5-7"), Sid::everyone()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_gives_one_sid_whatever_its_case() {
        assert_eq!(user_sid("Alice"), user_sid("alice"));
        assert_ne!(user_sid("alice"), user_sid("bob"));
        assert!(user_sid("alice").to_string().starts_with(MACHINE));
        assert!(token(&User::Named("alice".into())).contains(&Sid::everyone()));
        assert!(!token(&User::Anonymous).contains(&sid("S-1-5-32-544")));
    }
}
