//! NEGOTIATE (MS-SMB2 3.2.4.2.1, 3.2.5.2) and the SESSION_SETUP exchange
//! (MS-SMB2 3.2.4.2.3, 3.2.5.3), including the 3.1.1 preauth integrity hash.

use smb_auth::NtlmClient;
use smb_crypto::{Cipher, PreauthHash, SigningAlgorithm};
use smb_wire::dialect::{self, SMB311};
use smb_wire::msg::negotiate::{self, cap, NegotiateContext, NegotiateRequest, NegotiateResponse};
use smb_wire::msg::session_setup::{SessionSetupRequest, SessionSetupResponse, FLAG_BINDING};
use smb_wire::{Command, NtStatus};

use crate::conn::{Conn, Request, Response, SendOpts};
use crate::{ClientConfig, ClientError};

/// What NEGOTIATE settled for one connection.
#[derive(Debug, Clone)]
pub(crate) struct Negotiated {
    pub dialect: u16,
    pub security_mode: u16,
    pub capabilities: u32,
    pub max_transact: u32,
    pub max_read: u32,
    pub max_write: u32,
    /// The cipher both sides support (3.0.x: AES-128-CCM if the server has ENCRYPTION).
    pub cipher: Option<Cipher>,
    pub signing: SigningAlgorithm,
    /// Connection.PreauthIntegrityHashValue after NEGOTIATE (3.1.1 only).
    pub preauth: Option<PreauthHash>,
}

impl Negotiated {
    pub fn large_mtu(&self) -> bool {
        self.dialect >= dialect::SMB210 && self.capabilities & cap::LARGE_MTU != 0
    }
}

/// Cipher preference when the configuration names none.
pub(crate) const DEFAULT_CIPHERS: [Cipher; 4] = [Cipher::Aes128Gcm, Cipher::Aes128Ccm, Cipher::Aes256Gcm, Cipher::Aes256Ccm];

/// Sends NEGOTIATE and checks the answer (MS-SMB2 3.2.5.2).
pub(crate) async fn negotiate(conn: &Conn, cfg: &ClientConfig, client_guid: [u8; 16]) -> Result<Negotiated, ClientError> {
    let dialects = cfg.effective_dialects();
    let smb3 = dialects.iter().any(|d| dialect::is_smb3(*d));
    let mut contexts = Vec::new();
    if dialects.contains(&SMB311) {
        let salt: [u8; 32] = rand::random();
        let ciphers = if cfg.ciphers.is_empty() { DEFAULT_CIPHERS.to_vec() } else { cfg.ciphers.clone() };
        contexts.push(NegotiateContext::PreauthIntegrity { hash_algorithms: vec![negotiate::HASH_SHA512], salt: salt.to_vec() });
        contexts.push(NegotiateContext::Encryption { ciphers: ciphers.iter().map(|c| c.id()).collect() });
        contexts.push(NegotiateContext::Signing { algorithms: vec![SigningAlgorithm::AesGmac.id(), SigningAlgorithm::AesCmac.id()] });
    }
    let req = NegotiateRequest {
        security_mode: negotiate::SIGNING_ENABLED | if cfg.sign { negotiate::SIGNING_REQUIRED } else { 0 },
        // Capabilities are only defined for clients offering 3.x (MS-SMB2 2.2.3).
        capabilities: if smb3 { cap::LARGE_MTU | cap::ENCRYPTION | cap::MULTI_CHANNEL } else { 0 },
        client_guid,
        dialects: dialects.clone(),
        contexts,
    };
    let mut r = Request::new(Command::Negotiate, 0, false);
    req.encode(r.body());
    let (resp, sent) = conn.call(r, SendOpts { capture: true, ..SendOpts::default() }).await?;
    let resp = resp.check("NEGOTIATE")?;
    let nr = NegotiateResponse::decode(resp.msg())?;
    if !dialects.contains(&nr.dialect) {
        return Err(ClientError::Protocol("server chose a dialect we did not offer"));
    }
    let mut neg = Negotiated {
        dialect: nr.dialect,
        security_mode: nr.security_mode,
        capabilities: nr.capabilities,
        max_transact: nr.max_transact_size,
        max_read: nr.max_read_size,
        max_write: nr.max_write_size,
        cipher: None,
        signing: SigningAlgorithm::default_for_dialect(nr.dialect),
        preauth: None,
    };
    if nr.dialect == SMB311 {
        let mut h = PreauthHash::new();
        h.update(&sent);
        h.update(resp.msg());
        let mut saw_preauth = false;
        for (t, data) in &nr.contexts {
            match negotiate::parse_context(*t, data)? {
                NegotiateContext::PreauthIntegrity { hash_algorithms, .. } => {
                    if hash_algorithms.first() != Some(&negotiate::HASH_SHA512) {
                        return Err(ClientError::Protocol("server picked an unknown preauth hash"));
                    }
                    saw_preauth = true;
                }
                // Id 0 means "no common cipher" (MS-SMB2 3.3.5.4).
                NegotiateContext::Encryption { ciphers } => neg.cipher = ciphers.first().and_then(|c| Cipher::from_id(*c)),
                NegotiateContext::Signing { algorithms } => {
                    neg.signing =
                        algorithms.first().and_then(|a| SigningAlgorithm::from_id(*a)).ok_or(ClientError::Protocol("unknown signing algorithm"))?;
                }
                _ => {}
            }
        }
        if !saw_preauth {
            return Err(ClientError::Protocol("3.1.1 NEGOTIATE response without preauth context"));
        }
        if cipher_not_offered(&neg, cfg) {
            return Err(ClientError::Protocol("server picked a cipher we did not offer"));
        }
        neg.preauth = Some(h);
    } else if dialect::is_smb3(nr.dialect) && nr.capabilities & cap::ENCRYPTION != 0 {
        neg.cipher = Some(Cipher::Aes128Ccm);
    }
    Ok(neg)
}

fn cipher_not_offered(neg: &Negotiated, cfg: &ClientConfig) -> bool {
    match neg.cipher {
        Some(c) => !(if cfg.ciphers.is_empty() { DEFAULT_CIPHERS.to_vec() } else { cfg.ciphers.clone() }).contains(&c),
        None => false,
    }
}

/// The result of a successful SESSION_SETUP exchange.
pub(crate) struct Authenticated {
    pub session_id: u64,
    pub session_key: [u8; 16],
    pub session_flags: u16,
    /// Session.PreauthIntegrityHashValue (3.1.1): the KDF context.
    pub preauth: Option<PreauthHash>,
    /// The final response, whose signature the caller checks with the derived key.
    pub final_response: Response,
}

/// Runs NTLMv2-in-SPNEGO over SESSION_SETUP. With `binding`, binds this connection to that
/// existing session (MS-SMB2 3.2.4.2.3: SMB2_SESSION_FLAG_BINDING, requests signed with
/// Session.SigningKey, which the caller has installed on `conn`). A new session names
/// `previous`, the session of a lost connection (PreviousSessionId, 3.2.4.2.3), or 0.
pub(crate) async fn authenticate(
    conn: &Conn,
    neg: &Negotiated,
    cfg: &ClientConfig,
    binding: Option<u64>,
    previous: u64,
) -> Result<Authenticated, ClientError> {
    let mut ntlm = NtlmClient::new(&cfg.user, &cfg.domain, &cfg.password);
    let mut token = ntlm.initial_token();
    let mut session_id = binding.unwrap_or(0);
    let mut preauth = neg.preauth.clone();
    let security_mode = negotiate::SIGNING_ENABLED as u8 | if cfg.sign { negotiate::SIGNING_REQUIRED as u8 } else { 0 };
    // NTLM needs two round trips; a few more allow for SPNEGO mech renegotiation.
    for _ in 0..6 {
        let mut r = Request::new(Command::SessionSetup, 0, false);
        SessionSetupRequest {
            flags: if binding.is_some() { FLAG_BINDING } else { 0 },
            security_mode,
            capabilities: 0,
            previous_session_id: previous,
            security_buffer: &token,
        }
        .encode(r.body());
        let opts = SendOpts { sign: binding.is_some(), capture: true, session_id: Some(session_id), ..SendOpts::default() };
        let (resp, sent) = conn.call(r, opts).await?;
        if let Some(h) = preauth.as_mut() {
            h.update(&sent);
        }
        session_id = resp.hdr.session_id.0;
        if resp.status() == NtStatus::MORE_PROCESSING_REQUIRED {
            if let Some(h) = preauth.as_mut() {
                h.update(resp.msg());
            }
            let ss = SessionSetupResponse::decode(resp.msg())?;
            token = ntlm.step(ss.security_buffer)?.ok_or(ClientError::Protocol("authentication ended before the server agreed"))?;
            continue;
        }
        let resp = resp.check("SESSION_SETUP")?;
        let ss = SessionSetupResponse::decode(resp.msg())?;
        if !ss.security_buffer.is_empty() {
            // accept-completed, with the mechListMIC we verify.
            ntlm.step(ss.security_buffer)?;
        }
        let session_key = ntlm.session_key().ok_or(ClientError::Protocol("no session key"))?;
        let session_flags = ss.session_flags;
        return Ok(Authenticated { session_id, session_key, session_flags, preauth, final_response: resp });
    }
    Err(ClientError::Protocol("too many SESSION_SETUP rounds"))
}
