//! NFS target URLs: `nfs://host[:port]/export[?mountport=P&uid=N&gid=N]`.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::BenchError;

/// The NFS port when the URL names none.
pub const DEFAULT_NFS_PORT: u16 = 2049;

/// A parsed `nfs://` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfsUrl {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// The NFS port.
    pub port: u16,
    /// The MOUNT port (Braid serves MOUNT on the NFS port; other servers may not).
    pub mount_port: u16,
    /// The export path MOUNT is asked for, with its leading `/`.
    pub export: String,
    /// AUTH_SYS uid (default: the process's).
    pub uid: Option<u32>,
    /// AUTH_SYS gid (default: the process's).
    pub gid: Option<u32>,
}

impl fmt::Display for NfsUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        write!(f, "nfs://{host}:{}{}", self.port, self.export)?;
        if self.mount_port != self.port {
            write!(f, "?mountport={}", self.mount_port)?;
        }
        Ok(())
    }
}

fn port(s: &str) -> Option<u16> {
    s.parse::<u16>().ok().filter(|&p| p != 0)
}

impl NfsUrl {
    /// Parses `nfs://host[:port]/export[?mountport=P&uid=N&gid=N]`.
    pub fn parse(s: &str) -> Result<Self, BenchError> {
        let bad = |why: &str| BenchError::BadInput(format!("bad target {s:?}: {why} (expected nfs://host[:port]/export)"));
        let rest = s.strip_prefix("nfs://").ok_or_else(|| bad("it must start with nfs://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (hostport, path) = rest.split_once('/').ok_or_else(|| bad("no /export"))?;
        let export = format!("/{}", path.trim_end_matches('/'));
        if export == "/" {
            return Err(bad("empty export path"));
        }
        let (host, p) = split_host_port(hostport).ok_or_else(|| bad("bad host or port"))?;
        let port = match p {
            None => DEFAULT_NFS_PORT,
            Some(p) => self::port(p).ok_or_else(|| bad("bad port"))?,
        };
        let mut url = NfsUrl { host, port, mount_port: port, export, uid: None, gid: None };
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| bad("query items are key=value"))?;
            match k {
                "mountport" => url.mount_port = self::port(v).ok_or_else(|| bad("bad mountport"))?,
                "uid" => url.uid = Some(v.parse().map_err(|_| bad("bad uid"))?),
                "gid" => url.gid = Some(v.parse().map_err(|_| bad("bad gid"))?),
                _ => return Err(bad(&format!("unknown query item {k:?} (mountport, uid, gid)"))),
            }
        }
        Ok(url)
    }

    /// Resolves host and the two ports.
    pub fn resolve(&self) -> Result<(SocketAddr, SocketAddr), BenchError> {
        let unresolved = |e: String| BenchError::Connect { target: self.to_string(), msg: format!("cannot resolve host {:?}: {e}", self.host) };
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| unresolved(e.to_string()))?
            .next()
            .ok_or_else(|| unresolved("no addresses".into()))?;
        Ok((addr, SocketAddr::new(addr.ip(), self.mount_port)))
    }
}

fn split_host_port(hostport: &str) -> Option<(String, Option<&str>)> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h, if after.is_empty() { None } else { Some(after.strip_prefix(':')?) })
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    (!host.is_empty()).then(|| (host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = NfsUrl::parse("nfs://127.0.0.1:20490/data").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.mount_port, u.export.as_str()), ("127.0.0.1", 20490, 20490, "/data"));
        assert_eq!(u.to_string(), "nfs://127.0.0.1:20490/data");
        let u = NfsUrl::parse("nfs://[::1]/a/b/?mountport=5&uid=7&gid=8").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.mount_port, u.export.as_str()), ("::1", 2049, 5, "/a/b"));
        assert_eq!((u.uid, u.gid), (Some(7), Some(8)));
        assert_eq!(u.to_string(), "nfs://[::1]:2049/a/b?mountport=5");
        for bad in ["smb://h/x", "nfs://h", "nfs://h/", "nfs://:1/x", "nfs://h:0/x", "nfs://h/x?mountport=0", "nfs://h/x?foo=1", "nfs://h/x?uid=-1"] {
            assert!(NfsUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
