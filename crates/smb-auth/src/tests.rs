//! End-to-end tests of the server and client state machines.

use crate::crypto::{self, utf16le};
use crate::messages::{self, av};
use crate::spnego::{self, NegState, NegotiationToken};
use crate::{flags, nt_hash, AuthError, AuthStep, Identity, NtlmClient, NtlmServer, ServerConfig, UserDb};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

struct Users(Vec<(&'static str, [u8; 16])>);

impl UserDb for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(user)).map(|(_, h)| *h)
    }
}

fn users() -> Users {
    Users(vec![("alice", nt_hash("secret")), ("User", nt_hash("Password"))])
}

fn cfg() -> ServerConfig {
    ServerConfig {
        netbios_domain: "BRAID".into(),
        netbios_computer: "FILESRV".into(),
        dns_domain: "braid.test".into(),
        dns_computer: "filesrv.braid.test".into(),
    }
}

fn expect_continue(step: AuthStep) -> Vec<u8> {
    match step {
        AuthStep::Continue(t) => t,
        other => panic!("expected Continue, got {other:?}"),
    }
}

fn expect_failed(step: AuthStep) -> AuthError {
    match step {
        AuthStep::Failed(e) => e,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// Runs a full exchange and returns the server's final step and the client.
fn run(mut client: NtlmClient) -> (AuthStep, NtlmClient) {
    let mut server = NtlmServer::new(cfg());
    let db = users();
    let mut token = client.initial_token();
    loop {
        match server.step(&token, &db) {
            AuthStep::Continue(reply) => match client.step(&reply) {
                Ok(Some(next)) => token = next,
                other => panic!("client stalled: {other:?}"),
            },
            done => return (done, client),
        }
    }
}

#[test]
fn nt_hash_of_password() {
    // MS-NLMP 4.2.1: NTOWFv1("Password")
    assert_eq!(nt_hash("Password").to_vec(), hex("a4 f4 9c 40 65 10 bd ca b6 82 4e e7 c3 0f d8 52"));
}

#[test]
fn round_trip_spnego_with_and_without_key_exch() {
    for key_exch in [true, false] {
        let client = NtlmClient::new("ALICE", "BRAID", "secret").key_exchange(key_exch);
        let (step, mut client) = run(client);
        let AuthStep::Done { output, identity, session_key } = step else { panic!("{step:?}") };
        assert_eq!(identity, Identity::User { name: "ALICE".into(), domain: "BRAID".into() });
        assert_eq!(client.session_key(), Some(session_key));
        assert_ne!(session_key, [0; 16]);
        // The final token carries accept-completed and a mechListMIC the client verifies.
        let NegotiationToken::Resp(resp) = spnego::parse(&output).unwrap() else { panic!() };
        assert_eq!(resp.neg_state, Some(NegState::AcceptCompleted));
        assert!(resp.mech_list_mic.is_some());
        assert_eq!(client.step(&output), Ok(None));
        assert!(client.is_complete());
    }
}

#[test]
fn round_trip_raw_ntlmssp() {
    for key_exch in [true, false] {
        let client = NtlmClient::new("alice", "", "secret").key_exchange(key_exch).raw_ntlmssp();
        let (step, client) = run(client);
        let AuthStep::Done { output, identity, session_key } = step else { panic!("{step:?}") };
        assert!(output.is_empty());
        assert_eq!(identity, Identity::User { name: "alice".into(), domain: "".into() });
        assert_eq!(client.session_key(), Some(session_key));
        assert!(client.is_complete());
    }
}

#[test]
fn wrong_password_and_unknown_user() {
    let (step, _) = run(NtlmClient::new("alice", "BRAID", "wrong"));
    assert_eq!(expect_failed(step), AuthError::WrongPassword { name: "alice".into() });
    let (step, _) = run(NtlmClient::new("mallory", "BRAID", "x"));
    assert_eq!(expect_failed(step), AuthError::UnknownUser { name: "mallory".into(), domain: "BRAID".into() });
    // Domain is part of NTOWFv2: the client and server must agree on what was sent.
    let (step, _) = run(NtlmClient::with_nt_hash("alice", "OTHER", nt_hash("secret")));
    assert!(matches!(step, AuthStep::Done { .. }));
}

#[test]
fn anonymous() {
    for raw in [false, true] {
        let client = if raw { NtlmClient::anonymous().raw_ntlmssp() } else { NtlmClient::anonymous() };
        let (step, mut client) = run(client);
        let AuthStep::Done { output, identity, session_key } = step else { panic!("{step:?}") };
        assert_eq!(identity, Identity::Anonymous);
        assert_eq!(session_key, [0; 16]);
        if !raw {
            assert_eq!(client.step(&output), Ok(None));
        }
        assert!(client.is_complete());
    }
}

/// Drives a raw exchange up to the AUTHENTICATE message.
fn raw_until_authenticate(client: &mut NtlmClient, server: &mut NtlmServer) -> Vec<u8> {
    let negotiate = client.initial_token();
    let challenge = expect_continue(server.step(&negotiate, &users()));
    client.step(&challenge).unwrap().unwrap()
}

#[test]
fn tampered_mic_fails() {
    let mut client = NtlmClient::new("alice", "", "secret").raw_ntlmssp();
    let mut server = NtlmServer::new(cfg());
    let mut auth = raw_until_authenticate(&mut client, &mut server);
    auth[messages::MIC_OFFSET] ^= 1;
    assert_eq!(expect_failed(server.step(&auth, &users())), AuthError::BadMic);
}

#[test]
fn tampered_mech_list_mic_fails() {
    let mut client = NtlmClient::new("alice", "", "secret");
    let mut server = NtlmServer::new(cfg());
    let challenge = expect_continue(server.step(&client.initial_token(), &users()));
    let mut auth = client.step(&challenge).unwrap().unwrap();
    // mechListMIC is the last field of the NegTokenResp: flip its last byte (sequence number).
    *auth.last_mut().unwrap() ^= 1;
    assert_eq!(expect_failed(server.step(&auth, &users())), AuthError::BadMechListMic);
}

#[test]
fn server_mech_list_mic_is_checked_by_client() {
    let mut client = NtlmClient::new("alice", "", "secret");
    let mut server = NtlmServer::new(cfg());
    let challenge = expect_continue(server.step(&client.initial_token(), &users()));
    let auth = client.step(&challenge).unwrap().unwrap();
    let AuthStep::Done { mut output, .. } = server.step(&auth, &users()) else { panic!() };
    *output.last_mut().unwrap() ^= 1;
    assert_eq!(client.step(&output), Err(AuthError::BadMechListMic));
}

#[test]
fn ntlm_v1_refused() {
    let mut server = NtlmServer::new(cfg());
    let mut client = NtlmClient::new("alice", "", "secret").raw_ntlmssp();
    let negotiate = client.initial_token();
    expect_continue(server.step(&negotiate, &users()));
    let auth = messages::build_authenticate(&messages::AuthenticateOut {
        flags: flags::UNICODE | flags::NTLM,
        lm_response: &[1; 24],
        nt_response: &[2; 24],
        domain: "",
        user: "alice",
        workstation: "",
        encrypted_session_key: &[],
    });
    assert_eq!(expect_failed(server.step(&auth, &users())), AuthError::NtlmV1Refused);
}

/// MS-NLMP 4.2.4: the spec's NTLMv2 example (User/Domain/Password, server
/// challenge 0123456789abcdef, client challenge aa*8, time 0, random session key 55*16).
#[test]
fn ms_nlmp_4_2_4_vector() {
    let mut server = NtlmServer::with_challenge(cfg(), hex("0123456789abcdef").try_into().unwrap());
    let negotiate = messages::build_negotiate(0xe28a_8233);
    expect_continue(server.step(&negotiate, &users()));

    let av_pairs = messages::encode_av_pairs(&[(av::NB_DOMAIN_NAME, &utf16le("Domain")), (av::NB_COMPUTER_NAME, &utf16le("Server"))]);
    let temp = messages::build_client_challenge(0, &[0xaa; 8], &av_pairs);
    // 4.2.4.2.2: NTProofStr.
    let mut nt_response = hex("68 cd 0a b8 51 e5 1c 96 aa bc 92 7b eb ef 6a 1c");
    nt_response.extend_from_slice(&temp);
    let key = crypto::ntowf_v2(&nt_hash("Password"), "User", "Domain");
    assert_eq!(crypto::hmac_md5(&key, &[&hex("0123456789abcdef"), &temp]).to_vec(), nt_response[..16]);
    // 4.2.4.2.1: LMv2 response.
    let lm = hex("86 c3 50 97 ac 9c ec 10 25 54 76 4a 57 cc cc 19 aa aa aa aa aa aa aa aa");
    assert_eq!(crypto::hmac_md5(&key, &[&hex("0123456789abcdef"), &[0xaa; 8]]).to_vec(), lm[..16]);
    // 4.2.4.1.3 SessionBaseKey.
    let sbk = crypto::hmac_md5(&key, &[&nt_response[..16]]);
    assert_eq!(sbk.to_vec(), hex("8d e4 0c ca db c1 4a 82 f1 5c b0 ad 0d e9 5c a3"));
    // 4.2.4.2.3 EncryptedRandomSessionKey.
    let enc = hex("c5 da d2 54 4f c9 79 90 94 ce 1c e9 0b c9 d0 3e");
    let auth = messages::build_authenticate(&messages::AuthenticateOut {
        flags: 0xe28a_8233,
        lm_response: &lm,
        nt_response: &nt_response,
        domain: "Domain",
        user: "User",
        workstation: "COMPUTER",
        encrypted_session_key: &enc,
    });
    let AuthStep::Done { identity, session_key, output } = server.step(&auth, &users()) else { panic!() };
    assert_eq!(identity, Identity::User { name: "User".into(), domain: "Domain".into() });
    assert_eq!(session_key, [0x55; 16]);
    assert!(output.is_empty());
}

#[test]
fn kerberos_preferred_then_ntlm() {
    let mut list = crate::der::encode(crate::der::TAG_OID, spnego::OID_MS_KRB5);
    list.extend(crate::der::encode(crate::der::TAG_OID, spnego::OID_KRB5));
    list.extend(crate::der::encode(crate::der::TAG_OID, spnego::OID_NTLMSSP));
    let list = crate::der::encode(crate::der::TAG_SEQUENCE, &list);
    let mut client = NtlmClient::new("alice", "BRAID", "secret").with_mech_types_der(list);
    let mut server = NtlmServer::new(cfg());
    let db = users();
    let reply = expect_continue(server.step(&client.initial_token(), &db));
    let NegotiationToken::Resp(resp) = spnego::parse(&reply).unwrap() else { panic!() };
    assert_eq!(resp.neg_state, Some(NegState::AcceptIncomplete));
    assert_eq!(resp.supported_mech, Some(spnego::OID_NTLMSSP));
    assert_eq!(resp.response_token, None);
    let negotiate = client.step(&reply).unwrap().unwrap();
    let challenge = expect_continue(server.step(&negotiate, &db));
    let auth = client.step(&challenge).unwrap().unwrap();
    let AuthStep::Done { output, session_key, .. } = server.step(&auth, &db) else { panic!() };
    assert_eq!(client.step(&output), Ok(None));
    assert_eq!(client.session_key(), Some(session_key));
}

#[test]
fn unsupported_mech_and_sequence_errors() {
    // Only Kerberos offered.
    let list = crate::der::encode(crate::der::TAG_SEQUENCE, &crate::der::encode(crate::der::TAG_OID, spnego::OID_KRB5));
    let token = spnego::encode_init(&list, b"x");
    assert_eq!(expect_failed(NtlmServer::new(cfg()).step(&token, &users())), AuthError::UnsupportedMech);
    // A NegTokenResp as first token.
    let resp = spnego::encode_resp(&Default::default());
    assert!(matches!(expect_failed(NtlmServer::new(cfg()).step(&resp, &users())), AuthError::UnexpectedToken(_)));
    // Anything after completion.
    let mut client = NtlmClient::new("alice", "", "secret").raw_ntlmssp();
    let mut server = NtlmServer::new(cfg());
    let auth = raw_until_authenticate(&mut client, &mut server);
    assert!(matches!(server.step(&auth, &users()), AuthStep::Done { .. }));
    assert!(matches!(expect_failed(server.step(&auth, &users())), AuthError::UnexpectedToken(_)));
}

#[test]
fn challenge_contents() {
    let mut server = NtlmServer::with_challenge_at(cfg(), [9; 8], 0x01d0_0000_0000_0000);
    let negotiate = messages::build_negotiate(flags::UNICODE | flags::REQUEST_TARGET | flags::NTLM | flags::EXTENDED_SESSIONSECURITY | flags::LM_KEY);
    let challenge = expect_continue(server.step(&negotiate, &users()));
    let c = messages::parse_challenge(&challenge).unwrap();
    assert_eq!(c.server_challenge, [9; 8]);
    assert_eq!(
        c.flags,
        flags::UNICODE | flags::REQUEST_TARGET | flags::NTLM | flags::EXTENDED_SESSIONSECURITY | flags::TARGET_INFO | flags::TARGET_TYPE_DOMAIN
    );
    assert_eq!(c.target_name, utf16le("BRAID"));
    let pairs = messages::parse_av_pairs(&c.target_info).unwrap();
    let ids: Vec<u16> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(ids, [av::NB_DOMAIN_NAME, av::NB_COMPUTER_NAME, av::DNS_DOMAIN_NAME, av::DNS_COMPUTER_NAME, av::TIMESTAMP]);
    assert_eq!(pairs[3].1, utf16le("filesrv.braid.test"));
    assert_eq!(pairs[4].1, 0x01d0_0000_0000_0000u64.to_le_bytes());
    assert!(c.target_info.ends_with(&[0, 0, 0, 0]));
}

/// Every prefix of every valid token, and pseudo-random garbage, must fail cleanly.
#[test]
fn truncated_and_garbage_tokens() {
    let db = users();
    let mut client = NtlmClient::new("alice", "BRAID", "secret");
    let mut server = NtlmServer::with_challenge(cfg(), [1; 8]);
    let t1 = client.initial_token();
    let t2 = expect_continue(server.step(&t1, &db));
    let t3 = client.step(&t2).unwrap().unwrap();
    for n in 0..t1.len() {
        let mut s = NtlmServer::new(cfg());
        assert!(matches!(s.step(&t1[..n], &db), AuthStep::Failed(_)), "t1[..{n}]");
    }
    for n in 0..t3.len() {
        let mut s = NtlmServer::with_challenge(cfg(), [1; 8]);
        expect_continue(s.step(&t1, &db));
        assert!(matches!(s.step(&t3[..n], &db), AuthStep::Failed(_)), "t3[..{n}]");
    }
    for n in 0..t2.len() {
        let mut c = NtlmClient::new("alice", "BRAID", "secret");
        c.initial_token();
        assert!(c.step(&t2[..n]).is_err(), "t2[..{n}]");
    }
    // Deterministic xorshift garbage, sometimes with a valid-looking prefix.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..2000 {
        let mut buf = Vec::new();
        let len = (x % 300) as usize;
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf.push(x as u8);
        }
        match i % 4 {
            1 => buf.splice(0..0, messages::SIGNATURE.iter().copied().chain([3, 0, 0, 0])).for_each(drop),
            2 => buf.splice(0..0, [0xa1, 0x81, 0xff, 0x30]).for_each(drop),
            3 => buf.splice(0..0, t1[..20].iter().copied()).for_each(drop),
            _ => {}
        }
        let mut s = NtlmServer::new(cfg());
        let _ = s.step(&buf, &db);
        let mut s = NtlmServer::new(cfg());
        expect_continue(s.step(&t1, &db));
        assert!(matches!(s.step(&buf, &db), AuthStep::Failed(_)));
    }
}

/// Tokens recorded from pyspnego 0.x (a third-party SPNEGO/NTLM client) for
/// BRAID\\alice / "S3cret!" against this server with a fixed challenge and
/// timestamp: its NegTokenInit, our CHALLENGE reply, its AUTHENTICATE (with MIC
/// and mechListMIC), our final reply and the session key it derived.
mod pyspnego_vector {
    pub const T1: &str = concat!(
        "604806062b0601050502a03e303ca00e300c060a2b06010401823702020aa22a04284e544c4d53535000010000003782",
        "08e200000000280000000000000028000000000c04000000000f",
    );
    pub const T2: &str = concat!(
        "a181ce3081cba0030a0101a10c060a2b06010401823702020aa281b50481b24e544c4d53535000020000000a000a0038",
        "000000358289e21122334455667788000000000000000070007000420000000a007c4f0000000f420052004100490044",
        "0002000a004200520041004900440001000e00460049004c00450053005200560004001400620072006100690064002e",
        "00740065007300740003002400660069006c0065007300720076002e00620072006100690064002e0074006500730074",
        "0007000800785634120000da0100000000",
    );
    pub const T3: &str = concat!(
        "a18201813082017da0030a0101a28201600482015c4e544c4d53535000030000001800180058000000c400c400700000",
        "000a000a00340100000a000a003e0100000400040048010000100010004c010000358289e2000c04000000000fa14323",
        "0c31f5bb46e2cd435f6dfcf887000000000000000000000000000000000000000000000000f6e4f372f4cd130671e713",
        "fa4b7d73230101000000000000785634120000da0191b0ab12565cc8c10000000002000a004200520041004900440001",
        "000e00460049004c00450053005200560004001400620072006100690064002e00740065007300740003002400660069",
        "006c0065007300720076002e00620072006100690064002e00740065007300740007000800785634120000da01090018",
        "0063006900660073002f00660069006c0065007300720076000600040002000000000000000000000042005200410049",
        "00440061006c0069006300650056004d0095d3202f2753867f04dbbc3437bf4f71a312041001000000cf76e6dda72ed4",
        "d100000000",
    );
    pub const OUT: &str = "a11b3019a0030a0100a312041001000000e094aca42c7a1b2300000000";
    pub const KEY: &str = "bc751954985df065b5e3caa6dc1ee01e";
}

#[test]
fn pyspnego_recorded_exchange() {
    let cfg = ServerConfig {
        netbios_domain: "BRAID".into(),
        netbios_computer: "FILESRV".into(),
        dns_domain: "braid.test".into(),
        dns_computer: "filesrv.braid.test".into(),
    };
    let db = Users(vec![("alice", nt_hash("S3cret!"))]);
    let mut server = NtlmServer::with_challenge_at(cfg, hex("1122334455667788").try_into().unwrap(), 0x01da_0000_1234_5678);
    assert_eq!(expect_continue(server.step(&hex(pyspnego_vector::T1), &db)), hex(pyspnego_vector::T2));
    let AuthStep::Done { output, identity, session_key } = server.step(&hex(pyspnego_vector::T3), &db) else { panic!() };
    assert_eq!(identity, Identity::User { name: "alice".into(), domain: "BRAID".into() });
    assert_eq!(session_key.to_vec(), hex(pyspnego_vector::KEY));
    assert_eq!(output, hex(pyspnego_vector::OUT));

    // Same AUTHENTICATE with a wrong stored password.
    let db = Users(vec![("alice", nt_hash("other"))]);
    let mut server = NtlmServer::with_challenge_at(ServerConfig::default(), hex("1122334455667788").try_into().unwrap(), 0);
    expect_continue(server.step(&hex(pyspnego_vector::T1), &db));
    assert_eq!(expect_failed(server.step(&hex(pyspnego_vector::T3), &db)), AuthError::WrongPassword { name: "alice".into() });
}
