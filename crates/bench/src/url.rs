//! Target URLs: `smb://[DOMAIN;]user[:password]@host[:port]/share`.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::BenchError;

/// The default SMB port when the URL names none.
pub const DEFAULT_PORT: u16 = 445;

/// A parsed `smb://` target. The password is optional here; the CLI fills it from
/// `BRAID_BENCH_PASSWORD` or a prompt.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetUrl {
    /// Optional NTLM domain (`DOMAIN;user@...`).
    pub domain: Option<String>,
    /// User name.
    pub user: String,
    /// Password if the URL carried one.
    pub password: Option<String>,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Share name.
    pub share: String,
}

// Never print the password, not even in debug output.
impl fmt::Debug for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TargetUrl({self})")
    }
}

/// Displays the URL without its password (safe for reports and error lines).
impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let dom = self.domain.as_deref().map(|d| format!("{d};")).unwrap_or_default();
        write!(f, "smb://{dom}{}@{host}:{}/{}", self.user, self.port, self.share)
    }
}

fn percent_decode(s: &str, what: &str) -> Result<String, BenchError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(BenchError::BadInput(format!("bad %-escape in the {what} of the target URL")));
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| BenchError::BadInput(format!("the {what} of the target URL is not UTF-8")))
}

impl TargetUrl {
    /// Parses `smb://[DOMAIN;]user[:password]@host[:port]/share`. User and password may be
    /// %-escaped (`%40` for `@`, `%3A` for `:`).
    pub fn parse(s: &str) -> Result<Self, BenchError> {
        let bad = |why: &str| BenchError::BadInput(format!("bad target {:?}: {why} (expected smb://user[:password]@host[:port]/share)", redact(s)));
        let rest = s.strip_prefix("smb://").ok_or_else(|| bad("it must start with smb://"))?;
        // The last '@' separates credentials, so a raw '@' in a password still works.
        let (cred, hostpart) = rest.rsplit_once('@').ok_or_else(|| bad("no user@"))?;
        let (hostport, share) = hostpart.split_once('/').ok_or_else(|| bad("no /share"))?;
        let share = share.trim_end_matches('/');
        if share.is_empty() || share.contains('/') {
            return Err(bad("the path must be exactly one share name"));
        }
        let (userpart, password) = match cred.split_once(':') {
            Some((u, p)) => (u, Some(percent_decode(p, "password")?)),
            None => (cred, None),
        };
        let (domain, user) = match userpart.split_once(';') {
            Some((d, u)) => (Some(percent_decode(d, "domain")?), u),
            None => (None, userpart),
        };
        let user = percent_decode(user, "user")?;
        if user.is_empty() {
            return Err(bad("empty user name"));
        }
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed [ in the host"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ]"))?),
            };
            (h.to_string(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(|| bad("bad port"))?,
        };
        Ok(Self { domain, user, password, host, port, share: share.to_string() })
    }

    /// Resolves host:port to the first socket address.
    pub fn resolve(&self) -> Result<SocketAddr, BenchError> {
        let unresolved = |e: String| BenchError::Connect { target: self.to_string(), msg: format!("cannot resolve host {:?}: {e}", self.host) };
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| unresolved(e.to_string()))?
            .next()
            .ok_or_else(|| unresolved("no addresses".into()))
    }
}

/// Hides a password in a raw URL string for error messages.
fn redact(s: &str) -> String {
    match (s.find("://"), s.rfind('@')) {
        (Some(a), Some(b)) if a + 3 < b => {
            let cred = &s[a + 3..b];
            match cred.split_once(':') {
                Some((u, _)) => format!("{}{u}:***{}", &s[..a + 3], &s[b..]),
                None => s.to_string(),
            }
        }
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_url() {
        let t = TargetUrl::parse("smb://alice:pw@127.0.0.1:4455/data").unwrap();
        assert_eq!(t.user, "alice");
        assert_eq!(t.password.as_deref(), Some("pw"));
        assert_eq!(t.host, "127.0.0.1");
        assert_eq!(t.port, 4455);
        assert_eq!(t.share, "data");
        assert_eq!(t.domain, None);
        assert_eq!(t.to_string(), "smb://alice@127.0.0.1:4455/data");
        assert!(!format!("{t:?}").contains("pw"));
    }

    #[test]
    fn optional_parts_and_escapes() {
        let t = TargetUrl::parse("smb://CORP;bob@fileserver/share/").unwrap();
        assert_eq!(t.domain.as_deref(), Some("CORP"));
        assert_eq!(t.password, None);
        assert_eq!(t.port, 445);
        assert_eq!(t.share, "share");
        let t = TargetUrl::parse("smb://a%40b:p%3A@w@[::1]:4455/data").unwrap();
        assert_eq!(t.user, "a@b");
        assert_eq!(t.password.as_deref(), Some("p:@w"));
        assert_eq!(t.host, "::1");
        assert_eq!(t.to_string(), "smb://a@b@[::1]:4455/data");
        assert_eq!(t.resolve().unwrap().port(), 4455);
    }

    #[test]
    fn bad_urls() {
        for bad in [
            "http://a@b/c",
            "smb://host/share",
            "smb://u@host",
            "smb://u@host/",
            "smb://u@host/a/b",
            "smb://u@host:0/s",
            "smb://u@host:99999/s",
            "smb://u@:445/s",
            "smb://@host/s",
            "smb://u:%zz@host/s",
            "smb://u@[::1/s",
        ] {
            let e = TargetUrl::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("bad target") || e.starts_with("bad %-escape"), "{bad}: {e}");
        }
        let e = TargetUrl::parse("smb://u:secret@host").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}
