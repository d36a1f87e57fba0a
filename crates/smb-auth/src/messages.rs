//! NTLMSSP message encoding and decoding (MS-NLMP 2.2.1, 2.2.2).

use crate::{crypto::utf16le, flags, AuthError};

/// Every NTLMSSP message starts with this signature (MS-NLMP 2.2.1).
pub(crate) const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";
/// MessageType of NEGOTIATE_MESSAGE.
pub(crate) const TYPE_NEGOTIATE: u32 = 1;
/// MessageType of CHALLENGE_MESSAGE.
pub(crate) const TYPE_CHALLENGE: u32 = 2;
/// MessageType of AUTHENTICATE_MESSAGE.
pub(crate) const TYPE_AUTHENTICATE: u32 = 3;

/// Fixed header size of a NEGOTIATE_MESSAGE including Version.
const NEGOTIATE_HEADER: usize = 40;
/// Fixed header size of a CHALLENGE_MESSAGE including Version.
const CHALLENGE_HEADER: usize = 56;
/// Offset of the MIC within an AUTHENTICATE_MESSAGE (MS-NLMP 2.2.1.3).
pub(crate) const MIC_OFFSET: usize = 72;
/// Fixed header size of an AUTHENTICATE_MESSAGE including Version and MIC.
pub(crate) const AUTHENTICATE_HEADER: usize = 88;

/// The VERSION structure we announce (MS-NLMP 2.2.2.10): 10.0 build 20348,
/// NTLMSSP_REVISION_W2K3 (0x0F).
pub(crate) const OUR_VERSION: [u8; 8] = [10, 0, 0x7c, 0x4f, 0, 0, 0, 0x0f];

/// AV_PAIR identifiers (MS-NLMP 2.2.2.1).
pub(crate) mod av {
    /// MsvAvEOL: end of list.
    pub const EOL: u16 = 0;
    /// MsvAvNbComputerName.
    pub const NB_COMPUTER_NAME: u16 = 1;
    /// MsvAvNbDomainName.
    pub const NB_DOMAIN_NAME: u16 = 2;
    /// MsvAvDnsComputerName.
    pub const DNS_COMPUTER_NAME: u16 = 3;
    /// MsvAvDnsDomainName.
    pub const DNS_DOMAIN_NAME: u16 = 4;
    /// MsvAvFlags.
    pub const FLAGS: u16 = 6;
    /// MsvAvTimestamp.
    pub const TIMESTAMP: u16 = 7;
    /// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
    pub const FLAG_MIC_PRESENT: u32 = 0x2;
}

fn le_u16(b: &[u8], at: usize) -> Result<u16, AuthError> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]])).ok_or(AuthError::Malformed("NTLMSSP: truncated"))
}

fn le_u32(b: &[u8], at: usize) -> Result<u32, AuthError> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]])).ok_or(AuthError::Malformed("NTLMSSP: truncated"))
}

/// Checks signature and MessageType, returning the message type found.
pub(crate) fn message_type(msg: &[u8]) -> Result<u32, AuthError> {
    if msg.len() < 12 || &msg[..8] != SIGNATURE {
        return Err(AuthError::Malformed("NTLMSSP: bad signature"));
    }
    le_u32(msg, 8)
}

/// A decoded Len/MaxLen/BufferOffset field descriptor, bounds-checked against the message.
struct Field {
    offset: usize,
    len: usize,
}

fn read_field(msg: &[u8], at: usize) -> Result<Field, AuthError> {
    let len = usize::from(le_u16(msg, at)?);
    let offset = le_u32(msg, at + 4)? as usize;
    if len == 0 {
        return Ok(Field { offset: 0, len: 0 });
    }
    let end = offset.checked_add(len).ok_or(AuthError::Malformed("NTLMSSP: field overflow"))?;
    if end > msg.len() {
        return Err(AuthError::Malformed("NTLMSSP: field out of bounds"));
    }
    Ok(Field { offset, len })
}

impl Field {
    fn slice<'a>(&self, msg: &'a [u8]) -> &'a [u8] {
        // Bounds were checked in read_field.
        &msg[self.offset..self.offset + self.len]
    }
}

/// Decodes a string field in the negotiated character set.
fn decode_string(bytes: &[u8], unicode: bool) -> Result<String, AuthError> {
    if unicode {
        let chunks = bytes.chunks_exact(2);
        if !chunks.remainder().is_empty() {
            return Err(AuthError::Malformed("NTLMSSP: odd UTF-16 length"));
        }
        let units: Vec<u16> = chunks.map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        String::from_utf16(&units).map_err(|_| AuthError::Malformed("NTLMSSP: invalid UTF-16"))
    } else {
        // OEM code page: Latin-1 is a lossless stand-in for the byte values.
        Ok(bytes.iter().map(|&b| char::from(b)).collect())
    }
}

fn encode_string(s: &str, unicode: bool) -> Vec<u8> {
    if unicode {
        utf16le(s)
    } else {
        s.chars().map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?')).collect()
    }
}

/// Writes the Len/MaxLen/BufferOffset descriptor at `at` and appends `data` to `msg`.
fn push_field(msg: &mut Vec<u8>, at: usize, data: &[u8]) {
    // Our own payloads are far below 64 KiB (names and responses), so the casts cannot truncate.
    let len = data.len() as u16;
    let offset = msg.len() as u32;
    msg[at..at + 2].copy_from_slice(&len.to_le_bytes());
    msg[at + 2..at + 4].copy_from_slice(&len.to_le_bytes());
    msg[at + 4..at + 8].copy_from_slice(&offset.to_le_bytes());
    msg.extend_from_slice(data);
}

fn header(len: usize, msg_type: u32) -> Vec<u8> {
    let mut msg = vec![0u8; len];
    msg[..8].copy_from_slice(SIGNATURE);
    msg[8..12].copy_from_slice(&msg_type.to_le_bytes());
    msg
}

/// The parts of a NEGOTIATE_MESSAGE (MS-NLMP 2.2.1.1) the server uses.
#[derive(Debug, Clone)]
pub(crate) struct Negotiate {
    /// NegotiateFlags requested by the client.
    pub flags: u32,
}

/// Decodes a NEGOTIATE_MESSAGE.
pub(crate) fn parse_negotiate(msg: &[u8]) -> Result<Negotiate, AuthError> {
    if message_type(msg)? != TYPE_NEGOTIATE {
        return Err(AuthError::UnexpectedToken("expected NTLMSSP NEGOTIATE"));
    }
    Ok(Negotiate { flags: le_u32(msg, 12)? })
}

/// Encodes a NEGOTIATE_MESSAGE without domain or workstation names.
pub(crate) fn build_negotiate(flags: u32) -> Vec<u8> {
    let mut msg = header(NEGOTIATE_HEADER, TYPE_NEGOTIATE);
    msg[12..16].copy_from_slice(&flags.to_le_bytes());
    push_field(&mut msg, 16, &[]);
    push_field(&mut msg, 24, &[]);
    msg[32..40].copy_from_slice(&OUR_VERSION);
    msg
}

/// A CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2).
#[derive(Debug, Clone)]
pub(crate) struct Challenge {
    /// Negotiated flags chosen by the server.
    pub flags: u32,
    /// The 8-byte ServerChallenge.
    pub server_challenge: [u8; 8],
    /// TargetName (already encoded per `flags`).
    pub target_name: Vec<u8>,
    /// Raw AV_PAIR list.
    pub target_info: Vec<u8>,
}

/// Encodes a CHALLENGE_MESSAGE.
pub(crate) fn build_challenge(c: &Challenge) -> Vec<u8> {
    let mut msg = header(CHALLENGE_HEADER, TYPE_CHALLENGE);
    msg[20..24].copy_from_slice(&c.flags.to_le_bytes());
    msg[24..32].copy_from_slice(&c.server_challenge);
    if c.flags & flags::VERSION != 0 {
        msg[48..56].copy_from_slice(&OUR_VERSION);
    }
    push_field(&mut msg, 12, &c.target_name);
    push_field(&mut msg, 40, &c.target_info);
    msg
}

/// Decodes a CHALLENGE_MESSAGE.
pub(crate) fn parse_challenge(msg: &[u8]) -> Result<Challenge, AuthError> {
    if message_type(msg)? != TYPE_CHALLENGE {
        return Err(AuthError::UnexpectedToken("expected NTLMSSP CHALLENGE"));
    }
    let flags = le_u32(msg, 20)?;
    let mut server_challenge = [0u8; 8];
    server_challenge.copy_from_slice(msg.get(24..32).ok_or(AuthError::Malformed("NTLMSSP: truncated"))?);
    let target_name = read_field(msg, 12)?.slice(msg).to_vec();
    // TargetInfo descriptor is only present when the message is long enough to hold it.
    let target_info = if flags & flags::TARGET_INFO != 0 { read_field(msg, 40)?.slice(msg).to_vec() } else { Vec::new() };
    Ok(Challenge { flags, server_challenge, target_name, target_info })
}

/// A decoded AUTHENTICATE_MESSAGE (MS-NLMP 2.2.1.3).
#[derive(Debug, Clone)]
pub(crate) struct Authenticate<'a> {
    /// NtChallengeResponse.
    pub nt_response: &'a [u8],
    /// DomainName as sent.
    pub domain: String,
    /// UserName as sent.
    pub user: String,
    /// EncryptedRandomSessionKey.
    pub encrypted_session_key: &'a [u8],
    /// NegotiateFlags.
    pub flags: u32,
    /// Smallest payload offset, to tell whether the header has room for a MIC.
    pub payload_start: usize,
}

/// Decodes an AUTHENTICATE_MESSAGE.
pub(crate) fn parse_authenticate(msg: &[u8]) -> Result<Authenticate<'_>, AuthError> {
    if message_type(msg)? != TYPE_AUTHENTICATE {
        return Err(AuthError::UnexpectedToken("expected NTLMSSP AUTHENTICATE"));
    }
    let lm = read_field(msg, 12)?;
    let nt = read_field(msg, 20)?;
    let domain = read_field(msg, 28)?;
    let user = read_field(msg, 36)?;
    let workstation = read_field(msg, 44)?;
    let key = read_field(msg, 52)?;
    let flags = le_u32(msg, 60)?;
    let unicode = flags & flags::UNICODE != 0;
    let payload_start = [&lm, &nt, &domain, &user, &workstation, &key].iter().filter(|f| f.len > 0).map(|f| f.offset).min().unwrap_or(msg.len());
    Ok(Authenticate {
        nt_response: nt.slice(msg),
        domain: decode_string(domain.slice(msg), unicode)?,
        user: decode_string(user.slice(msg), unicode)?,
        encrypted_session_key: key.slice(msg),
        flags,
        payload_start,
    })
}

/// Inputs for encoding an AUTHENTICATE_MESSAGE (client side).
pub(crate) struct AuthenticateOut<'a> {
    pub flags: u32,
    pub lm_response: &'a [u8],
    pub nt_response: &'a [u8],
    pub domain: &'a str,
    pub user: &'a str,
    pub workstation: &'a str,
    pub encrypted_session_key: &'a [u8],
}

/// Encodes an AUTHENTICATE_MESSAGE with Version and a zeroed MIC field.
pub(crate) fn build_authenticate(a: &AuthenticateOut<'_>) -> Vec<u8> {
    let unicode = a.flags & flags::UNICODE != 0;
    let mut msg = header(AUTHENTICATE_HEADER, TYPE_AUTHENTICATE);
    msg[60..64].copy_from_slice(&a.flags.to_le_bytes());
    msg[64..72].copy_from_slice(&OUR_VERSION);
    push_field(&mut msg, 28, &encode_string(a.domain, unicode));
    push_field(&mut msg, 36, &encode_string(a.user, unicode));
    push_field(&mut msg, 44, &encode_string(a.workstation, unicode));
    push_field(&mut msg, 12, a.lm_response);
    push_field(&mut msg, 20, a.nt_response);
    push_field(&mut msg, 52, a.encrypted_session_key);
    msg
}

/// Parses an AV_PAIR list (MS-NLMP 2.2.2.1) up to MsvAvEOL or the end of input.
pub(crate) fn parse_av_pairs(mut buf: &[u8]) -> Result<Vec<(u16, &[u8])>, AuthError> {
    let mut pairs = Vec::new();
    while !buf.is_empty() {
        let id = le_u16(buf, 0)?;
        let len = usize::from(le_u16(buf, 2)?);
        if id == av::EOL {
            break;
        }
        let value = buf.get(4..4 + len).ok_or(AuthError::Malformed("AV_PAIR out of bounds"))?;
        pairs.push((id, value));
        buf = &buf[4 + len..];
    }
    Ok(pairs)
}

/// Encodes AV_PAIRs followed by MsvAvEOL.
pub(crate) fn encode_av_pairs(pairs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (id, value) in pairs {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&(value.len() as u16).to_le_bytes());
        out.extend_from_slice(value);
    }
    out.extend_from_slice(&[0, 0, 0, 0]);
    out
}

/// Length of the fixed part of NTLMv2_CLIENT_CHALLENGE before its AV pairs (MS-NLMP 2.2.2.7).
pub(crate) const CLIENT_CHALLENGE_FIXED: usize = 28;

/// Builds NTLMv2_CLIENT_CHALLENGE ("temp" in MS-NLMP 3.3.2).
pub(crate) fn build_client_challenge(timestamp: u64, client_challenge: &[u8; 8], av_pairs: &[u8]) -> Vec<u8> {
    let mut temp = Vec::with_capacity(CLIENT_CHALLENGE_FIXED + av_pairs.len() + 4);
    temp.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]);
    temp.extend_from_slice(&timestamp.to_le_bytes());
    temp.extend_from_slice(client_challenge);
    temp.extend_from_slice(&[0; 4]);
    temp.extend_from_slice(av_pairs);
    // Windows appends four zero bytes after the AV pairs; they are covered by NTProofStr.
    temp.extend_from_slice(&[0; 4]);
    temp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_round_trip() {
        let c = Challenge {
            flags: flags::UNICODE | flags::TARGET_INFO | flags::VERSION,
            server_challenge: [1, 2, 3, 4, 5, 6, 7, 8],
            target_name: utf16le("DOM"),
            target_info: encode_av_pairs(&[(av::NB_DOMAIN_NAME, &utf16le("DOM"))]),
        };
        let msg = build_challenge(&c);
        let back = parse_challenge(&msg).unwrap();
        assert_eq!(back.flags, c.flags);
        assert_eq!(back.server_challenge, c.server_challenge);
        assert_eq!(back.target_name, c.target_name);
        assert_eq!(back.target_info, c.target_info);
        assert_eq!(&msg[48..56], &OUR_VERSION);
    }

    #[test]
    fn authenticate_round_trip_and_bounds() {
        let out = AuthenticateOut {
            flags: flags::UNICODE,
            lm_response: &[0; 24],
            nt_response: &[7; 50],
            domain: "Dom",
            user: "Usér",
            workstation: "WS",
            encrypted_session_key: &[9; 16],
        };
        let msg = build_authenticate(&out);
        let a = parse_authenticate(&msg).unwrap();
        assert_eq!((a.user.as_str(), a.domain.as_str()), ("Usér", "Dom"));
        assert_eq!(a.nt_response, &[7; 50]);
        assert_eq!(a.encrypted_session_key, &[9; 16]);
        assert_eq!(a.payload_start, AUTHENTICATE_HEADER);
        // Every truncation must fail cleanly.
        for n in 0..msg.len() {
            assert!(parse_authenticate(&msg[..n]).is_err(), "len {n}");
        }
        // Offset pointing far beyond the end.
        let mut bad = msg.clone();
        bad[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_authenticate(&bad).is_err());
    }

    #[test]
    fn av_pairs() {
        let enc = encode_av_pairs(&[(av::NB_COMPUTER_NAME, b"ab"), (av::FLAGS, &[2, 0, 0, 0])]);
        let pairs = parse_av_pairs(&enc).unwrap();
        assert_eq!(pairs, vec![(av::NB_COMPUTER_NAME, &b"ab"[..]), (av::FLAGS, &[2, 0, 0, 0][..])]);
        assert!(parse_av_pairs(&[1, 0, 10, 0, 1]).is_err());
        assert!(parse_av_pairs(&[1]).is_err());
    }
}
