//! Client (initiator) side of SPNEGO + NTLMv2, used by Braid's own SMB client and tests.

use crate::crypto::{self, Direction};
use crate::messages::{self, av};
use crate::server::filetime_now;
use crate::spnego::{self, NegState, NegTokenResp, NegotiationToken};
use crate::{flags, AuthError};

/// Flags the client requests in its NEGOTIATE_MESSAGE (MS-NLMP 2.2.1.1).
const CLIENT_FLAGS: u32 = flags::UNICODE
    | flags::REQUEST_TARGET
    | flags::SIGN
    | flags::NTLM
    | flags::ALWAYS_SIGN
    | flags::EXTENDED_SESSIONSECURITY
    | flags::TARGET_INFO
    | flags::VERSION
    | flags::NEGOTIATE_128
    | flags::KEY_EXCH
    | flags::NEGOTIATE_56;

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Start,
    AwaitChallenge,
    /// AUTHENTICATE sent over SPNEGO; waiting for accept-completed. `sent_mic`: we sent a mechListMIC.
    AwaitFinal {
        sent_mic: bool,
    },
    Complete,
    Failed,
}

/// Client side of one NTLM(-in-SPNEGO) exchange (MS-NLMP 3.1.5).
#[derive(Debug, Clone)]
pub struct NtlmClient {
    user: String,
    domain: String,
    workstation: String,
    /// `None` authenticates anonymously.
    nt_hash: Option<[u8; 16]>,
    flags: u32,
    spnego: bool,
    state: State,
    negotiate: Vec<u8>,
    mech_types_der: Vec<u8>,
    negotiated: u32,
    session_key: Option<[u8; 16]>,
}

impl NtlmClient {
    /// Client authenticating `user` in `domain` with a clear-text password.
    pub fn new(user: &str, domain: &str, password: &str) -> Self {
        Self::with_nt_hash(user, domain, crate::nt_hash(password))
    }

    /// Client authenticating with a precomputed NT hash (MS-NLMP 3.3.1 NTOWFv1).
    pub fn with_nt_hash(user: &str, domain: &str, nt_hash: [u8; 16]) -> Self {
        NtlmClient {
            user: user.to_owned(),
            domain: domain.to_owned(),
            workstation: String::new(),
            nt_hash: Some(nt_hash),
            flags: CLIENT_FLAGS,
            spnego: true,
            state: State::Start,
            negotiate: Vec::new(),
            mech_types_der: spnego::ntlm_mech_types(),
            negotiated: 0,
            session_key: None,
        }
    }

    /// Anonymous client: empty user name and NT response (MS-NLMP 3.2.5.1.2).
    pub fn anonymous() -> Self {
        let mut c = Self::with_nt_hash("", "", [0; 16]);
        c.nt_hash = None;
        // No key to exchange; NTLMSSP_ANONYMOUS goes into the AUTHENTICATE flags only.
        c.flags &= !flags::KEY_EXCH;
        c
    }

    /// Whether to request NTLMSSP_NEGOTIATE_KEY_EXCH (default: yes).
    pub fn key_exchange(mut self, on: bool) -> Self {
        if on && self.nt_hash.is_some() {
            self.flags |= flags::KEY_EXCH;
        } else {
            self.flags &= !flags::KEY_EXCH;
        }
        self
    }

    /// Sends bare NTLMSSP messages instead of SPNEGO tokens.
    pub fn raw_ntlmssp(mut self) -> Self {
        self.spnego = false;
        self
    }

    /// Offers this DER MechTypeList instead of `[NTLMSSP]` (tests of mech selection).
    #[doc(hidden)]
    pub fn with_mech_types_der(mut self, der: Vec<u8>) -> Self {
        self.mech_types_der = der;
        self
    }

    /// Sets the workstation name sent in AUTHENTICATE.
    pub fn workstation(mut self, name: &str) -> Self {
        self.workstation = name.to_owned();
        self
    }

    /// First security buffer: SPNEGO NegTokenInit (mechTypes = [NTLMSSP]) carrying NEGOTIATE_MESSAGE.
    pub fn initial_token(&mut self) -> Vec<u8> {
        self.negotiate = messages::build_negotiate(self.flags);
        self.state = State::AwaitChallenge;
        if self.spnego {
            spnego::encode_init(&self.mech_types_der, &self.negotiate)
        } else {
            self.negotiate.clone()
        }
    }

    /// Consumes a server security buffer; returns the next token to send, if any.
    ///
    /// After `Ok(None)` (or after the last token in raw mode) the exchange is complete.
    pub fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, AuthError> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        let (next, out) = self.advance(state, server_token)?;
        self.state = next;
        Ok(out)
    }

    fn advance(&mut self, state: State, token: &[u8]) -> Result<(State, Option<Vec<u8>>), AuthError> {
        match state {
            State::AwaitChallenge if !self.spnego => {
                let auth = self.authenticate(token)?;
                Ok((State::Complete, Some(auth)))
            }
            State::AwaitChallenge => {
                let resp = expect_resp(token)?;
                if resp.neg_state == Some(NegState::Reject) {
                    return Err(AuthError::Rejected);
                }
                if resp.supported_mech.is_some_and(|m| m != spnego::OID_NTLMSSP) {
                    return Err(AuthError::UnsupportedMech);
                }
                let Some(challenge) = resp.response_token else {
                    // The server picked NTLMSSP but dropped our optimistic token (it was not
                    // our first mech): resend NEGOTIATE in a NegTokenResp (RFC 4178 3.2).
                    let out = spnego::encode_resp(&NegTokenResp { response_token: Some(&self.negotiate), ..Default::default() });
                    return Ok((State::AwaitChallenge, Some(out)));
                };
                let auth = self.authenticate(challenge)?;
                // mechListMIC needs a real session key and the ESS signature format.
                let sent_mic = self.nt_hash.is_some() && self.negotiated & flags::EXTENDED_SESSIONSECURITY != 0;
                let mic = match (sent_mic, self.session_key) {
                    (true, Some(key)) => Some(crypto::mech_list_mic(&key, self.negotiated, Direction::ClientToServer, &self.mech_types_der)),
                    _ => None,
                };
                let out = spnego::encode_resp(&NegTokenResp {
                    response_token: Some(&auth),
                    mech_list_mic: mic.as_ref().map(|m| &m[..]),
                    ..Default::default()
                });
                Ok((State::AwaitFinal { sent_mic }, Some(out)))
            }
            State::AwaitFinal { sent_mic } => {
                let resp = expect_resp(token)?;
                match resp.neg_state {
                    Some(NegState::AcceptCompleted) => {}
                    Some(NegState::Reject) => return Err(AuthError::Rejected),
                    _ => return Err(AuthError::UnexpectedToken("SPNEGO: expected accept-completed")),
                }
                if sent_mic {
                    let key = self.session_key.ok_or(AuthError::UnexpectedToken("no session key"))?;
                    let expected = crypto::mech_list_mic(&key, self.negotiated, Direction::ServerToClient, &self.mech_types_der);
                    let got = resp.mech_list_mic.ok_or(AuthError::BadMechListMic)?;
                    if !crypto::ct_eq(got, &expected) {
                        return Err(AuthError::BadMechListMic);
                    }
                }
                Ok((State::Complete, None))
            }
            _ => Err(AuthError::UnexpectedToken("client exchange not expecting a token")),
        }
    }

    /// Builds AUTHENTICATE_MESSAGE from a CHALLENGE_MESSAGE (MS-NLMP 3.1.5.1.2).
    fn authenticate(&mut self, challenge_msg: &[u8]) -> Result<Vec<u8>, AuthError> {
        let challenge = messages::parse_challenge(challenge_msg)?;
        self.negotiated = challenge.flags & self.flags;
        let Some(nt_hash) = self.nt_hash else {
            self.session_key = Some([0; 16]);
            let out = messages::AuthenticateOut {
                flags: self.negotiated | flags::ANONYMOUS,
                lm_response: &[0],
                nt_response: &[],
                domain: "",
                user: "",
                workstation: &self.workstation,
                encrypted_session_key: &[],
            };
            return Ok(messages::build_authenticate(&out));
        };
        let server_av = messages::parse_av_pairs(&challenge.target_info)?;
        let server_ts = server_av.iter().find(|(id, v)| *id == av::TIMESTAMP && v.len() == 8).map(|(_, v)| {
            let mut b = [0u8; 8];
            b.copy_from_slice(v);
            u64::from_le_bytes(b)
        });
        // Echo the server's pairs, adding MsvAvFlags with "MIC present" (MS-NLMP 3.1.5.1.2).
        let mut mic_flags = av::FLAG_MIC_PRESENT;
        let mut pairs: Vec<(u16, &[u8])> = Vec::new();
        for &(id, v) in &server_av {
            if id == av::FLAGS && v.len() == 4 {
                mic_flags |= u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            } else {
                pairs.push((id, v));
            }
        }
        let mic_flags = mic_flags.to_le_bytes();
        pairs.push((av::FLAGS, &mic_flags));
        let av_bytes = messages::encode_av_pairs(&pairs);

        let client_challenge: [u8; 8] = rand::random();
        let temp = messages::build_client_challenge(server_ts.unwrap_or_else(filetime_now), &client_challenge, &av_bytes);
        let key = crypto::ntowf_v2(&nt_hash, &self.user, &self.domain);
        let nt_proof = crypto::hmac_md5(&key, &[&challenge.server_challenge, &temp]);
        let mut nt_response = nt_proof.to_vec();
        nt_response.extend_from_slice(&temp);
        // With a MIC the LM response must be Z(24) (MS-NLMP 3.1.5.1.2).
        let lm_response = [0u8; 24];
        let session_base_key = crypto::hmac_md5(&key, &[&nt_proof]);
        let (exported, encrypted) = if self.negotiated & flags::KEY_EXCH != 0 {
            let exported: [u8; 16] = rand::random();
            (exported, crypto::rc4k(&session_base_key, &exported).to_vec())
        } else {
            (session_base_key, Vec::new())
        };
        let out = messages::AuthenticateOut {
            flags: self.negotiated,
            lm_response: &lm_response,
            nt_response: &nt_response,
            domain: &self.domain,
            user: &self.user,
            workstation: &self.workstation,
            encrypted_session_key: &encrypted,
        };
        let mut msg = messages::build_authenticate(&out);
        let mic = crypto::hmac_md5(&exported, &[&self.negotiate, challenge_msg, &msg]);
        msg[messages::MIC_OFFSET..messages::AUTHENTICATE_HEADER].copy_from_slice(&mic);
        self.session_key = Some(exported);
        Ok(msg)
    }

    /// True once the exchange has finished successfully.
    pub fn is_complete(&self) -> bool {
        self.state == State::Complete
    }

    /// The exported session key (MS-NLMP 3.1.5.1.2), all zeros for anonymous;
    /// `None` until the AUTHENTICATE message has been built.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.session_key
    }
}

fn expect_resp(token: &[u8]) -> Result<NegTokenResp<'_>, AuthError> {
    match spnego::parse(token)? {
        NegotiationToken::Resp(r) => Ok(r),
        NegotiationToken::Init(_) => Err(AuthError::UnexpectedToken("expected NegTokenResp")),
    }
}
