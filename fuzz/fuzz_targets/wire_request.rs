//! Every SMB2 request decoder on arbitrary bytes: header, each command's body, create
//! contexts (durable handle and app instance contexts too), negotiate contexts, the SMB1 negotiate upgrade and the transport header.
#![no_main]
use libfuzzer_sys::fuzz_target;
use smb_wire::msg::{aapl, app_instance, close, copychunk, create, durable, ioctl, lock, negotiate, notify, query_directory, query_info, read, session_setup, set_info, simple, sparse, tree, write};

fuzz_target!(|data: &[u8]| {
    let _ = smb_wire::Header::decode(data);
    let _ = smb_wire::smb1::parse_negotiate(data);
    if data.len() >= 4 {
        let _ = smb_wire::frame::frame_len([data[0], data[1], data[2], data[3]], 1 << 20);
    }
    let _ = negotiate::NegotiateRequest::decode(data);
    let _ = session_setup::SessionSetupRequest::decode(data);
    let _ = tree::TreeConnectRequest::decode(data);
    let _ = create::CreateRequest::decode(data);
    let _ = create::decode_contexts(data);
    // Durable handle contexts (each decoder checks its exact size first).
    let _ = durable::DurableRequestV2::decode(data.get(..durable::DH2Q_LEN).unwrap_or(data));
    let _ = durable::DurableReconnectV2::decode(data.get(..durable::DH2C_LEN).unwrap_or(data));
    let _ = durable::decode_reconnect_v1(data.get(..durable::DHNC_LEN).unwrap_or(data));
    // Application instance contexts.
    let _ = app_instance::decode_id(data.get(..app_instance::ID_LEN).unwrap_or(data));
    let _ = app_instance::AppInstanceVersion::decode(data.get(..app_instance::VERSION_LEN).unwrap_or(data));
    let _ = close::CloseRequest::decode(data);
    let _ = simple::FlushRequest::decode(data);
    let _ = read::ReadRequest::decode(data);
    let _ = write::WriteRequest::decode(data);
    let _ = write::WriteFixed::decode(data);
    let _ = lock::LockRequest::decode(data);
    let _ = ioctl::IoctlRequest::decode(data);
    let _ = copychunk::CopyRequest::decode(data);
    if let Ok(r) = aapl::AaplRequest::decode(data) {
        assert_eq!(aapl::AaplRequest::decode(&r.encode()), Ok(r));
    }
    let _ = copychunk::CopyResponse::decode(data);
    let _ = sparse::decode_set_sparse(data);
    let _ = sparse::ZeroData::decode(data);
    let _ = sparse::AllocatedRange::decode(data);
    let _ = sparse::AllocatedRange::decode_list(data);
    let _ = query_directory::QueryDirectoryRequest::decode(data);
    let _ = query_info::QueryInfoRequest::decode(data);
    let _ = set_info::SetInfoRequest::decode(data);
    let _ = notify::NotifyRequest::decode(data);
});
