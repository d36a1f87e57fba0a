//! Feeds arbitrary bytes to a srvsvc pipe, split at a data-chosen point, and
//! drains all output with an odd read size. Must never panic.
#![no_main]
use dcerpc::{Pipe, PipeKind, RpcContext, ServerInfo, ShareInfo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let shares = [
        ShareInfo { name: "data".into(), share_type: 0, comment: "d".into() },
        ShareInfo { name: "IPC$".into(), share_type: 0x8000_0003, comment: String::new() },
    ];
    let server = ServerInfo { name: "BRAID".into(), comment: String::new(), version_major: 10, version_minor: 0, server_type: 0x9003 };
    let ctx = RpcContext { shares: &shares, server: &server };
    let (kind, rest) = match data.split_first() {
        Some((k, r)) => (if k & 1 == 0 { PipeKind::Srvsvc } else { PipeKind::Wkssvc }, r),
        None => return,
    };
    let cut = rest.first().map_or(0, |&c| usize::from(c)).min(rest.len());
    let mut pipe = Pipe::new(kind);
    for part in [&rest[..cut], &rest[cut..]] {
        if pipe.write(part, &ctx).is_err() {
            break;
        }
        while pipe.has_output() {
            let _ = pipe.read(997);
        }
    }
});
