//! Telling systemd how the service is doing (`Type=notify`, sd_notify(3)): one datagram
//! to the socket `$NOTIFY_SOCKET` names. Outside systemd the variable is unset and nothing
//! is sent.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (e.g. "READY=1", "RELOADING=1", "STOPPING=1"); failures are ignored, as
/// sd_notify's are.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let Ok(sock) = UnixDatagram::unbound() else { return };
    let bytes = path.as_encoded_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        // An abstract socket address ("@name").
        Some(name) => abstract_addr(name).and_then(|a| sock.send_to_addr(state.as_bytes(), &a)),
        None => sock.send_to(state.as_bytes(), &path),
    };
    if let Err(e) = sent {
        tracing::debug!(error = %e, "sd_notify failed");
    }
}

#[cfg(target_os = "linux")]
fn abstract_addr(name: &[u8]) -> std::io::Result<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    std::os::unix::net::SocketAddr::from_abstract_name(name)
}

#[cfg(not(target_os = "linux"))]
fn abstract_addr(_name: &[u8]) -> std::io::Result<std::os::unix::net::SocketAddr> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_reaches_the_notify_socket() {
        let dir = std::env::temp_dir().join(format!("braid-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        // The variable is read per call; no other test of this binary reads it.
        std::env::set_var("NOTIFY_SOCKET", &path);
        notify("READY=1");
        std::env::remove_var("NOTIFY_SOCKET");
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
