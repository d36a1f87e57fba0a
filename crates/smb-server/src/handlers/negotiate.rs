//! NEGOTIATE (MS-SMB2 3.3.5.4) and the SMB1 multi-protocol upgrade (3.3.5.3.1).

use std::sync::Arc;

use smb_crypto::{Cipher, SigningAlgorithm};
use smb_wire::header::flags;
use smb_wire::msg::negotiate::{
    cap, ctx, id_list_context_data, preauth_context_data, NegotiateContext, NegotiateRequest, NegotiateResponse, HASH_SHA512, SIGNING_ENABLED,
    SIGNING_REQUIRED,
};
use smb_wire::smb1::{parse_negotiate, Smb1Negotiate};
use smb_wire::{dialect, Command, Header, MessageId, NtStatus, SessionId, TreeId};

use crate::config::EncryptionMode;
use crate::connection::{Connection, Negotiated};
use crate::request::{Ctx, HResult, PreauthTarget};
use crate::sync::lock;

/// Dialects served, lowest first.
const DIALECTS: [u16; 5] = [dialect::SMB202, dialect::SMB210, dialect::SMB300, dialect::SMB302, dialect::SMB311];

pub async fn handle(cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> HResult {
    if cx.conn.negotiated.get().is_some() {
        // A second NEGOTIATE on a connection is a protocol violation (MS-SMB2 3.3.5.3.1).
        tracing::warn!(conn = cx.conn.id, "repeated NEGOTIATE; disconnecting");
        cx.conn.close();
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let req = NegotiateRequest::decode(cx.msg()).map_err(super::bad("NEGOTIATE"))?;
    let config = &cx.conn.server.config;
    let Some(&chosen) = DIALECTS.iter().rev().find(|d| req.dialects.contains(d)) else {
        tracing::info!(conn = cx.conn.id, dialects = ?req.dialects, "no common dialect");
        return Err(NtStatus::NOT_SUPPORTED);
    };
    let mut contexts = Vec::new();
    let mut cipher = None;
    let mut signing = if chosen >= dialect::SMB300 { SigningAlgorithm::AesCmac } else { SigningAlgorithm::HmacSha256 };
    if chosen == dialect::SMB311 {
        let mut preauth_ok = false;
        for c in &req.contexts {
            match c {
                NegotiateContext::PreauthIntegrity { hash_algorithms, .. } => {
                    preauth_ok = hash_algorithms.contains(&HASH_SHA512);
                }
                NegotiateContext::Encryption { ciphers } => {
                    // The server's preference order decides (config `ciphers`).
                    cipher = if config.encryption == EncryptionMode::Off {
                        None
                    } else {
                        config.ciphers.iter().copied().find(|c| ciphers.contains(&c.id()))
                    };
                    contexts.push((ctx::ENCRYPTION, id_list_context_data(&[cipher.map_or(0, |c| c.id())])));
                }
                NegotiateContext::Signing { algorithms } => {
                    signing = [SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac, SigningAlgorithm::HmacSha256]
                        .into_iter()
                        .find(|a| algorithms.contains(&a.id()))
                        .unwrap_or(SigningAlgorithm::AesCmac);
                    contexts.push((ctx::SIGNING, id_list_context_data(&[signing.id()])));
                }
                _ => {}
            }
        }
        if !preauth_ok {
            // MS-SMB2 3.3.5.4: 3.1.1 without SHA-512 preauth integrity is refused.
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let salt: [u8; 32] = rand::random();
        contexts.insert(0, (ctx::PREAUTH_INTEGRITY, preauth_context_data(&salt)));
    } else if dialect::is_smb3(chosen)
        && req.capabilities & cap::ENCRYPTION != 0
        && config.encryption != EncryptionMode::Off
        && config.ciphers.contains(&Cipher::Aes128Ccm)
    {
        cipher = Some(Cipher::Aes128Ccm);
    }
    let mut capabilities = 0;
    if chosen >= dialect::SMB210 {
        // Leases are granted from 2.1 on (see `oplocks.rs`); directory leases are not.
        capabilities |= cap::LARGE_MTU | cap::LEASING;
    }
    if dialect::is_smb3(chosen) && chosen != dialect::SMB311 && cipher.is_some() {
        capabilities |= cap::ENCRYPTION;
    }
    if dialect::is_smb3(chosen) && config.multichannel {
        capabilities |= cap::MULTI_CHANNEL;
    }
    let io = if chosen == dialect::SMB202 { 65536 } else { cx.conn.server.config.max_io_size };
    let security_mode = if config.signing_required { SIGNING_ENABLED | SIGNING_REQUIRED } else { SIGNING_ENABLED };
    let resp = NegotiateResponse {
        security_mode,
        dialect: chosen,
        server_guid: cx.conn.server.server_guid,
        capabilities,
        max_transact_size: io,
        max_read_size: io,
        max_write_size: io,
        system_time: smb_fscc::system_time_to_filetime(std::time::SystemTime::now()),
        server_start_time: 0,
        security_buffer: smb_auth::negotiate_token(),
        contexts,
    };
    resp.encode(out);
    let _ = cx.conn.negotiated.set(Negotiated {
        dialect: chosen,
        client_guid: req.client_guid,
        client_security_mode: req.security_mode,
        client_capabilities: req.capabilities,
        signing_algorithm: signing,
        cipher,
        server_capabilities: capabilities,
        server_security_mode: security_mode,
    });
    if chosen == dialect::SMB311 {
        lock(&cx.conn.preauth).update(cx.msg());
        cx.preauth_response = Some(PreauthTarget::Connection);
    }
    tracing::debug!(conn = cx.conn.id, dialect = format!("{chosen:#06x}"), ?cipher, ?signing, "negotiated");
    Ok(NtStatus::SUCCESS)
}

/// Answers an SMB1 NEGOTIATE that offers SMB2 with an SMB2 NEGOTIATE response: the wildcard
/// dialect (the client then sends an SMB2 NEGOTIATE) or 2.0.2 outright.
pub async fn smb1(conn: &Arc<Connection>, frame: &[u8]) {
    let answer = match parse_negotiate(frame) {
        Some(Smb1Negotiate::Wildcard) => dialect::WILDCARD,
        Some(Smb1Negotiate::Smb202) => dialect::SMB202,
        _ => {
            tracing::info!(conn = conn.id, peer = %conn.peer, "SMB1 request without SMB2 dialects; disconnecting");
            conn.close();
            return;
        }
    };
    if conn.negotiated.get().is_some() {
        conn.close();
        return;
    }
    let mut out = vec![0u8; 4];
    Header {
        credit_charge: 0,
        status: 0,
        command: Command::Negotiate as u16,
        credits: 1,
        flags: flags::SERVER_TO_REDIR,
        next_command: 0,
        message_id: MessageId(0),
        async_id: 0,
        tree_id: TreeId(0),
        session_id: SessionId(0),
        signature: [0; 16],
    }
    .encode(&mut out);
    NegotiateResponse {
        security_mode: SIGNING_ENABLED,
        dialect: answer,
        server_guid: conn.server.server_guid,
        capabilities: if answer == dialect::WILDCARD { cap::LARGE_MTU } else { 0 },
        max_transact_size: 65536,
        max_read_size: 65536,
        max_write_size: 65536,
        system_time: smb_fscc::system_time_to_filetime(std::time::SystemTime::now()),
        server_start_time: 0,
        security_buffer: smb_auth::negotiate_token(),
        contexts: Vec::new(),
    }
    .encode(&mut out);
    if answer == dialect::SMB202 {
        let _ = conn.negotiated.set(Negotiated {
            dialect: answer,
            client_guid: [0; 16],
            client_security_mode: 0,
            client_capabilities: 0,
            signing_algorithm: SigningAlgorithm::HmacSha256,
            cipher: None,
            server_capabilities: 0,
            server_security_mode: SIGNING_ENABLED,
        });
    }
    // Message id 0 was used by this exchange; the wildcard client continues with id 1.
    {
        let mut c = lock(&conn.credits);
        c.consume(0, 1);
        c.grant(1);
    }
    if conn.send(out).await.is_err() {
        conn.close();
    }
}
