//! The SMB1 multi-protocol NEGOTIATE that older clients send first (MS-SMB2 3.3.5.3.1).
//! Only enough is parsed to pick the SMB2 answer; no other SMB1 command is served.

/// SMB1 ProtocolId.
pub const SMB1_PROTOCOL_ID: [u8; 4] = [0xFF, b'S', b'M', b'B'];
const SMB1_COM_NEGOTIATE: u8 = 0x72;

/// What an SMB1 negotiate asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Smb1Negotiate {
    /// "SMB 2.???" offered: answer with the 0x02FF wildcard and expect an SMB2 NEGOTIATE.
    Wildcard,
    /// Only "SMB 2.002" offered: answer with dialect 2.0.2.
    Smb202,
    /// No SMB2 dialect offered.
    NoSmb2,
}

/// Parses an SMB1 NEGOTIATE; `None` if `msg` is not one.
pub fn parse_negotiate(msg: &[u8]) -> Option<Smb1Negotiate> {
    // 32-byte SMB1 header, WordCount (must be 0), ByteCount, then 0x02-prefixed strings.
    if msg.len() < 35 || msg[..4] != SMB1_PROTOCOL_ID || msg[4] != SMB1_COM_NEGOTIATE || msg[32] != 0 {
        return None;
    }
    let count = usize::from(u16::from_le_bytes([msg[33], msg[34]]));
    let bytes = msg.get(35..35 + count)?;
    let mut result = Smb1Negotiate::NoSmb2;
    for s in bytes.split(|b| *b == 0) {
        match s {
            [0x02, rest @ ..] if rest == b"SMB 2.???" => return Some(Smb1Negotiate::Wildcard),
            [0x02, rest @ ..] if rest == b"SMB 2.002" => result = Smb1Negotiate::Smb202,
            _ => {}
        }
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiate(dialects: &[&str]) -> Vec<u8> {
        let mut m = vec![0u8; 32];
        m[..4].copy_from_slice(&SMB1_PROTOCOL_ID);
        m[4] = SMB1_COM_NEGOTIATE;
        let mut b = Vec::new();
        for d in dialects {
            b.push(2);
            b.extend_from_slice(d.as_bytes());
            b.push(0);
        }
        m.push(0);
        m.extend_from_slice(&(b.len() as u16).to_le_bytes());
        m.extend_from_slice(&b);
        m
    }

    #[test]
    fn picks_smb2_answer() {
        assert_eq!(parse_negotiate(&negotiate(&["NT LM 0.12", "SMB 2.002", "SMB 2.???"])), Some(Smb1Negotiate::Wildcard));
        assert_eq!(parse_negotiate(&negotiate(&["NT LM 0.12", "SMB 2.002"])), Some(Smb1Negotiate::Smb202));
        assert_eq!(parse_negotiate(&negotiate(&["NT LM 0.12"])), Some(Smb1Negotiate::NoSmb2));
        assert_eq!(parse_negotiate(&[0xff, b'S', b'M', b'B']), None);
    }
}
