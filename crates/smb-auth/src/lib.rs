//! Authentication for SMB: SPNEGO (RFC 4178 / MS-SPNG) wrapping NTLMSSP (MS-NLMP).

use md4::{Digest, Md4};

/// The NT one-way function of a password: MD4 over its UTF-16LE encoding (MS-NLMP 3.3.1).
pub fn nt_hash(password: &str) -> [u8; 16] {
    let utf16: Vec<u8> = password.encode_utf16().flat_map(u16::to_le_bytes).collect();
    Md4::digest(&utf16).into()
}

#[cfg(test)]
mod tests {
    #[test]
    fn nt_hash_of_password() {
        // MS-NLMP 4.2.1: NTOWFv1("Password")
        assert_eq!(
            super::nt_hash("Password"),
            [0xa4, 0xf4, 0x9c, 0x40, 0x65, 0x10, 0xbd, 0xca, 0xb6, 0x82, 0x4e, 0xe7, 0xc3, 0x0f, 0xd8, 0x52]
        );
    }
}
