//! Server (acceptor) side of SPNEGO + NTLMv2 for SMB SESSION_SETUP.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::crypto::{self, Direction};
use crate::messages::{self, av, Challenge};
use crate::spnego::{self, NegState, NegTokenResp, NegotiationToken};
use crate::{flags, AuthError, AuthStep, Identity, UserDb};

/// Names the server announces in the CHALLENGE TargetInfo (MS-NLMP 2.2.1.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerConfig {
    /// NetBIOS domain (or workgroup) name: MsvAvNbDomainName and TargetName.
    pub netbios_domain: String,
    /// NetBIOS computer name: MsvAvNbComputerName.
    pub netbios_computer: String,
    /// DNS domain name: MsvAvDnsDomainName.
    pub dns_domain: String,
    /// Fully qualified DNS computer name: MsvAvDnsComputerName.
    pub dns_computer: String,
}

/// Flags the server echoes back when the client requested them (MS-NLMP 3.2.5.1.1).
const ECHOED_FLAGS: u32 = flags::UNICODE
    | flags::REQUEST_TARGET
    | flags::SIGN
    | flags::SEAL
    | flags::NTLM
    | flags::ALWAYS_SIGN
    | flags::EXTENDED_SESSIONSECURITY
    | flags::TARGET_INFO
    | flags::VERSION
    | flags::NEGOTIATE_128
    | flags::KEY_EXCH
    | flags::NEGOTIATE_56;

/// Seconds between 1601-01-01 (FILETIME epoch) and 1970-01-01.
const FILETIME_UNIX_OFFSET: u64 = 11_644_473_600;

/// Current time as a FILETIME (100 ns units since 1601).
pub(crate) fn filetime_now() -> u64 {
    let since_unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (since_unix.as_secs() + FILETIME_UNIX_OFFSET) * 10_000_000 + u64::from(since_unix.subsec_nanos() / 100)
}

/// How the client frames its tokens; replies use the same framing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Framing {
    /// Bare NTLMSSP messages.
    Raw,
    /// SPNEGO; holds the client's DER MechTypeList for mechListMIC.
    Spnego { mech_types_der: Vec<u8> },
}

#[derive(Debug)]
enum State {
    /// Nothing received yet.
    Initial,
    /// SPNEGO selected NTLMSSP but the client has not sent its NEGOTIATE yet.
    AwaitNegotiate { framing: Framing },
    /// CHALLENGE sent; the messages are kept for the MIC.
    AwaitAuthenticate { framing: Framing, negotiate: Vec<u8>, challenge: Vec<u8>, challenge_flags: u32 },
    /// Succeeded or failed; further tokens are refused.
    Finished,
}

/// One SESSION_SETUP authentication exchange, server side (MS-NLMP 3.2.5, RFC 4178).
#[derive(Debug)]
pub struct NtlmServer {
    cfg: ServerConfig,
    challenge: [u8; 8],
    /// Fixed MsvAvTimestamp for reproducible tests; `None` uses the clock.
    timestamp: Option<u64>,
    state: State,
}

/// Result of verifying an AUTHENTICATE message.
struct Verified {
    identity: Identity,
    exported_key: [u8; 16],
    flags: u32,
}

impl NtlmServer {
    /// Starts an exchange with a fresh random server challenge.
    pub fn new(cfg: ServerConfig) -> Self {
        Self::with_challenge(cfg, rand::random())
    }

    /// Starts an exchange with a fixed server challenge (tests only).
    #[doc(hidden)]
    pub fn with_challenge(cfg: ServerConfig, challenge: [u8; 8]) -> Self {
        NtlmServer { cfg, challenge, timestamp: None, state: State::Initial }
    }

    /// Fixed challenge and MsvAvTimestamp, making the CHALLENGE message reproducible (tests only).
    #[doc(hidden)]
    pub fn with_challenge_at(cfg: ServerConfig, challenge: [u8; 8], filetime: u64) -> Self {
        NtlmServer { cfg, challenge, timestamp: Some(filetime), state: State::Initial }
    }

    /// Accepts the security buffer of one SESSION_SETUP request: SPNEGO
    /// NegTokenInit / NegTokenResp, or raw NTLMSSP ("NTLMSSP\0" prefix).
    pub fn step(&mut self, input: &[u8], users: &dyn UserDb) -> AuthStep {
        let state = std::mem::replace(&mut self.state, State::Finished);
        match self.advance(state, input, users) {
            Ok(step) => step,
            Err(e) => AuthStep::Failed(e),
        }
    }

    fn advance(&mut self, state: State, input: &[u8], users: &dyn UserDb) -> Result<AuthStep, AuthError> {
        if input.starts_with(messages::SIGNATURE) {
            return self.advance_raw(state, input, users);
        }
        match (state, spnego::parse(input)?) {
            (State::Initial, NegotiationToken::Init(init)) => {
                let Some(pos) = init.mech_types.iter().position(|m| *m == spnego::OID_NTLMSSP) else {
                    return Err(AuthError::UnsupportedMech);
                };
                let framing = Framing::Spnego { mech_types_der: init.mech_types_der.to_vec() };
                match init.mech_token {
                    // The optimistic token belongs to NTLMSSP only when it is the preferred mech.
                    Some(token) if pos == 0 => self.on_negotiate(framing, token),
                    _ => {
                        self.state = State::AwaitNegotiate { framing };
                        Ok(AuthStep::Continue(spnego::encode_resp(&NegTokenResp {
                            neg_state: Some(NegState::AcceptIncomplete),
                            supported_mech: Some(spnego::OID_NTLMSSP),
                            ..Default::default()
                        })))
                    }
                }
            }
            (State::AwaitNegotiate { framing }, NegotiationToken::Resp(resp)) => {
                check_client_state(&resp)?;
                let token = resp.response_token.ok_or(AuthError::Malformed("SPNEGO: missing responseToken"))?;
                self.on_negotiate(framing, token)
            }
            (State::AwaitAuthenticate { framing, negotiate, challenge, challenge_flags }, NegotiationToken::Resp(resp)) => {
                check_client_state(&resp)?;
                let Framing::Spnego { mech_types_der } = &framing else {
                    return Err(AuthError::UnexpectedToken("SPNEGO token in a raw NTLMSSP exchange"));
                };
                let token = resp.response_token.ok_or(AuthError::Malformed("SPNEGO: missing responseToken"))?;
                let v = self.verify_authenticate(&negotiate, &challenge, challenge_flags, token, users)?;
                let mut server_mic = None;
                if let (Some(client_mic), Identity::User { .. }) = (resp.mech_list_mic, &v.identity) {
                    let expected = crypto::mech_list_mic(&v.exported_key, v.flags, Direction::ClientToServer, mech_types_der);
                    if v.flags & flags::EXTENDED_SESSIONSECURITY == 0 || !crypto::ct_eq(client_mic, &expected) {
                        return Err(AuthError::BadMechListMic);
                    }
                    server_mic = Some(crypto::mech_list_mic(&v.exported_key, v.flags, Direction::ServerToClient, mech_types_der));
                }
                let output = spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(NegState::AcceptCompleted),
                    mech_list_mic: server_mic.as_ref().map(|m| &m[..]),
                    ..Default::default()
                });
                Ok(AuthStep::Done { output, identity: v.identity, session_key: v.exported_key })
            }
            _ => Err(AuthError::UnexpectedToken("SPNEGO token out of sequence")),
        }
    }

    fn advance_raw(&mut self, state: State, msg: &[u8], users: &dyn UserDb) -> Result<AuthStep, AuthError> {
        match state {
            State::Initial => self.on_negotiate(Framing::Raw, msg),
            State::AwaitAuthenticate { framing: Framing::Raw, negotiate, challenge, challenge_flags } => {
                let v = self.verify_authenticate(&negotiate, &challenge, challenge_flags, msg, users)?;
                Ok(AuthStep::Done { output: Vec::new(), identity: v.identity, session_key: v.exported_key })
            }
            _ => Err(AuthError::UnexpectedToken("raw NTLMSSP token out of sequence")),
        }
    }

    /// Handles NEGOTIATE_MESSAGE: builds and sends the CHALLENGE (MS-NLMP 3.2.5.1.1).
    fn on_negotiate(&mut self, framing: Framing, msg: &[u8]) -> Result<AuthStep, AuthError> {
        let neg = messages::parse_negotiate(msg)?;
        let challenge = self.build_challenge(neg.flags);
        let challenge_bytes = messages::build_challenge(&challenge);
        let output = match framing {
            Framing::Raw => challenge_bytes.clone(),
            Framing::Spnego { .. } => spnego::encode_resp(&NegTokenResp {
                neg_state: Some(NegState::AcceptIncomplete),
                supported_mech: Some(spnego::OID_NTLMSSP),
                response_token: Some(&challenge_bytes),
                mech_list_mic: None,
            }),
        };
        self.state = State::AwaitAuthenticate { framing, negotiate: msg.to_vec(), challenge: challenge_bytes, challenge_flags: challenge.flags };
        Ok(AuthStep::Continue(output))
    }

    fn build_challenge(&self, client_flags: u32) -> Challenge {
        let mut f = (client_flags & ECHOED_FLAGS) | flags::NTLM | flags::TARGET_INFO;
        let unicode = client_flags & flags::UNICODE != 0 || client_flags & flags::OEM == 0;
        if unicode {
            f |= flags::UNICODE;
        } else {
            f |= flags::OEM;
        }
        if f & flags::REQUEST_TARGET != 0 {
            let standalone = self.cfg.netbios_domain.eq_ignore_ascii_case(&self.cfg.netbios_computer);
            f |= if standalone { flags::TARGET_TYPE_SERVER } else { flags::TARGET_TYPE_DOMAIN };
        }
        let target_name = if unicode { crypto::utf16le(&self.cfg.netbios_domain) } else { self.cfg.netbios_domain.bytes().collect() };
        let nb_domain = crypto::utf16le(&self.cfg.netbios_domain);
        let nb_computer = crypto::utf16le(&self.cfg.netbios_computer);
        let dns_domain = crypto::utf16le(&self.cfg.dns_domain);
        let dns_computer = crypto::utf16le(&self.cfg.dns_computer);
        let ts = self.timestamp.unwrap_or_else(filetime_now).to_le_bytes();
        let target_info = messages::encode_av_pairs(&[
            (av::NB_DOMAIN_NAME, &nb_domain),
            (av::NB_COMPUTER_NAME, &nb_computer),
            (av::DNS_DOMAIN_NAME, &dns_domain),
            (av::DNS_COMPUTER_NAME, &dns_computer),
            (av::TIMESTAMP, &ts),
        ]);
        Challenge { flags: f, server_challenge: self.challenge, target_name, target_info }
    }

    /// Verifies an AUTHENTICATE_MESSAGE (MS-NLMP 3.2.5.1.2, 3.3.2).
    fn verify_authenticate(
        &self,
        negotiate: &[u8],
        challenge: &[u8],
        challenge_flags: u32,
        msg: &[u8],
        users: &dyn UserDb,
    ) -> Result<Verified, AuthError> {
        let auth = messages::parse_authenticate(msg)?;
        let negotiated = auth.flags & challenge_flags;
        if auth.user.is_empty() && auth.nt_response.is_empty() {
            return Ok(Verified { identity: Identity::Anonymous, exported_key: [0; 16], flags: negotiated });
        }
        // NTLMv1 responses are exactly 24 bytes; an empty NT response means LM only.
        if auth.nt_response.len() <= 24 {
            return Err(AuthError::NtlmV1Refused);
        }
        let (nt_proof, temp) = auth.nt_response.split_at(16);
        if temp.len() < messages::CLIENT_CHALLENGE_FIXED || temp[0] != 1 || temp[1] != 1 {
            return Err(AuthError::Malformed("NTLMv2: bad client challenge"));
        }
        let client_av = messages::parse_av_pairs(&temp[messages::CLIENT_CHALLENGE_FIXED..])?;
        let Some(hash) = users.nt_hash(&auth.user) else {
            return Err(AuthError::UnknownUser { name: auth.user, domain: auth.domain });
        };
        let response_key = crypto::ntowf_v2(&hash, &auth.user, &auth.domain);
        let expected = crypto::hmac_md5(&response_key, &[&self.challenge, temp]);
        if !crypto::ct_eq(nt_proof, &expected) {
            return Err(AuthError::WrongPassword { name: auth.user });
        }
        // For NTLMv2 KeyExchangeKey == SessionBaseKey (MS-NLMP 3.4.5.1).
        let session_base_key = crypto::hmac_md5(&response_key, &[nt_proof]);
        let exported_key = if negotiated & flags::KEY_EXCH != 0 {
            let enc: &[u8; 16] =
                auth.encrypted_session_key.try_into().map_err(|_| AuthError::Malformed("NTLMSSP: EncryptedRandomSessionKey is not 16 bytes"))?;
            crypto::rc4k(&session_base_key, enc)
        } else {
            session_base_key
        };
        let mic_present = client_av
            .iter()
            .any(|(id, v)| *id == av::FLAGS && v.len() == 4 && u32::from_le_bytes([v[0], v[1], v[2], v[3]]) & av::FLAG_MIC_PRESENT != 0);
        if mic_present {
            if auth.payload_start < messages::AUTHENTICATE_HEADER {
                return Err(AuthError::Malformed("NTLMSSP: no room for MIC"));
            }
            let range = messages::MIC_OFFSET..messages::AUTHENTICATE_HEADER;
            let mut zeroed = msg.to_vec();
            zeroed[range.clone()].fill(0);
            let mic = crypto::hmac_md5(&exported_key, &[negotiate, challenge, &zeroed]);
            if !crypto::ct_eq(&msg[range], &mic) {
                return Err(AuthError::BadMic);
            }
        }
        Ok(Verified { identity: Identity::User { name: auth.user, domain: auth.domain }, exported_key, flags: negotiated })
    }
}

/// A client NegTokenResp may omit negState; a reject ends the exchange.
fn check_client_state(resp: &NegTokenResp<'_>) -> Result<(), AuthError> {
    match resp.neg_state {
        Some(NegState::Reject) => Err(AuthError::Rejected),
        _ => Ok(()),
    }
}
