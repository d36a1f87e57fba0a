//! The Network Lock Manager protocol version 4 (program 100021, version 4): byte-range locks
//! and DOS share reservations for NFSv3 clients, with 64-bit offsets (RFC 1813 appendix II,
//! on top of the Open Group XNFS 3W definition of NLM versions 1 to 3).
//!
//! Each lock procedure comes three ways: synchronous (`TEST`: arguments in, results out), as
//! a one-way message (`TEST_MSG`: arguments in, no reply) and as its answer sent back as a
//! separate call (`TEST_RES`: the results are the arguments). Linux's lockd uses the
//! synchronous forms; `GRANTED` is the server's call back to a client whose blocked lock is
//! now held. So every argument and result type here decodes and encodes: a server decodes
//! calls and encodes replies, and encodes `GRANTED` calls and decodes their replies.

use crate::nfs3::types::u32_enum;
use crate::xdr::{xdr_struct, Bounded, Result, XdrReader, XdrWriter};

/// The NLM program number and the version with 64-bit offsets.
pub const NLM_PROG: u32 = 100_021;
pub const NLM4_VERS: u32 = 4;

/// Longest caller name (`string caller_name<LM_MAXSTRLEN>`).
pub const LM_MAXSTRLEN: u32 = 1024;
/// Longest host name in `nlm4_notify` (one more than [`LM_MAXSTRLEN`], as the protocol says).
pub const LM_MAXNAMELEN: u32 = 1025;
/// Longest `netobj` (cookies, file handles, owner handles).
pub const MAXNETOBJ_SZ: u32 = 1024;

/// `netobj`: opaque bytes the peer chose (a cookie, a file handle, an owner handle).
pub type Netobj = Bounded<MAXNETOBJ_SZ>;
/// A caller name (`string<LM_MAXSTRLEN>`), as bytes: the protocol does not promise UTF-8.
pub type CallerName = Bounded<LM_MAXSTRLEN>;

u32_enum! {
    /// The NLM version 4 procedures. 16 to 19 are not defined for version 4.
    Nlm4Proc {
        Null = 0,
        Test = 1,
        Lock = 2,
        Cancel = 3,
        Unlock = 4,
        Granted = 5,
        TestMsg = 6,
        LockMsg = 7,
        CancelMsg = 8,
        UnlockMsg = 9,
        GrantedMsg = 10,
        TestRes = 11,
        LockRes = 12,
        CancelRes = 13,
        UnlockRes = 14,
        GrantedRes = 15,
        Share = 20,
        Unshare = 21,
        NmLock = 22,
        FreeAll = 23,
    }
}

u32_enum! {
    /// nlm4_stats
    Nlm4Stats {
        Granted = 0,
        Denied = 1,
        DeniedNolocks = 2,
        Blocked = 3,
        DeniedGracePeriod = 4,
        Deadlck = 5,
        Rofs = 6,
        StaleFh = 7,
        Fbig = 8,
        Failed = 9,
    }
}

u32_enum! {
    /// fsh4_mode: what a share reservation denies to others.
    Fsh4Mode { Dn = 0, Dr = 1, Dw = 2, Drw = 3 }
}

u32_enum! {
    /// fsh4_access: what a share reservation's holder does.
    Fsh4Access { None = 0, R = 1, W = 2, Rw = 3 }
}

xdr_struct!(
    /// nlm4_holder: who holds the lock that denies a TEST.
    Nlm4Holder { exclusive: bool, svid: i32, oh: Netobj, l_offset: u64, l_len: u64 }
);

xdr_struct!(
    /// nlm4_lock: a range of a file and its owner. `l_len` 0 means "to the end of the file".
    Nlm4Lock { caller_name: CallerName, fh: Netobj, oh: Netobj, svid: i32, l_offset: u64, l_len: u64 }
);

xdr_struct!(
    /// nlm4_testargs; also the arguments of GRANTED and GRANTED_MSG.
    Nlm4TestArgs { cookie: Netobj, exclusive: bool, alock: Nlm4Lock }
);

xdr_struct!(
    /// nlm4_lockargs; `state` is the caller's NSM state number, `reclaim` is set during the
    /// server's grace period for locks held before its restart.
    Nlm4LockArgs { cookie: Netobj, block: bool, exclusive: bool, alock: Nlm4Lock, reclaim: bool, state: i32 }
);

xdr_struct!(
    /// nlm4_cancargs
    Nlm4CancArgs { cookie: Netobj, block: bool, exclusive: bool, alock: Nlm4Lock }
);

xdr_struct!(
    /// nlm4_unlockargs
    Nlm4UnlockArgs { cookie: Netobj, alock: Nlm4Lock }
);

xdr_struct!(
    /// nlm4_res: the result of LOCK, CANCEL, UNLOCK, GRANTED and NM_LOCK (and the arguments
    /// of their `_RES` calls).
    Nlm4Res { cookie: Netobj, stat: Nlm4Stats }
);

xdr_struct!(
    /// nlm4_share: a DOS share reservation on a whole file.
    Nlm4Share { caller_name: CallerName, fh: Netobj, oh: Netobj, mode: Fsh4Mode, access: Fsh4Access }
);

xdr_struct!(
    /// nlm4_shareargs: the arguments of SHARE and UNSHARE.
    Nlm4ShareArgs { cookie: Netobj, share: Nlm4Share, reclaim: bool }
);

xdr_struct!(
    /// nlm4_shareres
    Nlm4ShareRes { cookie: Netobj, stat: Nlm4Stats, sequence: i32 }
);

xdr_struct!(
    /// nlm4_notify: FREE_ALL's argument, a client host that restarted and its new state.
    Nlm4Notify { name: Bounded<LM_MAXNAMELEN>, state: i32 }
);

/// nlm4_testrply: TEST's outcome; only a denial says who holds the conflicting lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nlm4TestRply {
    Denied(Nlm4Holder),
    /// Any status but [`Nlm4Stats::Denied`], which always comes with its holder.
    Stat(Nlm4Stats),
}

impl Nlm4TestRply {
    pub fn status(&self) -> Nlm4Stats {
        match self {
            Nlm4TestRply::Denied(_) => Nlm4Stats::Denied,
            Nlm4TestRply::Stat(s) => *s,
        }
    }
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self> {
        Ok(match Nlm4Stats::decode(r)? {
            Nlm4Stats::Denied => Nlm4TestRply::Denied(Nlm4Holder::decode(r)?),
            s => Nlm4TestRply::Stat(s),
        })
    }
    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        self.status().encode(w);
        if let Nlm4TestRply::Denied(h) = self {
            h.encode(w);
        }
    }
}
crate::xdr::xdr_via_inherent!(Nlm4TestRply);

xdr_struct!(
    /// nlm4_testres: TEST's result and TEST_RES's argument.
    Nlm4TestRes { cookie: Netobj, stat: Nlm4TestRply }
);

/// The arguments of any NLM version 4 procedure, for a dispatcher that decodes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nlm4Args {
    Null,
    Test(Nlm4TestArgs),
    Lock(Nlm4LockArgs),
    Cancel(Nlm4CancArgs),
    Unlock(Nlm4UnlockArgs),
    Granted(Nlm4TestArgs),
    TestMsg(Nlm4TestArgs),
    LockMsg(Nlm4LockArgs),
    CancelMsg(Nlm4CancArgs),
    UnlockMsg(Nlm4UnlockArgs),
    GrantedMsg(Nlm4TestArgs),
    TestRes(Nlm4TestRes),
    LockRes(Nlm4Res),
    CancelRes(Nlm4Res),
    UnlockRes(Nlm4Res),
    GrantedRes(Nlm4Res),
    Share(Nlm4ShareArgs),
    Unshare(Nlm4ShareArgs),
    NmLock(Nlm4LockArgs),
    FreeAll(Nlm4Notify),
}

impl Nlm4Args {
    pub fn decode(proc_: Nlm4Proc, r: &mut XdrReader<'_>) -> Result<Self> {
        use Nlm4Args as A;
        Ok(match proc_ {
            Nlm4Proc::Null => A::Null,
            Nlm4Proc::Test => A::Test(Nlm4TestArgs::decode(r)?),
            Nlm4Proc::Lock => A::Lock(Nlm4LockArgs::decode(r)?),
            Nlm4Proc::Cancel => A::Cancel(Nlm4CancArgs::decode(r)?),
            Nlm4Proc::Unlock => A::Unlock(Nlm4UnlockArgs::decode(r)?),
            Nlm4Proc::Granted => A::Granted(Nlm4TestArgs::decode(r)?),
            Nlm4Proc::TestMsg => A::TestMsg(Nlm4TestArgs::decode(r)?),
            Nlm4Proc::LockMsg => A::LockMsg(Nlm4LockArgs::decode(r)?),
            Nlm4Proc::CancelMsg => A::CancelMsg(Nlm4CancArgs::decode(r)?),
            Nlm4Proc::UnlockMsg => A::UnlockMsg(Nlm4UnlockArgs::decode(r)?),
            Nlm4Proc::GrantedMsg => A::GrantedMsg(Nlm4TestArgs::decode(r)?),
            Nlm4Proc::TestRes => A::TestRes(Nlm4TestRes::decode(r)?),
            Nlm4Proc::LockRes => A::LockRes(Nlm4Res::decode(r)?),
            Nlm4Proc::CancelRes => A::CancelRes(Nlm4Res::decode(r)?),
            Nlm4Proc::UnlockRes => A::UnlockRes(Nlm4Res::decode(r)?),
            Nlm4Proc::GrantedRes => A::GrantedRes(Nlm4Res::decode(r)?),
            Nlm4Proc::Share => A::Share(Nlm4ShareArgs::decode(r)?),
            Nlm4Proc::Unshare => A::Unshare(Nlm4ShareArgs::decode(r)?),
            Nlm4Proc::NmLock => A::NmLock(Nlm4LockArgs::decode(r)?),
            Nlm4Proc::FreeAll => A::FreeAll(Nlm4Notify::decode(r)?),
        })
    }

    /// The procedure these arguments belong to.
    pub fn proc_(&self) -> Nlm4Proc {
        use Nlm4Args as A;
        match self {
            A::Null => Nlm4Proc::Null,
            A::Test(_) => Nlm4Proc::Test,
            A::Lock(_) => Nlm4Proc::Lock,
            A::Cancel(_) => Nlm4Proc::Cancel,
            A::Unlock(_) => Nlm4Proc::Unlock,
            A::Granted(_) => Nlm4Proc::Granted,
            A::TestMsg(_) => Nlm4Proc::TestMsg,
            A::LockMsg(_) => Nlm4Proc::LockMsg,
            A::CancelMsg(_) => Nlm4Proc::CancelMsg,
            A::UnlockMsg(_) => Nlm4Proc::UnlockMsg,
            A::GrantedMsg(_) => Nlm4Proc::GrantedMsg,
            A::TestRes(_) => Nlm4Proc::TestRes,
            A::LockRes(_) => Nlm4Proc::LockRes,
            A::CancelRes(_) => Nlm4Proc::CancelRes,
            A::UnlockRes(_) => Nlm4Proc::UnlockRes,
            A::GrantedRes(_) => Nlm4Proc::GrantedRes,
            A::Share(_) => Nlm4Proc::Share,
            A::Unshare(_) => Nlm4Proc::Unshare,
            A::NmLock(_) => Nlm4Proc::NmLock,
            A::FreeAll(_) => Nlm4Proc::FreeAll,
        }
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        use Nlm4Args as A;
        match self {
            A::Null => {}
            A::Test(a) | A::Granted(a) | A::TestMsg(a) | A::GrantedMsg(a) => a.encode(w),
            A::Lock(a) | A::LockMsg(a) | A::NmLock(a) => a.encode(w),
            A::Cancel(a) | A::CancelMsg(a) => a.encode(w),
            A::Unlock(a) | A::UnlockMsg(a) => a.encode(w),
            A::TestRes(a) => a.encode(w),
            A::LockRes(a) | A::CancelRes(a) | A::UnlockRes(a) | A::GrantedRes(a) => a.encode(w),
            A::Share(a) | A::Unshare(a) => a.encode(w),
            A::FreeAll(a) => a.encode(w),
        }
    }
}

#[cfg(test)]
mod tests;
