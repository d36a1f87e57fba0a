//! NFS file handles: what a client holds to name a file, stable across server restarts.
//!
//! Layout (at most 64 bytes, RFC 1813's NFS3_FHSIZE): a version byte, the 4-byte export id
//! (a hash of the share name, so handles survive reordering the configuration), the
//! backend's file token (at most 40 bytes, `Backend::file_token`), and 16 bytes of
//! HMAC-SHA256 over all of that under a key kept in `<state_dir>/nfs-handle.key`. The MAC
//! makes handles unforgeable: a client cannot name a file by guessing its inode token,
//! which `open_by_handle_at` would otherwise accept for any file of the file system.

use std::io::{Read, Write};
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Format version of the handle layout.
const VERSION: u8 = 1;
/// Bytes of MAC kept (truncated HMAC-SHA256).
const MAC_LEN: usize = 16;
/// Version byte and export id.
const HEAD_LEN: usize = 5;
/// Largest backend token a handle carries.
pub const MAX_TOKEN: usize = 40;
/// Largest handle (NFS3_FHSIZE).
pub const MAX_HANDLE: usize = 64;
/// Bytes of the handle key.
const KEY_LEN: usize = 32;
/// The key file inside the state directory.
pub const KEY_FILE: &str = "nfs-handle.key";

/// Why a handle was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleError {
    /// Malformed, unknown version or wrong MAC: NFS3ERR_BADHANDLE.
    Bad,
}

/// A decoded, authenticated handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub export_id: u32,
    pub token: &'a [u8],
}

/// Makes and checks handles under one key.
pub struct HandleKey {
    key: [u8; KEY_LEN],
}

impl std::fmt::Debug for HandleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandleKey(..)")
    }
}

/// The export id of share `name`: the first four bytes of SHA-256 of the name.
pub fn export_id(name: &str) -> u32 {
    let d = Sha256::digest(name.as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

impl HandleKey {
    /// A key from bytes (tests).
    pub fn from_bytes(key: [u8; KEY_LEN]) -> Self {
        HandleKey { key }
    }

    /// Reads the key from `<state_dir>/nfs-handle.key`, creating the directory (0700) and a
    /// random key (0600) on first start. A key file of the wrong size is an error, never
    /// silently replaced: that would make every handle clients hold stale.
    pub fn load_or_create(state_dir: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let ctx = |what: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {}: {e}", state_dir.display()));
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state_dir).map_err(|e| ctx("cannot create state_dir", e))?;
        let path = state_dir.join(KEY_FILE);
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
            Ok(mut f) => {
                let key: [u8; KEY_LEN] = rand::random();
                f.write_all(&key).and_then(|()| f.sync_all()).map_err(|e| ctx("cannot write the NFS handle key in", e))?;
                return Ok(HandleKey { key });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(ctx("cannot create the NFS handle key in", e)),
        }
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(KEY_LEN as u64 + 1).read_to_end(&mut bytes))
            .map_err(|e| ctx("cannot read the NFS handle key in", e))?;
        let key: [u8; KEY_LEN] = bytes
            .try_into()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} is not a {KEY_LEN}-byte key", path.display())))?;
        Ok(HandleKey { key })
    }

    fn mac(&self, body: &[u8]) -> [u8; MAC_LEN] {
        // HMAC accepts keys of any length: this cannot fail.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(body);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// The handle of the file with backend `token` in export `export_id`; None when the
    /// token is longer than a handle can carry.
    pub fn make(&self, export_id: u32, token: &[u8]) -> Option<Vec<u8>> {
        if token.len() > MAX_TOKEN {
            return None;
        }
        let mut h = Vec::with_capacity(HEAD_LEN + token.len() + MAC_LEN);
        h.push(VERSION);
        h.extend_from_slice(&export_id.to_be_bytes());
        h.extend_from_slice(token);
        let mac = self.mac(&h);
        h.extend_from_slice(&mac);
        Some(h)
    }

    /// Checks a handle's layout and MAC (in constant time) and splits it.
    pub fn check<'a>(&self, h: &'a [u8]) -> Result<Decoded<'a>, HandleError> {
        if h.len() < HEAD_LEN + MAC_LEN || h.len() > MAX_HANDLE || h[0] != VERSION {
            return Err(HandleError::Bad);
        }
        let (body, mac) = h.split_at(h.len() - MAC_LEN);
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(body);
        m.verify_truncated_left(mac).map_err(|_| HandleError::Bad)?;
        let export_id = u32::from_be_bytes([body[1], body[2], body[3], body[4]]);
        Ok(Decoded { export_id, token: &body[HEAD_LEN..] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let k = HandleKey::from_bytes([7; 32]);
        let h = k.make(42, b"token-bytes").unwrap();
        assert!(h.len() <= MAX_HANDLE);
        assert_eq!(k.check(&h).unwrap(), Decoded { export_id: 42, token: b"token-bytes" });
        for i in 0..h.len() {
            let mut bad = h.clone();
            bad[i] ^= 1;
            assert_eq!(k.check(&bad), Err(HandleError::Bad), "byte {i} flipped");
        }
        assert_eq!(HandleKey::from_bytes([8; 32]).check(&h), Err(HandleError::Bad), "another key");
        assert_eq!(k.check(&h[..h.len() - 1]), Err(HandleError::Bad));
        assert_eq!(k.check(&[]), Err(HandleError::Bad));
        assert!(k.make(1, &[0; MAX_TOKEN]).unwrap().len() <= MAX_HANDLE);
        assert!(k.make(1, &[0; MAX_TOKEN + 1]).is_none());
    }

    #[test]
    fn key_file_is_created_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("braid-nfs-key-{}", std::process::id()));
        let state = dir.join("state");
        let a = HandleKey::load_or_create(&state).unwrap();
        let b = HandleKey::load_or_create(&state).unwrap();
        assert_eq!(a.key, b.key);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&state).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(state.join(KEY_FILE)).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::write(state.join(KEY_FILE), b"short").unwrap();
        assert!(HandleKey::load_or_create(&state).is_err(), "a damaged key is not replaced");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn export_ids_differ_by_name() {
        assert_ne!(export_id("data"), export_id("Data"));
        assert_eq!(export_id("data"), export_id("data"));
    }
}
