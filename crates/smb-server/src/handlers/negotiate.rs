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

use crate::config::{EncryptionMode, ServerConfig};
use crate::connection::{Connection, Negotiated};
use crate::request::{Ctx, HResult, PreauthTarget, Reply};
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
    let Some(chosen) = choose_dialect(&req.dialects) else {
        tracing::info!(conn = cx.conn.id, dialects = ?req.dialects, "no common dialect");
        return Err(NtStatus::NOT_SUPPORTED);
    };
    let settled = if chosen == dialect::SMB311 { settle_contexts(config, &req)? } else { settle_before_311(config, chosen, req.capabilities) };
    let Settled { cipher, signing, contexts } = settled;
    let capabilities = capabilities(config, chosen, req.capabilities, cipher);
    let io = if chosen == dialect::SMB202 { 65536 } else { config.max_io_size };
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
    let mut reply = Reply::success();
    if chosen == dialect::SMB311 {
        lock(&cx.conn.preauth).update(cx.msg());
        reply.preauth = Some(PreauthTarget::Connection);
    }
    tracing::debug!(conn = cx.conn.id, dialect = format!("{chosen:#06x}"), ?cipher, ?signing, "negotiated");
    Ok(reply)
}

/// What a NEGOTIATE settles besides the dialect.
struct Settled {
    cipher: Option<Cipher>,
    signing: SigningAlgorithm,
    /// Response negotiate contexts (3.1.1): type and data.
    contexts: Vec<(u16, Vec<u8>)>,
}

/// The highest dialect both sides speak.
fn choose_dialect(offered: &[u16]) -> Option<u16> {
    DIALECTS.iter().rev().find(|d| offered.contains(d)).copied()
}

/// Before 3.1.1 there are no contexts: the dialect fixes the signing algorithm, and 3.0 and
/// 3.0.2 encrypt with AES-128-CCM when the client offers ENCRYPTION and the server allows it.
fn settle_before_311(config: &ServerConfig, chosen: u16, client_capabilities: u32) -> Settled {
    let signing = if chosen >= dialect::SMB300 { SigningAlgorithm::AesCmac } else { SigningAlgorithm::HmacSha256 };
    let offered = client_capabilities & cap::ENCRYPTION != 0;
    let cipher = (dialect::is_smb3(chosen) && offered && encrypts_with(config, Cipher::Aes128Ccm)).then_some(Cipher::Aes128Ccm);
    Settled { cipher, signing, contexts: Vec::new() }
}

/// Whether the server encrypts at all and allows `cipher` (config `encryption`, `ciphers`).
fn encrypts_with(config: &ServerConfig, cipher: Cipher) -> bool {
    config.encryption != EncryptionMode::Off && config.ciphers.contains(&cipher)
}

/// The 3.1.1 negotiate contexts (MS-SMB2 3.3.5.4): cipher, signing algorithm and the
/// response contexts. Fails without SHA-512 preauth integrity.
fn settle_contexts(config: &ServerConfig, req: &NegotiateRequest) -> Result<Settled, NtStatus> {
    let mut settled = Settled { cipher: None, signing: SigningAlgorithm::AesCmac, contexts: Vec::new() };
    let mut preauth_ok = false;
    for c in &req.contexts {
        match c {
            NegotiateContext::PreauthIntegrity { hash_algorithms, .. } => {
                preauth_ok = hash_algorithms.contains(&HASH_SHA512);
            }
            // An empty list (clients with encryption off send one) asks for nothing:
            // no cipher and, as Samba does, no context in the response.
            NegotiateContext::Encryption { ciphers } if ciphers.is_empty() => settled.cipher = None,
            NegotiateContext::Encryption { ciphers } => {
                // The server's preference order (config `ciphers`) decides among the ciphers
                // both sides support, as Windows and Samba do (docs/decisions.md).
                settled.cipher = config.ciphers.iter().copied().find(|&c| ciphers.contains(&c.id()) && encrypts_with(config, c));
                let id = settled.cipher.map_or(0, |c| c.id());
                settled.contexts.push((ctx::ENCRYPTION, id_list_context_data(&[id])));
            }
            NegotiateContext::Signing { algorithms } => {
                settled.signing = [SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac, SigningAlgorithm::HmacSha256]
                    .into_iter()
                    .find(|a| algorithms.contains(&a.id()))
                    .unwrap_or(SigningAlgorithm::AesCmac);
                settled.contexts.push((ctx::SIGNING, id_list_context_data(&[settled.signing.id()])));
            }
            _ => {}
        }
    }
    if !preauth_ok {
        // MS-SMB2 3.3.5.4: 3.1.1 without SHA-512 preauth integrity is refused.
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let salt: [u8; 32] = rand::random();
    settled.contexts.insert(0, (ctx::PREAUTH_INTEGRITY, preauth_context_data(&salt)));
    Ok(settled)
}

/// The response's Capabilities (MS-SMB2 3.3.5.4). Those that depend on the client
/// (MULTI_CHANNEL, and ENCRYPTION for 3.0/3.0.2, via `cipher`) are returned only when its
/// request offered them, and so is DIRECTORY_LEASING (3.x), when any share allows directory
/// leases: each share's switch then decides whether its directory opens get one.
/// PERSISTENT_HANDLES (3.x) when any share is continuously available.
fn capabilities(config: &ServerConfig, chosen: u16, offered: u32, cipher: Option<Cipher>) -> u32 {
    let mut capabilities = 0;
    if chosen >= dialect::SMB210 {
        // Leases are granted from 2.1 on (see `oplocks.rs`).
        capabilities |= cap::LARGE_MTU | cap::LEASING;
    }
    if dialect::is_smb3(chosen) && chosen != dialect::SMB311 && cipher.is_some() {
        capabilities |= cap::ENCRYPTION;
    }
    if dialect::is_smb3(chosen) && config.multichannel && offered & cap::MULTI_CHANNEL != 0 {
        capabilities |= cap::MULTI_CHANNEL;
    }
    if dialect::is_smb3(chosen) && offered & cap::DIRECTORY_LEASING != 0 && config.shares.iter().any(|s| s.directory_leases) {
        capabilities |= cap::DIRECTORY_LEASING;
    }
    if dialect::is_smb3(chosen) && config.shares.iter().any(|s| s.continuous_availability) {
        capabilities |= cap::PERSISTENT_HANDLES;
    }
    capabilities
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(contexts: Vec<NegotiateContext>) -> NegotiateRequest {
        NegotiateRequest { security_mode: 0, capabilities: 0, client_guid: [0; 16], dialects: vec![dialect::SMB311], contexts }
    }

    fn preauth() -> NegotiateContext {
        NegotiateContext::PreauthIntegrity { hash_algorithms: vec![HASH_SHA512], salt: vec![0; 32] }
    }

    #[test]
    fn directory_leasing_for_3x_clients_that_offer_it_while_a_share_allows_it() {
        let share = |on: bool| crate::config::ShareConfig {
            name: "s".into(),
            storage: crate::config::ShareStorage::Memory { capacity: 1 << 20 },
            read_only: false,
            users: Vec::new(),
            guest_ok: false,
            encrypt: false,
            directory_leases: on,
            comment: String::new(),
            metadata_cache: Default::default(),
            max_watches: 0,
            limits: Default::default(),
            continuous_availability: false,
        };
        let dl = cap::DIRECTORY_LEASING;
        let config = ServerConfig { shares: vec![share(false), share(true)], ..ServerConfig::default() };
        assert_ne!(capabilities(&config, dialect::SMB311, dl, None) & dl, 0);
        assert_ne!(capabilities(&config, dialect::SMB300, dl, None) & dl, 0);
        assert_eq!(capabilities(&config, dialect::SMB210, dl, None) & dl, 0, "3.x only");
        assert_eq!(capabilities(&config, dialect::SMB311, 0, None) & dl, 0, "not offered");
        let off = ServerConfig { shares: vec![share(false)], ..ServerConfig::default() };
        assert_eq!(capabilities(&off, dialect::SMB311, dl, None) & dl, 0, "no share allows them");
    }

    #[test]
    fn persistent_handles_for_3x_when_a_share_is_continuously_available() {
        let share = |ca: bool| crate::config::ShareConfig {
            continuous_availability: ca,
            ..crate::config::ShareConfig::new("s", crate::config::ShareStorage::Directory("/srv".into()))
        };
        let ph = cap::PERSISTENT_HANDLES;
        let config = ServerConfig { shares: vec![share(false), share(true)], ..ServerConfig::default() };
        assert_ne!(capabilities(&config, dialect::SMB300, 0, None) & ph, 0);
        assert_ne!(capabilities(&config, dialect::SMB311, 0, None) & ph, 0);
        assert_eq!(capabilities(&config, dialect::SMB210, 0, None) & ph, 0, "3.x only");
        let off = ServerConfig { shares: vec![share(false)], ..ServerConfig::default() };
        assert_eq!(capabilities(&off, dialect::SMB311, 0, None) & ph, 0, "no CA share");
    }

    #[test]
    fn the_highest_common_dialect_wins() {
        assert_eq!(choose_dialect(&[dialect::SMB202, dialect::SMB300, 0x0222]), Some(dialect::SMB300));
        assert_eq!(choose_dialect(&[dialect::SMB311, dialect::SMB202]), Some(dialect::SMB311));
        assert_eq!(choose_dialect(&[0x0222, 0x02ff]), None);
    }

    #[test]
    fn before_311_the_dialect_fixes_signing_and_offered_encryption_gets_ccm() {
        let config = ServerConfig::default();
        let s = settle_before_311(&config, dialect::SMB210, cap::ENCRYPTION);
        assert_eq!((s.signing, s.cipher), (SigningAlgorithm::HmacSha256, None));
        let s = settle_before_311(&config, dialect::SMB302, cap::ENCRYPTION);
        assert_eq!((s.signing, s.cipher), (SigningAlgorithm::AesCmac, Some(Cipher::Aes128Ccm)));
        assert_eq!(settle_before_311(&config, dialect::SMB300, 0).cipher, None);
        let off = ServerConfig { encryption: EncryptionMode::Off, ..ServerConfig::default() };
        assert_eq!(settle_before_311(&off, dialect::SMB300, cap::ENCRYPTION).cipher, None);
    }

    #[test]
    fn the_servers_cipher_order_decides_and_an_empty_list_asks_for_none() {
        let config = ServerConfig::default();
        let offered = vec![Cipher::Aes256Gcm.id(), Cipher::Aes128Ccm.id()];
        let s = settle_contexts(&config, &request(vec![preauth(), NegotiateContext::Encryption { ciphers: offered }])).unwrap();
        assert_eq!(s.cipher, Some(Cipher::Aes128Ccm));
        let types: Vec<u16> = s.contexts.iter().map(|c| c.0).collect();
        assert_eq!(types, [ctx::PREAUTH_INTEGRITY, ctx::ENCRYPTION]);
        let s = settle_contexts(&config, &request(vec![preauth(), NegotiateContext::Encryption { ciphers: vec![] }])).unwrap();
        assert_eq!((s.cipher, s.contexts.len()), (None, 1));
    }

    #[test]
    fn signing_prefers_gmac_and_311_requires_sha512_preauth() {
        let config = ServerConfig::default();
        let algorithms = vec![SigningAlgorithm::AesCmac.id(), SigningAlgorithm::AesGmac.id()];
        let s = settle_contexts(&config, &request(vec![preauth(), NegotiateContext::Signing { algorithms }])).unwrap();
        assert_eq!(s.signing, SigningAlgorithm::AesGmac);
        let no_preauth = request(vec![NegotiateContext::Signing { algorithms: vec![SigningAlgorithm::AesCmac.id()] }]);
        assert_eq!(settle_contexts(&config, &no_preauth).err(), Some(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn capabilities_follow_dialect_cipher_and_what_the_client_offered() {
        let config = ServerConfig::default();
        assert_eq!(capabilities(&config, dialect::SMB202, cap::MULTI_CHANNEL, None), 0);
        assert_eq!(capabilities(&config, dialect::SMB210, 0, None), cap::LARGE_MTU | cap::LEASING);
        let c = capabilities(&config, dialect::SMB300, cap::MULTI_CHANNEL, Some(Cipher::Aes128Ccm));
        assert_eq!(c, cap::LARGE_MTU | cap::LEASING | cap::ENCRYPTION | cap::MULTI_CHANNEL);
        // 3.1.1 signals encryption with a context, not the capability.
        assert_eq!(capabilities(&config, dialect::SMB311, 0, Some(Cipher::Aes128Gcm)), cap::LARGE_MTU | cap::LEASING);
        let single = ServerConfig { multichannel: false, ..ServerConfig::default() };
        assert_eq!(capabilities(&single, dialect::SMB311, cap::MULTI_CHANNEL, None) & cap::MULTI_CHANNEL, 0);
    }
}
