//! Feeds arbitrary bytes to the SMB SESSION_SETUP token parser, both as the
//! first token and as the token following a valid NTLMSSP-in-SPNEGO NEGOTIATE.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smb_auth::{AuthStep, NtlmClient, NtlmServer, ServerConfig, UserDb};

struct OneUser;

impl UserDb for OneUser {
    fn nt_hash(&self, _user: &str) -> Option<[u8; 16]> {
        Some(smb_auth::nt_hash("password"))
    }
}

fuzz_target!(|data: &[u8]| {
    let cfg = ServerConfig {
        netbios_domain: "FUZZ".into(),
        netbios_computer: "SRV".into(),
        dns_domain: "fuzz.test".into(),
        dns_computer: "srv.fuzz.test".into(),
    };

    // As the first token of an exchange, then again on whatever state results.
    let mut server = NtlmServer::with_challenge(cfg.clone(), [7; 8]);
    if let AuthStep::Continue(_) = server.step(data, &OneUser) {
        let _ = server.step(data, &OneUser);
    }

    // As the AUTHENTICATE-carrying token after a valid first leg.
    let mut server = NtlmServer::with_challenge(cfg, [7; 8]);
    let mut client = NtlmClient::new("user", "FUZZ", "password");
    if let AuthStep::Continue(challenge) = server.step(&client.initial_token(), &OneUser) {
        let _ = client.step(&challenge);
        let _ = server.step(data, &OneUser);
    }

    // The client must also survive arbitrary server tokens.
    let mut client = NtlmClient::new("user", "FUZZ", "password");
    client.initial_token();
    let _ = client.step(data);
});
