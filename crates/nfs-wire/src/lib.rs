//! Sans-IO codec for NFS version 3 over ONC RPC: XDR (RFC 4506), RPC messages and record
//! marking (RFC 5531), NFSv3 and MOUNT v3 (RFC 1813). Both directions of every message are
//! here, so a server and a client can share it. Nothing does I/O; every decoder is bounded
//! by its input (no panics, no allocation beyond what the input describes) and is fuzzed.
//!
//! Names follow the XDR names in CamelCase (`fattr3` -> [`nfs3::Fattr3`], `GETATTR3args` ->
//! [`nfs3::GetattrArgs`]). Where the Rust names differ from the plan of record:
//! - The XDR field `where` is `where_`, `type` (in fattr3) is `ftype`.
//! - `rpc::encode_denied` takes the output buffer like `encode_accepted`:
//!   `encode_denied(xid, RejectStat, &mut Vec<u8>)`.
//! - `rpc::decode_call` returns `Result<_, RpcError>`, which says how to answer a call that
//!   does not decode (RPC_MISMATCH, AUTH_BADCRED, or drop it).
//! - Results are enums `Ok(<Proc>ResOk)` / `Fail(Nfsstat3, body)` with a `status()` method.
//!   GETATTR's failure has no body: `GetattrRes::Fail(Nfsstat3)`. READ's success holds the
//!   head and the data: `ReadRes::Ok(ReadResOk, &[u8])`.
//! - The READDIR entry writers are `nfs3::DirWriter` and `nfs3::DirPlusWriter`.
//! - Every type has inherent `decode`/`encode`; the [`xdr::Xdr`] trait offers the same for
//!   generic code.

pub mod mount3;
pub mod nfs3;
pub mod record;
pub mod rpc;
pub mod xdr;

pub use xdr::{XdrError, XdrReader, XdrWriter};
