//! The small subset of ASN.1 DER (X.690 8.1) needed for SPNEGO tokens.
//!
//! Only single-byte identifiers are supported: every tag SPNEGO uses fits.

use crate::AuthError;

/// Universal tag: OBJECT IDENTIFIER.
pub(crate) const TAG_OID: u8 = 0x06;
/// Universal tag: OCTET STRING.
pub(crate) const TAG_OCTET_STRING: u8 = 0x04;
/// Universal tag: ENUMERATED.
pub(crate) const TAG_ENUMERATED: u8 = 0x0a;
/// Universal tag: GeneralString.
pub(crate) const TAG_GENERAL_STRING: u8 = 0x1b;
/// Universal constructed tag: SEQUENCE / SEQUENCE OF.
pub(crate) const TAG_SEQUENCE: u8 = 0x30;
/// [APPLICATION 0] constructed: the GSS-API initial context token framing (RFC 2743 3.1).
pub(crate) const TAG_APPLICATION_0: u8 = 0x60;

/// Constructed context-specific tag `[n]`.
pub(crate) const fn ctx(n: u8) -> u8 {
    0xa0 | n
}

/// One decoded TLV.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tlv<'a> {
    /// The identifier octet.
    pub tag: u8,
    /// The contents octets.
    pub content: &'a [u8],
    /// Identifier, length and contents together (needed for MICs over raw encodings).
    pub raw: &'a [u8],
}

/// Reads one TLV from the front of `input`, returning it and the remaining bytes.
pub(crate) fn read_tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), AuthError> {
    let (&tag, rest) = input.split_first().ok_or(AuthError::Malformed("DER: empty"))?;
    if tag & 0x1f == 0x1f {
        return Err(AuthError::Malformed("DER: multi-byte tag"));
    }
    let (&first, rest) = rest.split_first().ok_or(AuthError::Malformed("DER: no length"))?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // Long form; 0x80 would be BER indefinite length, which DER forbids.
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return Err(AuthError::Malformed("DER: unsupported length form"));
        }
        let bytes = rest.get(..n).ok_or(AuthError::Malformed("DER: truncated length"))?;
        let len = bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if len > rest.len() {
        return Err(AuthError::Malformed("DER: length exceeds input"));
    }
    let header = input.len() - rest.len();
    let tlv = Tlv { tag, content: &rest[..len], raw: &input[..header + len] };
    Ok((tlv, &rest[len..]))
}

/// Reads one TLV that must carry `tag`.
pub(crate) fn expect_tlv(input: &[u8], tag: u8) -> Result<(Tlv<'_>, &[u8]), AuthError> {
    let (tlv, rest) = read_tlv(input)?;
    if tlv.tag != tag {
        return Err(AuthError::Malformed("DER: unexpected tag"));
    }
    Ok((tlv, rest))
}

/// Iterates the TLVs that make up a constructed value's contents.
pub(crate) fn children(mut content: &[u8]) -> impl Iterator<Item = Result<Tlv<'_>, AuthError>> {
    std::iter::from_fn(move || {
        if content.is_empty() {
            return None;
        }
        match read_tlv(content) {
            Ok((tlv, rest)) => {
                content = rest;
                Some(Ok(tlv))
            }
            Err(e) => {
                // Stop after the first error so callers cannot loop forever.
                content = &[];
                Some(Err(e))
            }
        }
    })
}

/// Encodes a TLV with a minimal (DER) length.
pub(crate) fn encode(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let be = (len as u64).to_be_bytes();
        let skip = be.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (8 - skip) as u8);
        out.extend_from_slice(&be[skip..]);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_lengths() {
        for len in [0usize, 1, 127, 128, 255, 256, 70000] {
            let content = vec![0x5a; len];
            let enc = encode(0x04, &content);
            let (tlv, rest) = read_tlv(&enc).unwrap();
            assert!(rest.is_empty());
            assert_eq!(tlv.tag, 0x04);
            assert_eq!(tlv.content.len(), len);
            assert_eq!(tlv.raw, &enc[..]);
        }
        assert_eq!(encode(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
    }

    #[test]
    fn rejects_bad_encodings() {
        for bad in [
            &[][..],
            &[0x04],
            &[0x04, 0x02, 0x00],
            &[0x04, 0x80, 0x00, 0x00],
            &[0x04, 0x85, 1, 1, 1, 1, 1],
            &[0x1f, 0x01, 0x00],
            &[0x04, 0x84, 0xff, 0xff, 0xff, 0xff],
        ] {
            assert!(read_tlv(bad).is_err(), "{bad:?}");
        }
    }
}
