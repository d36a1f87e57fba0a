//! One RPC call from record to reply: the RPC header, the program and version, the
//! procedure's arguments, the export and the caller's identity (from the call's first
//! handle), the duplicate request cache, the handler, the metrics.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use nfs_wire::mount3::{MountArgs3, MountProc3};
use nfs_wire::nfs3::{Args3, NfsFh3, Nfsstat3, Proc3};
use nfs_wire::record::{reserve_mark, Record};
use nfs_wire::rpc::{self, AcceptStat, Auth, AuthStat, CallHeader, RejectStat, RpcError, PROG_MOUNT, PROG_NFS};
use nfs_wire::XdrReader;

use crate::auth::{self, Credential, Identity};
use crate::drc::{DrcKey, Seen};
use crate::handlers::{attr, create, dir, fs, link, lookup, read, remove, rename, write};
use crate::mount;
use crate::request::Ctx;
use crate::state::{ExportState, NfsState, MOUNT_OPS};

/// The reply to one call record (starting with room for its record mark), or None when
/// nothing is to be sent (undecodable, or a duplicate of a call still running).
/// `slots` are the connection's places at the exports' limiters (`qos.rs`).
pub async fn call(state: &Arc<NfsState>, peer: IpAddr, slots: &crate::qos::Slots, record: Record) -> Option<Vec<u8>> {
    let record = Arc::new(record);
    let mut out = Vec::with_capacity(512);
    reserve_mark(&mut out);
    let (hdr, args) = match rpc::decode_call(&record) {
        Ok(x) => x,
        Err(RpcError::RpcMismatch { xid, .. }) => return denied(xid, RejectStat::RpcMismatch { low: 2, high: 2 }, out),
        Err(RpcError::BadCred { xid }) => return denied(xid, RejectStat::AuthError(AuthStat::BadCred), out),
        Err(e) => {
            tracing::debug!(%peer, error = %e, "undecodable RPC message dropped");
            return None;
        }
    };
    let v3 = hdr.vers == 3;
    // MOUNT v1 and v2's procedures other than MNT have v3's encoding; `showmount` asks
    // v1's EXPORT. Their MNT (NFSv2's file handles) and v2's PATHCONF are not served.
    let v1 = (hdr.vers == 1 || hdr.vers == 2) && hdr.proc_ != MountProc3::Mnt as u32;
    match hdr.prog {
        PROG_NFS if v3 => nfs(state, peer, slots, &hdr, args, &record, out).await,
        PROG_MOUNT if v3 || v1 => mount_call(state, peer, &hdr, args, out).await,
        PROG_MOUNT if hdr.vers == 1 || hdr.vers == 2 => accepted(hdr.xid, AcceptStat::ProcUnavail, out),
        PROG_MOUNT => accepted(hdr.xid, AcceptStat::ProgMismatch { low: 1, high: 3 }, out),
        PROG_NFS => accepted(hdr.xid, AcceptStat::ProgMismatch { low: 3, high: 3 }, out),
        nfs_wire::nlm4::NLM_PROG | nfs_wire::nsm1::SM_PROG => crate::nlm::call(state, peer, &hdr, args, out).await,
        _ => accepted(hdr.xid, AcceptStat::ProgUnavail, out),
    }
}

fn accepted(xid: u32, stat: AcceptStat, mut out: Vec<u8>) -> Option<Vec<u8>> {
    rpc::encode_accepted(xid, stat, &mut out);
    Some(out)
}

fn denied(xid: u32, stat: RejectStat, mut out: Vec<u8>) -> Option<Vec<u8>> {
    rpc::encode_denied(xid, stat, &mut out);
    Some(out)
}

async fn mount_call(state: &Arc<NfsState>, peer: IpAddr, hdr: &CallHeader, args: &[u8], out: Vec<u8>) -> Option<Vec<u8>> {
    let started = Instant::now();
    let Some(proc_) = MountProc3::from_u32(hdr.proc_) else { return accepted(hdr.xid, AcceptStat::ProcUnavail, out) };
    let Ok(args) = MountArgs3::decode(proc_, &mut XdrReader::new(args)) else { return accepted(hdr.xid, AcceptStat::GarbageArgs, out) };
    let mut out = accepted(hdr.xid, AcceptStat::Success, out)?;
    let ok = mount::call(state, peer, args, &mut out).await;
    state.ops.record(MOUNT_OPS + proc_ as usize, ok, started.elapsed());
    Some(out)
}

/// The handle a procedure's arguments start with (every NFSv3 procedure but NULL has one):
/// it names the export whose rules apply to the call.
fn first_handle<'a>(args: &'a Args3<'_>) -> Option<&'a NfsFh3> {
    use Args3 as A;
    Some(match args {
        A::Null => return None,
        A::Getattr(a) => &a.object,
        A::Setattr(a) => &a.object,
        A::Lookup(a) => &a.what.dir,
        A::Access(a) => &a.object,
        A::Readlink(a) => &a.symlink,
        A::Read(a) => &a.file,
        A::Write(a) => &a.file,
        A::Create(a) => &a.where_.dir,
        A::Mkdir(a) => &a.where_.dir,
        A::Symlink(a) => &a.where_.dir,
        A::Mknod(a) => &a.where_.dir,
        A::Remove(a) => &a.object.dir,
        A::Rmdir(a) => &a.object.dir,
        A::Rename(a) => &a.from.dir,
        A::Link(a) => &a.file,
        A::Readdir(a) => &a.dir,
        A::Readdirplus(a) => &a.dir,
        A::Fsstat(a) => &a.fsroot,
        A::Fsinfo(a) => &a.fsroot,
        A::Pathconf(a) => &a.object,
        A::Commit(a) => &a.file,
    })
}

/// Procedures whose retransmission must not run again (their replies go to the DRC).
fn non_idempotent(p: Proc3) -> bool {
    use Proc3 as P;
    matches!(p, P::Setattr | P::Write | P::Create | P::Mkdir | P::Symlink | P::Mknod | P::Remove | P::Rmdir | P::Rename | P::Link)
}

pub(crate) fn credential(a: &Auth) -> Credential<'_> {
    match a {
        Auth::None => Credential::None,
        Auth::Sys(s) => Credential::Sys { uid: s.uid, gid: s.gid, gids: &s.gids },
        Auth::Other(f) => Credential::Other(*f),
    }
}

/// The export a call's first handle names and who the caller is there; Err(auth_stat) when
/// the client or its credential is refused. A bad handle gets no export (the handler
/// answers NFS3ERR_BADHANDLE) and the anonymous identity.
fn caller(state: &NfsState, peer: IpAddr, hdr: &CallHeader, args: &Args3<'_>) -> Result<(Option<Arc<ExportState>>, Identity), AuthStat> {
    let export = first_handle(args).and_then(|fh| state.key.check(fh.as_bytes()).ok()).and_then(|d| state.export_by_id(d.export_id));
    let Some(e) = export else { return Ok((None, Identity { uid: 65534, gid: 65534, groups: Vec::new() })) };
    let rules = &e.export.rules;
    if !rules.allows(peer) {
        return Err(AuthStat::TooWeak);
    }
    let id = auth::identity(rules, &credential(&hdr.cred)).map_err(|_| AuthStat::TooWeak)?;
    Ok((Some(e), id))
}

/// Releases a DRC claim whose call ended without a reply (a cancelled task), so a
/// retransmission runs instead of being dropped until the entry expires.
struct Claim<'a> {
    state: &'a NfsState,
    key: Option<DrcKey>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            self.state.drc.forget(k);
        }
    }
}

async fn nfs(
    state: &Arc<NfsState>,
    peer: IpAddr,
    slots: &crate::qos::Slots,
    hdr: &CallHeader,
    raw: &[u8],
    record: &Arc<Record>,
    out: Vec<u8>,
) -> Option<Vec<u8>> {
    let started = Instant::now();
    let Some(proc_) = Proc3::from_u32(hdr.proc_) else { return accepted(hdr.xid, AcceptStat::ProcUnavail, out) };
    let Ok(args) = Args3::decode(proc_, &mut XdrReader::new(raw)) else { return accepted(hdr.xid, AcceptStat::GarbageArgs, out) };
    let (export, id) = match caller(state, peer, hdr, &args) {
        Ok(x) => x,
        Err(stat) => return denied(hdr.xid, RejectStat::AuthError(stat), out),
    };
    let key = non_idempotent(proc_).then(|| DrcKey::new(peer, hdr.xid, PROG_NFS, hdr.proc_, raw));
    if let Some(k) = key {
        match state.drc.begin(k) {
            Seen::New => {}
            Seen::InProgress => return None,
            Seen::Done(reply) => return Some(reply.as_ref().clone()),
        }
    }
    let mut claim = Claim { state, key };
    // After the DRC: a retransmission answered from the cache costs nothing. A call whose
    // connection went away while it waited does not run (the claim is released).
    if let Some(e) = &export {
        if !crate::qos::admit(slots, state, e, &args).await {
            return None;
        }
    }
    let mut out = accepted(hdr.xid, AcceptStat::Success, out)?;
    let ctx = Ctx { state: state.clone(), export, id };
    let status = run(&ctx, args, record, &mut out).await;
    state.ops.record(proc_ as usize, status == Nfsstat3::Ok, started.elapsed());
    if let Some(k) = claim.key.take() {
        state.drc.finish(k, Arc::new(out.clone()));
    }
    Some(out)
}

/// The handler of each procedure.
async fn run(ctx: &Ctx, args: Args3<'_>, record: &Arc<Record>, out: &mut Vec<u8>) -> Nfsstat3 {
    use Args3 as A;
    match args {
        A::Null => Nfsstat3::Ok,
        A::Getattr(a) => attr::getattr(ctx, a, out).await,
        A::Setattr(a) => attr::setattr(ctx, a, out).await,
        A::Lookup(a) => lookup::lookup(ctx, a, out).await,
        A::Access(a) => attr::access(ctx, a, out).await,
        A::Readlink(a) => link::readlink(ctx, a, out).await,
        A::Read(a) => read::read(ctx, a, out).await,
        A::Write(a) => write::write(ctx, a, record, out).await,
        A::Create(a) => create::create(ctx, a, out).await,
        A::Mkdir(a) => create::mkdir(ctx, a, out).await,
        A::Symlink(a) => create::symlink(ctx, a, out).await,
        A::Mknod(a) => create::mknod(ctx, a, out).await,
        A::Remove(a) => remove::remove(ctx, a, out).await,
        A::Rmdir(a) => remove::rmdir(ctx, a, out).await,
        A::Rename(a) => rename::rename(ctx, a, out).await,
        A::Link(a) => link::link(ctx, a, out).await,
        A::Readdir(a) => dir::readdir(ctx, a, out).await,
        A::Readdirplus(a) => dir::readdirplus(ctx, a, out).await,
        A::Fsstat(a) => fs::fsstat(ctx, a, out).await,
        A::Fsinfo(a) => fs::fsinfo(ctx, a, out).await,
        A::Pathconf(a) => fs::pathconf(ctx, a, out).await,
        A::Commit(a) => commit(ctx, a, out).await,
    }
}

async fn commit(ctx: &Ctx, a: nfs_wire::nfs3::CommitArgs, out: &mut Vec<u8>) -> Nfsstat3 {
    write::commit(ctx, a, out).await
}
