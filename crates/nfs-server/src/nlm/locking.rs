//! The NLM v4 procedures: TEST, LOCK (non-blocking and blocking, with the GRANTED_MSG
//! callback), CANCEL, UNLOCK, their `_MSG` forms answered by `_RES` calls, GRANTED_RES,
//! SHARE/UNSHARE (DOS share reservations, which SMB's share modes meet), NM_LOCK and
//! FREE_ALL.

use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use braid_filestate::{is_posix, Access, ByteLock, FileKey, OpenId, PosixRefusal, ShareMode, StateError, POSIX_OWNER};
use nfs_wire::nfs3::NfsFh3;
use nfs_wire::nlm4::*;
use nfs_wire::rpc::{AcceptStat, Auth, CallHeader};
use nfs_wire::{XdrReader, XdrWriter};

use super::book::{BlockKey, OwnerKey, SHARE_CLAIM};
use super::callback::Callback;
use super::{accepted, grace, record::HostRecord};
use crate::request::Ctx;
use crate::state::NfsState;

/// How long a blocked request waits after the client last asked (Linux asks again every
/// 30 s while it waits, and cancels when the process gives up).
const BLOCK_WAIT: Duration = Duration::from_secs(120);
/// How often a waiting request looks again without a wake-up (a file's node can be
/// replaced while nothing holds it).
const RECHECK: Duration = Duration::from_secs(5);

/// One call's caller.
struct Caller<'a> {
    state: &'a Arc<NfsState>,
    peer: IpAddr,
    cred: &'a Auth,
}

pub async fn call(state: &Arc<NfsState>, peer: IpAddr, hdr: &CallHeader, args: &[u8], out: Vec<u8>) -> Option<Vec<u8>> {
    let started = std::time::Instant::now();
    let Some(proc_) = Nlm4Proc::from_u32(hdr.proc_) else { return accepted(hdr.xid, AcceptStat::ProcUnavail, out) };
    let Ok(args) = Nlm4Args::decode(proc_, &mut XdrReader::new(args)) else {
        tracing::debug!(%peer, ?proc_, "undecodable NLM arguments");
        return accepted(hdr.xid, AcceptStat::GarbageArgs, out);
    };
    let mut out = accepted(hdr.xid, AcceptStat::Success, out)?;
    let c = Caller { state, peer, cred: &hdr.cred };
    let ok = run(&c, args, &mut out).await;
    state.ops.record(crate::state::nlm_op(proc_), ok, started.elapsed());
    Some(out)
}

/// Runs one procedure, appending its result; whether it succeeded (for the metrics).
async fn run(c: &Caller<'_>, args: Nlm4Args, out: &mut Vec<u8>) -> bool {
    let mut w = XdrWriter::new(out);
    match args {
        Nlm4Args::Null => true,
        Nlm4Args::Test(a) => {
            let stat = test(c, &a).await;
            let ok = stat.status() != Nlm4Stats::Failed;
            Nlm4TestRes { cookie: a.cookie, stat }.encode(&mut w);
            ok
        }
        Nlm4Args::Lock(a) | Nlm4Args::NmLock(a) => res(&mut w, a.cookie.clone(), lock(c, &a).await),
        Nlm4Args::Cancel(a) => res(&mut w, a.cookie.clone(), cancel(c, &a).await),
        Nlm4Args::Unlock(a) => res(&mut w, a.cookie.clone(), unlock(c, &a.alock).await),
        // Braid is no NLM client: nobody was waiting for this grant.
        Nlm4Args::Granted(a) => res(&mut w, a.cookie, Nlm4Stats::Denied),
        Nlm4Args::Share(a) => share_res(&mut w, a.cookie.clone(), share(c, &a).await),
        Nlm4Args::Unshare(a) => share_res(&mut w, a.cookie.clone(), unshare(c, &a).await),
        Nlm4Args::FreeAll(a) => {
            super::release_hosts(c.state, Some(a.name.as_bytes()), None);
            true
        }
        Nlm4Args::GrantedRes(r) => {
            granted_res(c.state, &r);
            true
        }
        // Answers to calls Braid never makes.
        Nlm4Args::TestRes(_) | Nlm4Args::LockRes(_) | Nlm4Args::CancelRes(_) | Nlm4Args::UnlockRes(_) | Nlm4Args::GrantedMsg(_) => true,
        msg => {
            message(c, msg);
            true
        }
    }
}

fn res(w: &mut XdrWriter<'_>, cookie: Netobj, stat: Nlm4Stats) -> bool {
    Nlm4Res { cookie, stat }.encode(w);
    stat != Nlm4Stats::Failed
}

fn share_res(w: &mut XdrWriter<'_>, cookie: Netobj, stat: Nlm4Stats) -> bool {
    Nlm4ShareRes { cookie, stat, sequence: 0 }.encode(w);
    stat != Nlm4Stats::Failed
}

/// A `_MSG` call: its reply is empty, and the result goes back as a `_RES` call to the
/// caller's lock manager, from a task of its own.
fn message(c: &Caller<'_>, msg: Nlm4Args) {
    let (state, peer, cred) = (c.state.clone(), c.peer, c.cred.clone());
    tokio::spawn(async move {
        let c = Caller { state: &state, peer, cred: &cred };
        let mut args = Vec::new();
        let mut w = XdrWriter::new(&mut args);
        let proc_ = match msg {
            Nlm4Args::TestMsg(a) => {
                Nlm4TestRes { stat: test(&c, &a).await, cookie: a.cookie }.encode(&mut w);
                Nlm4Proc::TestRes
            }
            Nlm4Args::LockMsg(a) => {
                Nlm4Res { stat: lock(&c, &a).await, cookie: a.cookie }.encode(&mut w);
                Nlm4Proc::LockRes
            }
            Nlm4Args::CancelMsg(a) => {
                Nlm4Res { stat: cancel(&c, &a).await, cookie: a.cookie }.encode(&mut w);
                Nlm4Proc::CancelRes
            }
            Nlm4Args::UnlockMsg(a) => {
                Nlm4Res { stat: unlock(&c, &a.alock).await, cookie: a.cookie }.encode(&mut w);
                Nlm4Proc::UnlockRes
            }
            _ => return,
        };
        let back = Callback { prog: NLM_PROG, vers: NLM4_VERS, proc_: proc_ as u32, args };
        if let Err(e) = super::call_back(&state, peer, &back).await {
            tracing::info!(%peer, error = %e, ?proc_, "cannot send an NLM result back");
        }
    });
}

/// The file an NLM file handle (an NFS handle of this server) names, for this caller.
async fn file(c: &Caller<'_>, fh: &Netobj) -> Result<FileKey, Nlm4Stats> {
    let fh = NfsFh3::new(fh.as_bytes()).ok_or(Nlm4Stats::StaleFh)?;
    let d = c.state.key.check(fh.as_bytes()).map_err(|_| Nlm4Stats::StaleFh)?;
    let export = c.state.export_by_id(d.export_id).ok_or(Nlm4Stats::StaleFh)?;
    let rules = &export.export.rules;
    if !rules.allows(c.peer) {
        return Err(Nlm4Stats::Failed);
    }
    let id = crate::auth::identity(rules, &crate::dispatch::credential(c.cred)).map_err(|_| Nlm4Stats::Failed)?;
    let share = export.export.share;
    let ctx = Ctx { state: c.state.clone(), export: Some(export), id };
    let (_, attrs) = ctx.resolve(&fh).await.map_err(|_| Nlm4Stats::StaleFh)?;
    Ok((share, attrs.file_id))
}

fn owner_key(l: &Nlm4Lock) -> OwnerKey {
    OwnerKey { host: l.caller_name.as_bytes().to_vec(), oh: l.oh.as_bytes().to_vec(), svid: l.svid }
}

/// The byte range of an NLM lock: `len` 0 (or one running past the end of the offset
/// space) covers everything from `offset` on.
pub fn range(offset: u64, len: u64) -> (u64, u64) {
    let to_end = (u64::MAX - offset).max(1);
    (offset, if len == 0 || len > to_end { to_end } else { len })
}

/// The length NLM reports for a lock of `range`: 0 when it runs to the end.
fn reported_len(offset: u64, length: u64) -> u64 {
    if length == (u64::MAX - offset).max(1) {
        0
    } else {
        length
    }
}

async fn test(c: &Caller<'_>, a: &Nlm4TestArgs) -> Nlm4TestRply {
    if let Err(s) = grace(c.state, false) {
        return Nlm4TestRply::Stat(s);
    }
    let key = match file(c, &a.alock.fh).await {
        Ok(k) => k,
        Err(s) => return Nlm4TestRply::Stat(s),
    };
    // An owner not yet known holds nothing: id 0 with the POSIX bit is never given out.
    let owner = c.state.nlm.book().find(&owner_key(&a.alock)).unwrap_or(POSIX_OWNER);
    let (offset, length) = range(a.alock.l_offset, a.alock.l_len);
    let probe = ByteLock { open: owner, offset, length, exclusive: a.exclusive };
    match c.state.files.existing_core(key).and_then(|core| core.conflict(&probe)) {
        None => Nlm4TestRply::Stat(Nlm4Stats::Granted),
        Some(h) => Nlm4TestRply::Denied(holder(c.state, h)),
    }
}

/// TEST's description of the lock `h`: an NLM owner's svid and owner handle; an SMB
/// holder has neither.
fn holder(state: &NfsState, h: ByteLock) -> Nlm4Holder {
    let who = is_posix(h.open).then(|| state.nlm.book().who(h.open).cloned()).flatten();
    let (svid, oh) = who.map_or((0, Vec::new()), |k| (k.svid, k.oh));
    Nlm4Holder { exclusive: h.exclusive, svid, oh: oh.into(), l_offset: h.offset, l_len: reported_len(h.offset, h.length) }
}

async fn lock(c: &Caller<'_>, a: &Nlm4LockArgs) -> Nlm4Stats {
    if let Err(s) = grace(c.state, a.reclaim) {
        return s;
    }
    let key = match file(c, &a.alock.fh).await {
        Ok(k) => k,
        Err(s) => return s,
    };
    let okey = owner_key(&a.alock);
    let Some(owner) = c.state.nlm.book().owner(&okey, c.peer) else { return Nlm4Stats::DeniedNolocks };
    let (offset, length) = range(a.alock.l_offset, a.alock.l_len);
    let l = ByteLock { open: owner, offset, length, exclusive: a.exclusive };
    match c.state.files.core(key).lock_posix(l) {
        Ok(()) => {
            took(c.state, owner, key, &okey.host, c.peer);
            Nlm4Stats::Granted
        }
        Err(PosixRefusal::Held(_)) if a.block => wait(c, key, l, a),
        Err(refusal) => {
            c.state.files.forget_if_unused(key);
            c.state.nlm.book().let_go(owner, key, false, false);
            match refusal {
                PosixRefusal::Held(_) => Nlm4Stats::Denied,
                PosixRefusal::Invalid(StateError::TooManyLocks) => Nlm4Stats::DeniedNolocks,
                PosixRefusal::Invalid(_) => Nlm4Stats::Failed,
            }
        }
    }
}

/// Records a granted lock: in the book, and (for a restart) in the log.
fn took(state: &NfsState, owner: OpenId, key: FileKey, host: &[u8], addr: IpAddr) {
    state.nlm.book().took(owner, key);
    if let Some(r) = state.nlm.record() {
        r.host(&HostRecord { name: host.to_vec(), addr });
        r.file(key);
    }
}

/// A blocked request: answered BLOCKED now, granted later by a task that waits for the
/// file's locks to change and then calls the client back (GRANTED_MSG). The client asking
/// again for the same lock while it waits finds it still waiting.
fn wait(c: &Caller<'_>, key: FileKey, l: ByteLock, a: &Nlm4LockArgs) -> Nlm4Stats {
    let b: BlockKey = (l.open, key, l.offset, l.length, l.exclusive);
    let until = Instant::now() + BLOCK_WAIT;
    let mut book = c.state.nlm.book();
    if book.still_blocked(&b, until) {
        return Nlm4Stats::Blocked;
    }
    // Spawned with the book held: the task records its grant in the book, so it cannot
    // do so before the book knows it waits.
    let grant = Grant { key, lock: l, alock: a.alock.clone(), exclusive: a.exclusive, peer: c.peer };
    let task = tokio::spawn(wait_for(Arc::downgrade(c.state), b, grant));
    if !book.block(b, a.alock.caller_name.as_bytes(), task.abort_handle(), until) {
        task.abort();
        return Nlm4Stats::DeniedNolocks;
    }
    Nlm4Stats::Blocked
}

/// What a blocked request becomes once granted.
struct Grant {
    key: FileKey,
    lock: ByteLock,
    alock: Nlm4Lock,
    exclusive: bool,
    peer: IpAddr,
}

async fn wait_for(state: Weak<NfsState>, b: BlockKey, g: Grant) {
    loop {
        let Some(st) = state.upgrade() else { return };
        let core = st.files.core(g.key);
        // Subscribe before trying, so an unlock between the two is not missed.
        let woken = core.unlocked.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        match core.lock_posix(g.lock) {
            Ok(()) => break,
            Err(PosixRefusal::Held(_)) => {}
            Err(PosixRefusal::Invalid(_)) => return give_up(&st, &b),
        }
        let Some(until) = st.nlm.book().blocked_until(&b) else { return };
        if Instant::now() >= until {
            return give_up(&st, &b);
        }
        drop(st);
        let next = tokio::time::Instant::from_std(until.min(Instant::now() + RECHECK));
        tokio::select! {
            _ = &mut woken => {}
            _ = tokio::time::sleep_until(next) => {}
        }
    }
    let Some(st) = state.upgrade() else { return };
    st.nlm.book().unblock(&b);
    took(&st, g.lock.open, g.key, g.alock.caller_name.as_bytes(), g.peer);
    let cookie = st.nlm.book().granting((g.lock.open, g.key, g.lock.offset, g.lock.length));
    let mut args = Vec::new();
    Nlm4TestArgs { cookie: cookie.to_be_bytes().to_vec().into(), exclusive: g.exclusive, alock: g.alock }.encode(&mut XdrWriter::new(&mut args));
    let call = Callback { prog: NLM_PROG, vers: NLM4_VERS, proc_: Nlm4Proc::GrantedMsg as u32, args };
    // Not delivered: the client asks again (every 30 s on Linux) and finds the lock its own.
    if let Err(e) = super::call_back(&st, g.peer, &call).await {
        tracing::info!(peer = %g.peer, error = %e, "cannot deliver an NLM grant; the client will ask again");
    }
}

/// A blocked request that waited long enough without being asked for again.
fn give_up(state: &NfsState, b: &BlockKey) {
    let mut book = state.nlm.book();
    book.unblock(b);
    book.let_go(b.0, b.1, false, false);
    drop(book);
    state.files.forget_if_unused(b.1);
}

/// A client's answer to GRANTED_MSG: one that refuses the grant (its process gave up)
/// releases the lock.
fn granted_res(state: &NfsState, r: &Nlm4Res) {
    let Ok(cookie) = <[u8; 8]>::try_from(r.cookie.as_bytes()) else { return };
    let Some((owner, key, offset, length)) = state.nlm.book().granted(u64::from_be_bytes(cookie)) else { return };
    if r.stat != Nlm4Stats::Granted {
        release(state, owner, key, offset, length);
    }
}

async fn cancel(c: &Caller<'_>, a: &Nlm4CancArgs) -> Nlm4Stats {
    let key = match file(c, &a.alock.fh).await {
        Ok(k) => k,
        Err(s) => return s,
    };
    let mut book = c.state.nlm.book();
    let Some(owner) = book.find(&owner_key(&a.alock)) else { return Nlm4Stats::Denied };
    let (offset, length) = range(a.alock.l_offset, a.alock.l_len);
    let Some(task) = book.unblock(&(owner, key, offset, length, a.exclusive)) else { return Nlm4Stats::Denied };
    task.abort();
    book.let_go(owner, key, false, false);
    drop(book);
    c.state.files.forget_if_unused(key);
    Nlm4Stats::Granted
}

async fn unlock(c: &Caller<'_>, l: &Nlm4Lock) -> Nlm4Stats {
    let key = match file(c, &l.fh).await {
        Ok(k) => k,
        Err(s) => return s,
    };
    // Nothing held by an unknown owner: unlocking it is no error (as with fcntl).
    let Some(owner) = c.state.nlm.book().find(&owner_key(l)) else { return Nlm4Stats::Granted };
    let (offset, length) = range(l.l_offset, l.l_len);
    release(c.state, owner, key, offset, length);
    Nlm4Stats::Granted
}

/// Removes `owner`'s locks in the range, and forgets what no longer holds anything.
fn release(state: &NfsState, owner: OpenId, key: FileKey, offset: u64, length: u64) {
    let still = state.files.existing_core(key).is_some_and(|core| {
        core.unlock_posix(owner, offset, length);
        core.holds(owner)
    });
    state.files.forget_if_unused(key);
    state.nlm.book().let_go(owner, key, !still, false);
}

/// A share reservation: what its holder does (`access`) and denies others (`mode`), as an
/// open's access and share mode, so SMB opens meet it.
fn reservation(s: &Nlm4Share) -> (Access, ShareMode) {
    let access = match s.access {
        Fsh4Access::None => Access(0),
        Fsh4Access::R => Access::READ_DATA,
        Fsh4Access::W => Access::WRITE_DATA,
        Fsh4Access::Rw => Access(Access::READ_DATA.0 | Access::WRITE_DATA.0),
    };
    let allowed = match s.mode {
        Fsh4Mode::Dn => ShareMode::ALL,
        Fsh4Mode::Dr => ShareMode(ShareMode::WRITE.0 | ShareMode::DELETE.0),
        Fsh4Mode::Dw => ShareMode(ShareMode::READ.0 | ShareMode::DELETE.0),
        Fsh4Mode::Drw => ShareMode::DELETE,
    };
    (access, allowed)
}

fn share_owner(s: &Nlm4Share) -> OwnerKey {
    OwnerKey { host: s.caller_name.as_bytes().to_vec(), oh: s.oh.as_bytes().to_vec(), svid: 0 }
}

async fn share(c: &Caller<'_>, a: &Nlm4ShareArgs) -> Nlm4Stats {
    if let Err(s) = grace(c.state, a.reclaim) {
        return s;
    }
    let key = match file(c, &a.share.fh).await {
        Ok(k) => k,
        Err(s) => return s,
    };
    let Some(owner) = c.state.nlm.book().owner(&share_owner(&a.share), c.peer) else { return Nlm4Stats::DeniedNolocks };
    let (access, allowed) = reservation(&a.share);
    let core = c.state.files.core(key);
    // A second SHARE of the same owner replaces its reservation.
    core.release(owner | SHARE_CLAIM);
    match core.claim(owner | SHARE_CLAIM, access, allowed) {
        Ok(()) => {
            c.state.nlm.book().shared(owner, key);
            Nlm4Stats::Granted
        }
        Err(_) => {
            c.state.nlm.book().let_go(owner, key, false, true);
            c.state.files.forget_if_unused(key);
            Nlm4Stats::Denied
        }
    }
}

async fn unshare(c: &Caller<'_>, a: &Nlm4ShareArgs) -> Nlm4Stats {
    let key = match file(c, &a.share.fh).await {
        Ok(k) => k,
        Err(s) => return s,
    };
    let Some(owner) = c.state.nlm.book().find(&share_owner(&a.share)) else { return Nlm4Stats::Granted };
    if let Some(core) = c.state.files.existing_core(key) {
        core.release(owner | SHARE_CLAIM);
    }
    c.state.files.forget_if_unused(key);
    c.state.nlm.book().let_go(owner, key, false, true);
    Nlm4Stats::Granted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_to_the_end() {
        assert_eq!(range(10, 5), (10, 5));
        assert_eq!(range(10, 0), (10, u64::MAX - 10));
        assert_eq!(range(0, 0), (0, u64::MAX));
        assert_eq!(range(u64::MAX, 0), (u64::MAX, 1));
        assert_eq!(range(10, u64::MAX), (10, u64::MAX - 10), "past the end: to the end");
        assert_eq!(reported_len(10, u64::MAX - 10), 0);
        assert_eq!(reported_len(10, 5), 5);
    }
}
