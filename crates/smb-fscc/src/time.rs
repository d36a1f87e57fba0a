//! FILETIME conversion (MS-DTYP 2.3.3, MS-FSCC 2.1.1).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds between 1601-01-01 and 1970-01-01 (MS-DTYP 2.3.3 FILETIME epoch).
const EPOCH_DIFF_SECS: u64 = 11_644_473_600;
/// FILETIME ticks are 100 ns.
const TICKS_PER_SEC: u64 = 10_000_000;

/// MS-FSCC 2.4.7: SET_INFO time value -1, "stop updating this time for the
/// handle".
pub const FILETIME_STOP_UPDATES: u64 = u64::MAX;
/// MS-FSCC 2.4.7: SET_INFO time value -2, "resume updating this time".
pub const FILETIME_RESUME_UPDATES: u64 = u64::MAX - 1;

/// MS-DTYP 2.3.3: SystemTime to FILETIME (100 ns ticks since 1601-01-01 UTC).
/// Times before 1601 give 0; times beyond the signed 64-bit range saturate
/// at i64::MAX so they never collide with the -1/-2 sentinels.
pub fn system_time_to_filetime(t: SystemTime) -> u64 {
    let epoch_ticks = EPOCH_DIFF_SECS * TICKS_PER_SEC;
    let max = i64::MAX as u64;
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => {
            let ticks = d.as_secs() as u128 * TICKS_PER_SEC as u128 + u128::from(d.subsec_nanos() / 100) + epoch_ticks as u128;
            u64::try_from(ticks).map_or(max, |v| v.min(max))
        }
        Err(e) => {
            // Before 1970: round toward 1601 is irrelevant at 100 ns, but
            // sub-tick remainders must not push us past the epoch.
            let d = e.duration();
            let back = d.as_secs() as u128 * TICKS_PER_SEC as u128 + u128::from(d.subsec_nanos().div_ceil(100));
            (epoch_ticks as u128).saturating_sub(back) as u64
        }
    }
}

/// MS-DTYP 2.3.3: FILETIME to SystemTime. Values with the sign bit set
/// (including the -1/-2 SET_INFO sentinels) and values the platform cannot
/// represent give None. 0 converts to 1601-01-01; callers treating 0 as
/// "unset" must check before converting.
pub fn filetime_to_system_time(ft: u64) -> Option<SystemTime> {
    if ft > i64::MAX as u64 {
        return None;
    }
    let d = Duration::new(ft / TICKS_PER_SEC, ((ft % TICKS_PER_SEC) * 100) as u32);
    let epoch = Duration::from_secs(EPOCH_DIFF_SECS);
    if d >= epoch {
        UNIX_EPOCH.checked_add(d - epoch)
    } else {
        UNIX_EPOCH.checked_sub(epoch - d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_epoch() {
        assert_eq!(system_time_to_filetime(UNIX_EPOCH), 116_444_736_000_000_000);
        assert_eq!(filetime_to_system_time(116_444_736_000_000_000), Some(UNIX_EPOCH));
    }

    #[test]
    fn round_trip() {
        for ft in [1u64, 116_444_736_000_000_000, 133_000_000_123_456_789, 10_000_000] {
            let t = filetime_to_system_time(ft).unwrap();
            assert_eq!(system_time_to_filetime(t), ft);
        }
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_700);
        assert_eq!(filetime_to_system_time(system_time_to_filetime(t)), Some(t));
        // Sub-100ns precision is truncated.
        let t = UNIX_EPOCH + Duration::new(5, 199);
        assert_eq!(system_time_to_filetime(t), 116_444_736_050_000_001);
    }

    #[test]
    fn sentinels_and_limits() {
        assert_eq!(filetime_to_system_time(FILETIME_STOP_UPDATES), None);
        assert_eq!(filetime_to_system_time(FILETIME_RESUME_UPDATES), None);
        let before_1601 = UNIX_EPOCH - Duration::from_secs(EPOCH_DIFF_SECS + 10);
        assert_eq!(system_time_to_filetime(before_1601), 0);
        let pre_1970 = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(system_time_to_filetime(pre_1970), 116_444_735_990_000_000);
    }
}
