//! Sans-IO codec for NFS version 3 over ONC RPC: XDR (RFC 4506), RPC messages and record
//! marking (RFC 5531), NFSv3 and MOUNT v3 (RFC 1813), portmapper v2 and rpcbind v3/v4
//! (RFC 1833, [`portmap`]), and the lock protocols NLM v4 ([`nlm4`]) and NSM v1 ([`nsm1`]).
//! Both directions of every message are here, so a server and a client can share it.
//! Nothing does I/O; every decoder is bounded by its input (no panics, no allocation beyond
//! what the input describes) and is fuzzed.
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
//!
//! A server's round trip, from stream bytes to a framed reply:
//!
//! ```
//! use nfs_wire::nfs3::{Args3, GetattrRes, Nfsstat3, Proc3};
//! use nfs_wire::record::{self, RecordReader};
//! use nfs_wire::rpc::{self, AcceptStat, Auth, CallHeader};
//! use nfs_wire::{XdrReader, XdrWriter};
//!
//! // What a client sends: a GETATTR call in one record.
//! let mut call = Vec::new();
//! let at = record::reserve_mark(&mut call);
//! let hdr = CallHeader { xid: 1, prog: rpc::PROG_NFS, vers: 3, proc_: 1, cred: Auth::None, verf: Auth::None };
//! rpc::encode_call(&hdr, &mut call);
//! Args3::Getattr(nfs_wire::nfs3::GetattrArgs { object: Default::default() }).encode(&mut XdrWriter::new(&mut call));
//! record::set_mark(&mut call, at);
//!
//! // The server: records from the stream, the call header, the arguments, the reply.
//! let mut rr = RecordReader::new(1 << 20);
//! rr.feed(&call);
//! let rec = rr.next_record().unwrap().unwrap();
//! let (hdr, args) = rpc::decode_call(&rec).unwrap();
//! let proc_ = Proc3::from_u32(hdr.proc_).unwrap();
//! let args = Args3::decode(proc_, &mut XdrReader::new(args)).unwrap();
//! assert!(matches!(args, Args3::Getattr(_)));
//! let mut reply = Vec::new();
//! let at = record::reserve_mark(&mut reply);
//! rpc::encode_accepted(hdr.xid, AcceptStat::Success, &mut reply);
//! GetattrRes::Fail(Nfsstat3::Badhandle).encode(&mut XdrWriter::new(&mut reply));
//! record::set_mark(&mut reply, at);
//!
//! // The client: the reply's results.
//! let (xid, results) = rpc::decode_reply(&reply[4..]).unwrap();
//! let res = GetattrRes::decode(&mut XdrReader::new(results.unwrap())).unwrap();
//! assert_eq!((xid, res.status()), (1, Nfsstat3::Badhandle));
//! ```

pub mod mount3;
pub mod nfs3;
pub mod nlm4;
pub mod nsm1;
pub mod portmap;
pub mod record;
pub mod rpc;
pub mod xdr;

pub use xdr::{XdrError, XdrReader, XdrWriter};
