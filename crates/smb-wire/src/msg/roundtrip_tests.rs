//! Client-side encoders against server-side decoders and the other way round: each side
//! checks the other, so a layout mistake has to be made twice, identically, to pass.

use super::*;
use crate::header::{Header, PROTOCOL_ID};
use crate::{FileId, MessageId, SessionId, TreeId};

fn hdr(command: u16, response: bool) -> Vec<u8> {
    let mut m = Vec::new();
    Header {
        credit_charge: 1,
        status: 0,
        command,
        credits: 1,
        flags: if response { crate::header::flags::SERVER_TO_REDIR } else { 0 },
        next_command: 0,
        message_id: MessageId(7),
        async_id: 0,
        tree_id: TreeId(3),
        session_id: SessionId(9),
        signature: [0; 16],
    }
    .encode(&mut m);
    assert_eq!(&m[..4], &PROTOCOL_ID);
    m
}

const FID: FileId = FileId { persistent: 0x1122, volatile: 0x3344_5566 };

#[test]
fn negotiate_request() {
    use negotiate::*;
    for dialects in [vec![0x0210, 0x0300, 0x0302], vec![0x0202, 0x0210, 0x0300, 0x0302, 0x0311]] {
        let req = NegotiateRequest {
            security_mode: SIGNING_ENABLED,
            capabilities: cap::LARGE_MTU | cap::ENCRYPTION,
            client_guid: [4; 16],
            dialects: dialects.clone(),
            contexts: if dialects.contains(&0x0311) {
                vec![
                    NegotiateContext::PreauthIntegrity { hash_algorithms: vec![HASH_SHA512], salt: vec![7; 32] },
                    NegotiateContext::Encryption { ciphers: vec![2, 1, 4, 3] },
                    NegotiateContext::Signing { algorithms: vec![2, 1] },
                    NegotiateContext::NetName("server".into()),
                ]
            } else {
                vec![]
            },
        };
        let mut m = hdr(0, false);
        req.encode(&mut m);
        assert_eq!(NegotiateRequest::decode(&m).unwrap(), req);
    }
}

#[test]
fn negotiate_response() {
    use negotiate::*;
    let resp = NegotiateResponse {
        security_mode: SIGNING_ENABLED | SIGNING_REQUIRED,
        dialect: 0x0311,
        server_guid: [1; 16],
        capabilities: cap::LARGE_MTU,
        max_transact_size: 1 << 20,
        max_read_size: 8 << 20,
        max_write_size: 4 << 20,
        system_time: 123,
        server_start_time: 0,
        security_buffer: vec![0x60, 1, 2, 3, 4],
        contexts: vec![
            (ctx::PREAUTH_INTEGRITY, preauth_context_data(&[5; 32])),
            (ctx::ENCRYPTION, id_list_context_data(&[4])),
            (ctx::SIGNING, id_list_context_data(&[2])),
        ],
    };
    let mut m = hdr(0, true);
    resp.encode(&mut m);
    let dec = NegotiateResponse::decode(&m).unwrap();
    assert_eq!(dec, resp);
    assert_eq!(parse_context(dec.contexts[1].0, &dec.contexts[1].1).unwrap(), NegotiateContext::Encryption { ciphers: vec![4] });
    // 2.1 responses have no contexts, whatever the count field holds.
    let old = NegotiateResponse { dialect: 0x0210, contexts: vec![], ..resp };
    let mut m = hdr(0, true);
    old.encode(&mut m);
    assert_eq!(NegotiateResponse::decode(&m).unwrap(), old);
    assert!(NegotiateResponse::decode(&m[..100]).is_err());
}

#[test]
fn session_setup() {
    use session_setup::*;
    let token = [0x60u8, 0x48, 1, 2, 3];
    let req = SessionSetupRequest { flags: FLAG_BINDING, security_mode: 1, capabilities: 1, previous_session_id: 77, security_buffer: &token };
    let mut m = hdr(1, false);
    req.encode(&mut m);
    assert_eq!(SessionSetupRequest::decode(&m).unwrap(), req);
    let mut m = hdr(1, true);
    encode_response(&mut m, SESSION_FLAG_ENCRYPT_DATA, &token);
    assert_eq!(SessionSetupResponse::decode(&m).unwrap(), SessionSetupResponse { session_flags: SESSION_FLAG_ENCRYPT_DATA, security_buffer: &token });
    let mut m = hdr(1, true);
    encode_response(&mut m, 0, &[]);
    assert_eq!(SessionSetupResponse::decode(&m).unwrap().security_buffer, &[] as &[u8]);
}

#[test]
fn tree_connect() {
    use tree::*;
    let req = TreeConnectRequest { flags: 0, path: "\\\\127.0.0.1\\data".into() };
    let mut m = hdr(3, false);
    req.encode(&mut m);
    assert_eq!(TreeConnectRequest::decode(&m).unwrap(), req);
    let resp = TreeConnectResponse { share_type: SHARE_TYPE_DISK, share_flags: share_flags::ENCRYPT_DATA, capabilities: 0, maximal_access: 0x1f01ff };
    let mut m = hdr(3, true);
    resp.encode(&mut m);
    assert_eq!(TreeConnectResponse::decode(&m).unwrap(), resp);
}

#[test]
fn create() {
    use create::*;
    let data = [1u8; 12];
    for (name, contexts) in
        [("", vec![]), ("dir\\file.txt", vec![CreateContext { name: b"MxAc", data: &[] }, CreateContext { name: b"QFid", data: &data }])]
    {
        let req = CreateRequest {
            security_flags: 0,
            oplock_level: oplock::NONE,
            impersonation_level: 2,
            desired_access: access::FILE_GENERIC_READ,
            file_attributes: 0x80,
            share_access: share::READ | share::WRITE,
            create_disposition: disposition::OPEN_IF,
            create_options: options::NON_DIRECTORY_FILE,
            name: name.into(),
            contexts,
        };
        let mut m = hdr(5, false);
        req.encode(&mut m);
        assert_eq!(CreateRequest::decode(&m).unwrap(), req);
    }
    for contexts in [vec![], encode_contexts(&[(b"MxAc", vec![0; 8])])] {
        let resp = CreateResponse {
            oplock_level: 0,
            flags: 0,
            create_action: action::CREATED,
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            allocation_size: 4096,
            end_of_file: 5,
            file_attributes: 0x20,
            file_id: FID,
            contexts,
        };
        let mut m = hdr(5, true);
        resp.encode(&mut m);
        assert_eq!(CreateResponse::decode(&m).unwrap(), resp);
    }
}

#[test]
fn close() {
    use close::*;
    let req = CloseRequest { flags: FLAG_POSTQUERY_ATTRIB, file_id: FID };
    let mut m = hdr(6, false);
    req.encode(&mut m);
    assert_eq!(CloseRequest::decode(&m).unwrap(), req);
    let resp = CloseResponse {
        flags: 1,
        creation_time: 1,
        last_access_time: 2,
        last_write_time: 3,
        change_time: 4,
        allocation_size: 5,
        end_of_file: 6,
        file_attributes: 7,
    };
    let mut m = hdr(6, true);
    resp.encode(&mut m);
    assert_eq!(CloseResponse::decode(&m).unwrap(), resp);
}

#[test]
fn read() {
    use read::*;
    let req = ReadRequest { flags: 0, length: 65536, offset: 1 << 33, file_id: FID, minimum_count: 1, channel: 0 };
    let mut m = hdr(8, false);
    req.encode(&mut m);
    assert_eq!(ReadRequest::decode(&m).unwrap(), req);
    let mut m = hdr(8, true);
    encode_response_prefix(&mut m, 5);
    m.extend_from_slice(b"hello");
    let r = decode_response(&m).unwrap();
    assert_eq!(&m[r], b"hello");
    // A length running past the message is refused.
    assert!(decode_response(&m[..m.len() - 1]).is_err());
    // Padded (smbtorture's bug 14607 control): the data offset skips the padding.
    let mut m = hdr(8, true);
    encode_response_prefix_padded(&mut m, 5, 8);
    m.extend_from_slice(b"hello");
    assert_eq!(m[HEADER_LEN + 2], 0x58);
    let r = decode_response(&m).unwrap();
    assert_eq!(&m[r], b"hello");
    let mut m = hdr(11, true);
    ioctl::encode_response_padded(&mut m, 1, FID, &[8], 8);
    assert_eq!(ioctl::decode_response(&m).unwrap(), &[8]);
}

#[test]
fn write() {
    use write::*;
    let data = vec![0xabu8; 1000];
    let req = WriteRequest { offset: 12345, file_id: FID, channel: 0, flags: 0, data: &data };
    let mut m = hdr(9, false);
    req.encode(&mut m);
    assert_eq!(WriteRequest::decode(&m).unwrap(), req);
    assert_eq!(WriteRequest::peek_length(&m).unwrap(), 1000);
    // The fixed part alone, with the payload appended by the caller, is the same message.
    let mut split = hdr(9, false);
    req.encode_fixed(&mut split, data.len());
    split.extend_from_slice(&data);
    assert_eq!(split, m);
    let mut m = hdr(9, true);
    encode_response(&mut m, 1000);
    assert_eq!(decode_response(&m).unwrap(), 1000);
}

#[test]
fn lock() {
    use lock::*;
    let req = LockRequest {
        lock_sequence: 0,
        file_id: FID,
        locks: vec![
            LockElement { offset: 10, length: 20, flags: flags::EXCLUSIVE_LOCK | flags::FAIL_IMMEDIATELY },
            LockElement { offset: 0, length: 1, flags: flags::UNLOCK },
        ],
    };
    let mut m = hdr(10, false);
    req.encode(&mut m);
    assert_eq!(LockRequest::decode(&m).unwrap(), req);
}

#[test]
fn ioctl() {
    use ioctl::*;
    for input in [&[][..], &[1u8, 2, 3][..]] {
        let req = IoctlRequest {
            ctl_code: fsctl::QUERY_NETWORK_INTERFACE_INFO,
            file_id: FileId::RELATED,
            input,
            max_input_response: 0,
            max_output_response: 65536,
            flags: FLAG_IS_FSCTL,
        };
        let mut m = hdr(11, false);
        req.encode(&mut m);
        assert_eq!(IoctlRequest::decode(&m).unwrap(), req);
    }
    let ifaces = vec![
        NetworkInterfaceInfo {
            if_index: 1,
            capability: interface_caps::RSS_CAPABLE,
            link_speed: 10_000_000_000,
            addr: Some("192.0.2.1".parse().unwrap()),
        },
        NetworkInterfaceInfo { if_index: 2, capability: 0, link_speed: 1_000_000_000, addr: Some("2001:db8::1".parse().unwrap()) },
    ];
    let out = encode_network_interfaces(&ifaces);
    let mut m = hdr(11, true);
    encode_response(&mut m, fsctl::QUERY_NETWORK_INTERFACE_INFO, FID, &out);
    assert_eq!(decode_network_interfaces(decode_response(&m).unwrap()).unwrap(), ifaces);
    assert!(decode_network_interfaces(&out[..100]).is_err());
}

#[test]
fn query_directory_and_info() {
    use query_directory::*;
    let req = QueryDirectoryRequest {
        info_class: 37,
        flags: flags::RESTART_SCANS,
        file_index: 0,
        file_id: FID,
        pattern: "*".into(),
        output_buffer_length: 65536,
    };
    let mut m = hdr(14, false);
    req.encode(&mut m);
    assert_eq!(QueryDirectoryRequest::decode(&m).unwrap(), req);
    let mut m = hdr(14, true);
    encode_output_response(&mut m, b"entries");
    assert_eq!(decode_output_response(&m).unwrap(), b"entries");

    use query_info::*;
    for input in [&[][..], &[9u8; 4][..]] {
        let req = QueryInfoRequest {
            info_type: info_type::FILE,
            info_class: 18,
            output_buffer_length: 4096,
            input,
            additional_information: 0,
            flags: 0,
            file_id: FID,
        };
        let mut m = hdr(16, false);
        req.encode(&mut m);
        assert_eq!(QueryInfoRequest::decode(&m).unwrap(), req);
    }
    let mut m = hdr(16, true);
    query_info::encode_response(&mut m, &[]);
    assert_eq!(query_info::decode_response(&m).unwrap(), &[] as &[u8]);
}

#[test]
fn set_info_flush_and_empty() {
    use set_info::*;
    let buf = [1u8, 0, 0, 0, 0, 0, 0, 0];
    let req = SetInfoRequest { info_type: 1, info_class: 20, buffer: &buf, additional_information: 0, file_id: FID };
    let mut m = hdr(17, false);
    req.encode(&mut m);
    assert_eq!(SetInfoRequest::decode(&m).unwrap(), req);
    let mut m = hdr(17, true);
    simple::encode_set_info_response(&mut m);
    simple::decode_set_info_response(&m).unwrap();

    let req = simple::FlushRequest { file_id: FID };
    let mut m = hdr(7, false);
    req.encode(&mut m);
    assert_eq!(simple::FlushRequest::decode(&m).unwrap(), req);

    let mut m = hdr(13, false);
    simple::encode_empty_request(&mut m);
    simple::decode_empty(&m).unwrap();
    simple::decode_empty_response(&m).unwrap();

    let mut m = hdr(5, true);
    error::encode_error_with_data(&mut m, &[1, 2, 3, 4]);
    assert_eq!(error::decode_error(&m).unwrap(), &[1, 2, 3, 4]);
    let mut m = hdr(5, true);
    error::encode_error(&mut m);
    assert_eq!(error::decode_error(&m).unwrap(), &[] as &[u8]);
}

#[test]
fn oplock_break_messages() {
    use oplock::*;
    let b = OplockBreak { oplock_level: create::oplock::II, file_id: FID };
    let mut m = hdr(0x12, true);
    b.encode(&mut m);
    assert_eq!(m.len(), 64 + 24);
    assert_eq!(OplockBreak::decode(&m).unwrap(), b);
    assert_eq!(break_ack_kind(&m), Some(OPLOCK_BREAK_SIZE));

    let ack = LeaseAck { flags: 0, lease_key: [7; 16], lease_state: lease_state::READ | lease_state::HANDLE, lease_duration: 0 };
    let mut m = hdr(0x12, false);
    ack.encode(&mut m);
    assert_eq!(m.len(), 64 + 36);
    assert_eq!(LeaseAck::decode(&m).unwrap(), ack);
    assert_eq!(break_ack_kind(&m), Some(LEASE_ACK_SIZE));
    // The other shape's decoder refuses it; a short body is malformed, not a panic.
    assert!(OplockBreak::decode(&m).is_err());
    assert!(LeaseAck::decode(&m[..80]).is_err());

    let n = LeaseBreak {
        new_epoch: 3,
        flags: LEASE_BREAK_ACK_REQUIRED,
        lease_key: [9; 16],
        current_state: lease_state::ALL,
        new_state: lease_state::READ,
    };
    let mut m = hdr(0x12, true);
    n.encode(&mut m);
    assert_eq!(m.len(), 64 + 44);
    assert_eq!(LeaseBreak::decode(&m).unwrap(), n);
    assert_eq!(break_ack_kind(&m), None);
    assert_eq!(break_ack_kind(&m[..65]), None);
}

#[test]
fn lease_contexts() {
    use oplock::*;
    let v1 = LeaseContext { key: [1; 16], state: lease_state::ALL, flags: 0, v2: None };
    let d = v1.encode();
    assert_eq!(d.len(), LEASE_V1_LEN);
    assert_eq!(LeaseContext::decode(&d).unwrap(), v1);
    let v2 = LeaseContext { key: [2; 16], state: lease_state::READ, flags: lease_flags::PARENT_LEASE_KEY_SET, v2: Some(([3; 16], 0x1234)) };
    let d = v2.encode();
    assert_eq!(d.len(), LEASE_V2_LEN);
    assert_eq!(LeaseContext::decode(&d).unwrap(), v2);
    // Inside a CREATE request's context chain, as a client sends it.
    let req = create::CreateRequest {
        security_flags: 0,
        oplock_level: create::oplock::LEASE,
        impersonation_level: 2,
        desired_access: 1,
        file_attributes: 0,
        share_access: 7,
        create_disposition: 3,
        create_options: 0,
        name: "a.txt".into(),
        contexts: vec![create::CreateContext { name: b"RqLs", data: &d }],
    };
    let mut m = hdr(5, false);
    req.encode(&mut m);
    let dec = create::CreateRequest::decode(&m).unwrap();
    assert_eq!(LeaseContext::decode(dec.context(b"RqLs").unwrap()).unwrap(), v2);
    for bad in [0usize, 31, 33, 51, 53] {
        assert!(LeaseContext::decode(&vec![0; bad]).is_err(), "{bad} bytes");
    }
}
