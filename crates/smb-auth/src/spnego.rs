//! SPNEGO token encoding and decoding (RFC 4178 4.2, MS-SPNG 2.2).

use crate::der::{self, ctx, Tlv};
use crate::AuthError;

/// DER contents of OID 1.3.6.1.5.5.2 (SPNEGO).
pub const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// DER contents of OID 1.3.6.1.4.1.311.2.2.10 (NTLMSSP).
pub const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];
/// DER contents of OID 1.2.840.113554.1.2.2 (Kerberos 5).
pub const OID_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// DER contents of OID 1.2.840.48018.1.2.2 (Microsoft's legacy Kerberos 5 OID).
pub const OID_MS_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];

/// negHints.hintName the server advertises (MS-SPNG 2.2.1).
const HINT_NAME: &[u8] = b"not_defined_in_RFC4178@please_ignore";

/// NegState values of NegTokenResp (RFC 4178 4.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegState {
    /// accept-completed (0).
    AcceptCompleted,
    /// accept-incomplete (1).
    AcceptIncomplete,
    /// reject (2).
    Reject,
    /// request-mic (3).
    RequestMic,
}

impl NegState {
    fn to_u8(self) -> u8 {
        match self {
            NegState::AcceptCompleted => 0,
            NegState::AcceptIncomplete => 1,
            NegState::Reject => 2,
            NegState::RequestMic => 3,
        }
    }

    fn from_u8(v: u8) -> Result<Self, AuthError> {
        Ok(match v {
            0 => NegState::AcceptCompleted,
            1 => NegState::AcceptIncomplete,
            2 => NegState::Reject,
            3 => NegState::RequestMic,
            _ => return Err(AuthError::Malformed("SPNEGO: bad negState")),
        })
    }
}

/// A decoded NegTokenInit (RFC 4178 4.2.1, MS-SPNG 2.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegTokenInit<'a> {
    /// DER contents of each offered mechanism OID, in preference order.
    pub mech_types: Vec<&'a [u8]>,
    /// The complete DER encoding of MechTypeList, the input of mechListMIC.
    pub mech_types_der: &'a [u8],
    /// The optimistic token for the first mechanism.
    pub mech_token: Option<&'a [u8]>,
    /// mechListMIC, if the initiator sent one.
    pub mech_list_mic: Option<&'a [u8]>,
}

/// A decoded NegTokenResp (RFC 4178 4.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegTokenResp<'a> {
    /// negState.
    pub neg_state: Option<NegState>,
    /// DER contents of supportedMech.
    pub supported_mech: Option<&'a [u8]>,
    /// responseToken.
    pub response_token: Option<&'a [u8]>,
    /// mechListMIC.
    pub mech_list_mic: Option<&'a [u8]>,
}

/// Either SPNEGO token (RFC 4178 4.2 NegotiationToken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiationToken<'a> {
    /// negTokenInit, usually wrapped in the GSS-API initial context token.
    Init(NegTokenInit<'a>),
    /// negTokenResp.
    Resp(NegTokenResp<'a>),
}

/// Decodes a SPNEGO token: the GSS-API framed initial token
/// (`[APPLICATION 0] { OID 1.3.6.1.5.5.2, [0] NegTokenInit }`), a bare
/// `[0] NegTokenInit`, or a `[1] NegTokenResp`.
///
/// Returns [`AuthError::UnsupportedMech`] for a GSS token of another mechanism.
pub fn parse(token: &[u8]) -> Result<NegotiationToken<'_>, AuthError> {
    let (outer, _trailing) = der::read_tlv(token)?;
    match outer.tag {
        der::TAG_APPLICATION_0 => {
            let (oid, rest) = der::expect_tlv(outer.content, der::TAG_OID)?;
            if oid.content != OID_SPNEGO {
                return Err(AuthError::UnsupportedMech);
            }
            let (inner, _) = der::expect_tlv(rest, ctx(0))?;
            Ok(NegotiationToken::Init(parse_init(inner)?))
        }
        t if t == ctx(0) => Ok(NegotiationToken::Init(parse_init(outer)?)),
        t if t == ctx(1) => Ok(NegotiationToken::Resp(parse_resp(outer)?)),
        _ => Err(AuthError::Malformed("SPNEGO: unknown token")),
    }
}

/// Contents of an `[n] EXPLICIT OCTET STRING`.
fn octet_string<'a>(field: &Tlv<'a>) -> Result<&'a [u8], AuthError> {
    Ok(der::expect_tlv(field.content, der::TAG_OCTET_STRING)?.0.content)
}

fn parse_init<'a>(wrapper: Tlv<'a>) -> Result<NegTokenInit<'a>, AuthError> {
    let (seq, _) = der::expect_tlv(wrapper.content, der::TAG_SEQUENCE)?;
    let mut init = NegTokenInit { mech_types: Vec::new(), mech_types_der: &[], mech_token: None, mech_list_mic: None };
    let mut saw_mech_types = false;
    for field in der::children(seq.content) {
        let field = field?;
        match field.tag {
            t if t == ctx(0) => {
                let (list, _) = der::expect_tlv(field.content, der::TAG_SEQUENCE)?;
                init.mech_types_der = list.raw;
                for oid in der::children(list.content) {
                    let oid = oid?;
                    if oid.tag != der::TAG_OID {
                        return Err(AuthError::Malformed("SPNEGO: mechType is not an OID"));
                    }
                    init.mech_types.push(oid.content);
                }
                saw_mech_types = true;
            }
            t if t == ctx(2) => init.mech_token = Some(octet_string(&field)?),
            // RFC 4178 puts mechListMIC at [3]; MS-SPNG NegTokenInit2 puts negHints
            // (a SEQUENCE) there and mechListMIC at [4].
            t if t == ctx(3) && field.content.first() == Some(&der::TAG_OCTET_STRING) => {
                init.mech_list_mic = Some(octet_string(&field)?);
            }
            t if t == ctx(4) => init.mech_list_mic = Some(octet_string(&field)?),
            // reqFlags [1] and unknown extensions carry nothing we act on.
            _ => {}
        }
    }
    if !saw_mech_types {
        return Err(AuthError::Malformed("SPNEGO: NegTokenInit without mechTypes"));
    }
    Ok(init)
}

fn parse_resp<'a>(wrapper: Tlv<'a>) -> Result<NegTokenResp<'a>, AuthError> {
    let (seq, _) = der::expect_tlv(wrapper.content, der::TAG_SEQUENCE)?;
    let mut resp = NegTokenResp::default();
    for field in der::children(seq.content) {
        let field = field?;
        match field.tag {
            t if t == ctx(0) => {
                let (e, _) = der::expect_tlv(field.content, der::TAG_ENUMERATED)?;
                let [v] = e.content else {
                    return Err(AuthError::Malformed("SPNEGO: bad negState"));
                };
                resp.neg_state = Some(NegState::from_u8(*v)?);
            }
            t if t == ctx(1) => resp.supported_mech = Some(der::expect_tlv(field.content, der::TAG_OID)?.0.content),
            t if t == ctx(2) => resp.response_token = Some(octet_string(&field)?),
            t if t == ctx(3) => resp.mech_list_mic = Some(octet_string(&field)?),
            _ => {}
        }
    }
    Ok(resp)
}

/// DER MechTypeList holding only NTLMSSP.
pub(crate) fn ntlm_mech_types() -> Vec<u8> {
    der::encode(der::TAG_SEQUENCE, &der::encode(der::TAG_OID, OID_NTLMSSP))
}

/// Wraps a NegTokenInit body in `[0]` and the GSS-API initial context token framing.
fn wrap_init(fields: &[u8]) -> Vec<u8> {
    let init = der::encode(ctx(0), &der::encode(der::TAG_SEQUENCE, fields));
    let mut body = der::encode(der::TAG_OID, OID_SPNEGO);
    body.extend_from_slice(&init);
    der::encode(der::TAG_APPLICATION_0, &body)
}

/// The server's NegTokenInit2 for the SMB2 NEGOTIATE response (MS-SPNG 3.2.5.2):
/// mechTypes = [NTLMSSP], negHints.hintName = "not_defined_in_RFC4178@please_ignore".
pub fn negotiate_token() -> Vec<u8> {
    let mut fields = der::encode(ctx(0), &ntlm_mech_types());
    let hint = der::encode(ctx(0), &der::encode(der::TAG_GENERAL_STRING, HINT_NAME));
    fields.extend_from_slice(&der::encode(ctx(3), &der::encode(der::TAG_SEQUENCE, &hint)));
    wrap_init(&fields)
}

/// A client NegTokenInit offering `mech_types_der` with an optimistic `mech_token` (RFC 4178 4.2.1).
pub(crate) fn encode_init(mech_types_der: &[u8], mech_token: &[u8]) -> Vec<u8> {
    let mut fields = der::encode(ctx(0), mech_types_der);
    fields.extend_from_slice(&der::encode(ctx(2), &der::encode(der::TAG_OCTET_STRING, mech_token)));
    wrap_init(&fields)
}

/// Encodes a NegTokenResp (RFC 4178 4.2.2).
pub fn encode_resp(resp: &NegTokenResp<'_>) -> Vec<u8> {
    let mut fields = Vec::new();
    if let Some(state) = resp.neg_state {
        fields.extend(der::encode(ctx(0), &der::encode(der::TAG_ENUMERATED, &[state.to_u8()])));
    }
    if let Some(mech) = resp.supported_mech {
        fields.extend(der::encode(ctx(1), &der::encode(der::TAG_OID, mech)));
    }
    if let Some(tok) = resp.response_token {
        fields.extend(der::encode(ctx(2), &der::encode(der::TAG_OCTET_STRING, tok)));
    }
    if let Some(mic) = resp.mech_list_mic {
        fields.extend(der::encode(ctx(3), &der::encode(der::TAG_OCTET_STRING, mic)));
    }
    der::encode(ctx(1), &der::encode(der::TAG_SEQUENCE, &fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_token_layout() {
        let tok = negotiate_token();
        assert_eq!(&tok[..10], &[0x60, 0x48, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02]);
        let NegotiationToken::Init(init) = parse(&tok).unwrap() else { panic!() };
        assert_eq!(init.mech_types, vec![OID_NTLMSSP]);
        assert_eq!(init.mech_token, None);
        assert_eq!(init.mech_list_mic, None);
        assert!(tok.windows(HINT_NAME.len()).any(|w| w == HINT_NAME));
    }

    #[test]
    fn resp_round_trip() {
        let resp = NegTokenResp {
            neg_state: Some(NegState::AcceptIncomplete),
            supported_mech: Some(OID_NTLMSSP),
            response_token: Some(&[1u8; 300]),
            mech_list_mic: Some(&[2u8; 16]),
        };
        let enc = encode_resp(&resp);
        assert_eq!(parse(&enc).unwrap(), NegotiationToken::Resp(resp));
    }

    #[test]
    fn init_with_kerberos_first() {
        let mut list = der::encode(der::TAG_OID, OID_MS_KRB5);
        list.extend(der::encode(der::TAG_OID, OID_KRB5));
        list.extend(der::encode(der::TAG_OID, OID_NTLMSSP));
        let list = der::encode(der::TAG_SEQUENCE, &list);
        let tok = encode_init(&list, b"krb");
        let NegotiationToken::Init(init) = parse(&tok).unwrap() else { panic!() };
        assert_eq!(init.mech_types, vec![OID_MS_KRB5, OID_KRB5, OID_NTLMSSP]);
        assert_eq!(init.mech_types_der, &list[..]);
        assert_eq!(init.mech_token, Some(&b"krb"[..]));
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(parse(&[]).is_err());
        assert!(parse(&[0x60, 0x02, 0x06, 0x00]).is_err());
        // GSS token of a different mechanism (Kerberos).
        let mut body = der::encode(der::TAG_OID, OID_KRB5);
        body.extend_from_slice(&[0x01, 0x00]);
        assert_eq!(parse(&der::encode(0x60, &body)), Err(AuthError::UnsupportedMech));
        let tok = negotiate_token();
        for n in 0..tok.len() {
            assert!(parse(&tok[..n]).is_err(), "len {n}");
        }
    }
}
