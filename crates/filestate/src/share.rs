//! Share-mode checks (MS-FSA 2.1.5.1.2): each open records its granted access and share
//! mode; a new open is refused when either side's data access is not shared by the other.

use crate::{Access, OpenId, ShareMode, StateError};

/// One open's claim on a file.
#[derive(Debug, Clone, Copy)]
struct Claim {
    open: OpenId,
    access: Access,
    share: ShareMode,
}

/// The share-mode claims of every open of one file.
#[derive(Debug, Default)]
pub struct ShareClaims {
    claims: Vec<Claim>,
}

impl ShareClaims {
    /// Whether an open with `access` and `share` may join the opens recorded
    /// (MS-FSA 2.1.5.1.2). Opens without data access (READ/WRITE/APPEND/EXECUTE/DELETE) are
    /// never checked and never checked against.
    pub fn check(&self, access: Access, share: ShareMode) -> Result<(), StateError> {
        if !access.any(Access::DATA) {
            return Ok(());
        }
        let conflict =
            self.claims.iter().filter(|c| c.access.any(Access::DATA)).any(|c| !c.share.contains(access.needs()) || !share.contains(c.access.needs()));
        if conflict {
            Err(StateError::SharingViolation)
        } else {
            Ok(())
        }
    }

    /// Checks and records an open.
    pub fn claim(&mut self, open: OpenId, access: Access, share: ShareMode) -> Result<(), StateError> {
        self.check(access, share)?;
        self.claims.push(Claim { open, access, share });
        Ok(())
    }

    /// Drops an open's claim; returns whether no open remains.
    pub fn release(&mut self, open: OpenId) -> bool {
        self.claims.retain(|c| c.open != open);
        self.claims.is_empty()
    }

    /// How many opens are recorded, leaving out those `skip` (open id, access) names.
    pub fn count_except(&self, skip: impl Fn(OpenId, Access) -> bool) -> usize {
        self.claims.iter().filter(|c| !skip(c.open, c.access)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The five access bits share modes govern, with the share bit each one needs from the
    /// other side (the Windows sharing matrix).
    const BITS: [(Access, ShareMode); 5] = [
        (Access::READ_DATA, ShareMode::READ),
        (Access::EXECUTE, ShareMode::READ),
        (Access::WRITE_DATA, ShareMode::WRITE),
        (Access::APPEND_DATA, ShareMode::WRITE),
        (Access::DELETE, ShareMode::DELETE),
    ];

    fn access_of(mask: u32) -> Access {
        BITS.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).fold(Access(0), |a, (_, (b, _))| a | *b)
    }

    /// The expected outcome written from the matrix: every bit one side asks for must be
    /// shared by the other side.
    fn expected_conflict(a1: u32, s1: u32, a2: u32, s2: u32) -> bool {
        BITS.iter()
            .enumerate()
            .any(|(i, (_, need))| (a2 & (1 << i) != 0 && a1 != 0 && s1 & need.0 == 0) || (a1 & (1 << i) != 0 && a2 != 0 && s2 & need.0 == 0))
    }

    #[test]
    fn full_sharing_matrix() {
        // Every combination of the five access bits and three share bits, for the first
        // open and the second.
        for a1 in 0..32u32 {
            for s1 in 0..8u32 {
                for a2 in 0..32u32 {
                    for s2 in 0..8u32 {
                        let mut c = ShareClaims::default();
                        c.claim(1, access_of(a1), ShareMode(s1)).unwrap();
                        let got = c.claim(2, access_of(a2), ShareMode(s2)).is_err();
                        assert_eq!(got, expected_conflict(a1, s1, a2, s2), "first {a1:05b}/{s1:03b} second {a2:05b}/{s2:03b}");
                    }
                }
            }
        }
    }

    #[test]
    fn single_rows_of_the_matrix() {
        let mut c = ShareClaims::default();
        c.claim(1, Access::READ_DATA, ShareMode::READ).unwrap();
        assert_eq!(c.claim(2, Access::WRITE_DATA, ShareMode::ALL), Err(StateError::SharingViolation));
        assert_eq!(c.claim(2, Access::READ_DATA, ShareMode::WRITE), Err(StateError::SharingViolation), "the first open reads");
        c.claim(3, Access::READ_DATA, ShareMode::READ).unwrap();
        let mut d = ShareClaims::default();
        d.claim(1, Access::DELETE, ShareMode::ALL).unwrap();
        assert_eq!(d.claim(2, Access::READ_DATA, ShareMode::READ | ShareMode::WRITE), Err(StateError::SharingViolation));
        d.claim(3, Access::READ_DATA, ShareMode::ALL).unwrap();
    }

    #[test]
    fn stat_opens_never_conflict() {
        let stat = Access::READ_ATTRIBUTES | Access::WRITE_ATTRIBUTES | Access::SYNCHRONIZE | Access::READ_CONTROL;
        let mut c = ShareClaims::default();
        c.claim(1, Access::DATA, ShareMode(0)).unwrap();
        c.claim(2, stat, ShareMode(0)).unwrap();
        let mut d = ShareClaims::default();
        d.claim(1, stat, ShareMode(0)).unwrap();
        d.claim(2, Access::DATA, ShareMode(0)).unwrap();
    }

    #[test]
    fn release_and_count() {
        let mut c = ShareClaims::default();
        c.claim(1, Access::READ_DATA, ShareMode(0)).unwrap();
        c.claim(2, Access::READ_ATTRIBUTES, ShareMode(0)).unwrap();
        assert_eq!(c.count_except(|o, _| o == 1), 1);
        assert_eq!(c.count_except(|_, a| a == Access::READ_ATTRIBUTES), 1);
        assert!(c.check(Access::READ_DATA, ShareMode::ALL).is_err());
        assert!(!c.release(1));
        c.check(Access::READ_DATA, ShareMode::ALL).unwrap();
        assert!(c.release(2));
    }
}
