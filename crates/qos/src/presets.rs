//! Limits computed from a provisioned size, by the published formulas.
//!
//! Source: Microsoft Learn, "Understand Azure Files billing models" (azure-docs,
//! `articles/storage/files/understanding-billing.md`), sections "Provisioned v1 provisioning
//! detail" / "Provisioned v1 credit-based bursting" and "Provisioned v2 provisioning detail" /
//! "Provisioned v2 bursting"; Azure NetApp Files "Service levels" for the ANF throughput per
//! TiB of quota.
//!
//! Units: GiB = 2^30 bytes, TiB = 2^40, MiB = 2^20. The size is rounded UP to whole GiB
//! (Azure provisions in whole GiB), and the formulas take that GiB count. The sizes are not
//! clamped to the models' minimum or maximum share sizes; the IOPS and throughput formulas
//! carry their own minimums and maximums. Throughputs are returned in bytes per second.

use crate::Limits;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// Seconds of burst the credit bucket holds at the burst limit above baseline (Azure: one
/// hour, for v1 and v2 alike).
const BURST_BUCKET_SECONDS: u64 = 3600;

/// A provisioning model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Azure Files premium, provisioned v1.
    AzureV1,
    /// Azure Files provisioned v2, SSD.
    AzureV2Ssd,
    /// Azure Files provisioned v2, HDD.
    AzureV2Hdd,
    /// Azure NetApp Files Standard (16 MiB/s per TiB).
    AnfStandard,
    /// Azure NetApp Files Premium (64 MiB/s per TiB).
    AnfPremium,
    /// Azure NetApp Files Ultra (128 MiB/s per TiB).
    AnfUltra,
}

/// The limits of a share of `size` bytes under `model`.
pub fn provisioned(model: Model, size: u64) -> Limits {
    let gib = size.div_ceil(GIB);
    match model {
        Model::AzureV1 => azure_v1(gib),
        Model::AzureV2Ssd => azure_v2(gib, &V2_SSD),
        Model::AzureV2Hdd => azure_v2(gib, &V2_HDD),
        Model::AnfStandard => anf(gib, 16),
        Model::AnfPremium => anf(gib, 64),
        Model::AnfUltra => anf(gib, 128),
    }
}

/// `ceil(num/den × gib)` for the formulas' decimal factors, exactly (no float).
fn ceil_frac(gib: u64, num: u64, den: u64) -> u64 {
    (gib as u128 * num as u128).div_ceil(den as u128).try_into().unwrap_or(u64::MAX)
}

/// Azure Files provisioned v1 (SSD, "premium"):
/// - baseline IOPS = `MIN(3000 + 1 × GiB, 102400)`
/// - burst IOPS = `MIN(MAX(3 × GiB, 10000), 102400)`
/// - burst credits = `(burst − baseline) × 3600`
/// - throughput MiB/s = `100 + CEILING(0.04 × GiB) + CEILING(0.06 × GiB)`
///
/// The throughput is one limit on reads plus writes, as the formula is published today; its
/// two terms are the former separate ingress (40 + 0.04 × GiB) and egress (60 + 0.06 × GiB)
/// limits, which Azure no longer enforces apart, so ingress and egress are left unset.
fn azure_v1(gib: u64) -> Limits {
    let iops = 3000u64.saturating_add(gib).min(102_400);
    let burst = gib.saturating_mul(3).clamp(10_000, 102_400);
    let mib = 100 + ceil_frac(gib, 4, 100) + ceil_frac(gib, 6, 100);
    Limits {
        iops: Some(iops),
        burst_iops: Some(burst),
        burst_credits: Some((burst - iops) * BURST_BUCKET_SECONDS),
        throughput: Some(mib.saturating_mul(MIB)),
        ..Limits::default()
    }
}

/// The constants of a provisioned v2 media tier.
struct V2 {
    iops_base: u64,
    /// IOPS per GiB, as num/100.
    iops_per_gib: u64,
    iops_min: u64,
    iops_max: u64,
    mib_base: u64,
    /// MiB/s per GiB, as num/100.
    mib_per_gib: u64,
    mib_min: u64,
    mib_max: u64,
    burst_min: u64,
}

/// SSD: IOPS `MIN(MAX(3000 + CEILING(1 × GiB), 3000), 102400)`, throughput
/// `MIN(MAX(100 + CEILING(0.1 × GiB), 100), 10340)` MiB/s, burst
/// `MIN(MAX(3 × IOPS, 10000), 102400)`.
const V2_SSD: V2 = V2 {
    iops_base: 3000,
    iops_per_gib: 100,
    iops_min: 3000,
    iops_max: 102_400,
    mib_base: 100,
    mib_per_gib: 10,
    mib_min: 100,
    mib_max: 10_340,
    burst_min: 10_000,
};

/// HDD: IOPS `MIN(MAX(1000 + CEILING(0.2 × GiB), 500), 50000)`, throughput
/// `MIN(MAX(60 + CEILING(0.02 × GiB), 60), 5120)` MiB/s, burst `MIN(MAX(3 × IOPS, 5000), 50000)`.
const V2_HDD: V2 = V2 {
    iops_base: 1000,
    iops_per_gib: 20,
    iops_min: 500,
    iops_max: 50_000,
    mib_base: 60,
    mib_per_gib: 2,
    mib_min: 60,
    mib_max: 5120,
    burst_min: 5000,
};

/// Azure Files provisioned v2: the recommended (default) IOPS and throughput for the
/// provisioned storage, and the burst limit and credits
/// (`(burst − provisioned IOPS) × 3600`) for those IOPS.
fn azure_v2(gib: u64, t: &V2) -> Limits {
    let iops = t.iops_base.saturating_add(ceil_frac(gib, t.iops_per_gib, 100)).max(t.iops_min).min(t.iops_max);
    let mib = t.mib_base.saturating_add(ceil_frac(gib, t.mib_per_gib, 100)).max(t.mib_min).min(t.mib_max);
    let (burst, credits) = v2_burst(iops, t);
    Limits { iops: Some(iops), burst_iops: Some(burst), burst_credits: Some(credits), throughput: Some(mib * MIB), ..Limits::default() }
}

/// Provisioned v2 burst IOPS limit and burst credits for `iops` provisioned IOPS.
fn v2_burst(iops: u64, t: &V2) -> (u64, u64) {
    let burst = iops.saturating_mul(3).max(t.burst_min).min(t.iops_max);
    (burst, burst.saturating_sub(iops) * BURST_BUCKET_SECONDS)
}

/// Azure NetApp Files: `mib_per_tib` MiB/s per TiB of quota (Standard 16, Premium 64, Ultra
/// 128), prorated to the GiB; a throughput limit only (ANF has no IOPS limit).
fn anf(gib: u64, mib_per_tib: u64) -> Limits {
    // mib_per_tib × MiB × gib / 1024 bytes per second = mib_per_tib × 1024 × gib.
    Limits { throughput: Some(gib.saturating_mul(mib_per_tib * 1024)), ..Limits::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIB: u64 = 1 << 40;

    fn v1(gib: u64) -> (u64, u64, u64, u64) {
        let l = provisioned(Model::AzureV1, gib * GIB);
        (l.iops.unwrap(), l.burst_iops.unwrap(), l.burst_credits.unwrap(), l.throughput.unwrap() / MIB)
    }

    #[test]
    fn azure_v1_published_table() {
        // The published v1 example table. Its 33,792 and 51,200 GiB rows give credits
        // (227,548,800 and 164,880,000) computed with a burst cap of 100,000, not the 102,400
        // of the formula beside them (and 33,792 GiB reads "up to 102,400" where 3 × 33,792 =
        // 101,376): the formulas win, those two rows are the formulas' values.
        let table = [
            (100, 3100, 10_000, 24_840_000, 110),
            (500, 3500, 10_000, 23_400_000, 150),
            (1024, 4024, 10_000, 21_513_600, 203),
            (5120, 8120, 15_360, 26_064_000, 613),
            (10_240, 13_240, 30_720, 62_928_000, 1125),
            (33_792, 36_792, 101_376, 232_502_400, 3480),
            (51_200, 54_200, 102_400, 173_520_000, 5220),
            (102_400, 102_400, 102_400, 0, 10_340),
        ];
        for (gib, base, burst, credits, mib) in table {
            assert_eq!(v1(gib), (base, burst, credits, mib), "{gib} GiB");
        }
        let l = provisioned(Model::AzureV1, TIB);
        assert_eq!((l.ingress, l.egress, l.max_file_iops), (None, None, None));
    }

    #[test]
    fn sizes_round_up_to_whole_gib() {
        assert_eq!(v1(1024), {
            let l = provisioned(Model::AzureV1, 1023 * GIB + 1);
            (l.iops.unwrap(), l.burst_iops.unwrap(), l.burst_credits.unwrap(), l.throughput.unwrap() / MIB)
        });
        assert_eq!(provisioned(Model::AzureV1, 1).iops, Some(3001));
        assert_eq!(provisioned(Model::AnfUltra, 1).throughput, Some(128 * 1024));
    }

    fn v2(model: Model, gib: u64) -> (u64, u64, u64, u64) {
        let l = provisioned(model, gib * GIB);
        (l.iops.unwrap(), l.throughput.unwrap() / MIB, l.burst_iops.unwrap(), l.burst_credits.unwrap())
    }

    #[test]
    fn azure_v2_ssd() {
        // (GiB, IOPS, MiB/s, burst IOPS, credits), computed from the published formulas.
        let table = [
            (32, 3032, 104, 10_000, 25_084_800),
            (100, 3100, 110, 10_000, 24_840_000),
            (1024, 4024, 203, 12_072, 28_972_800),
            (5000, 8000, 600, 24_000, 57_600_000),
            (10_240, 13_240, 1124, 39_720, 95_328_000),
            (50_000, 53_000, 5100, 102_400, 177_840_000),
            (99_400, 102_400, 10_040, 102_400, 0),
            (262_144, 102_400, 10_340, 102_400, 0),
        ];
        for (gib, iops, mib, burst, credits) in table {
            assert_eq!(v2(Model::AzureV2Ssd, gib), (iops, mib, burst, credits), "{gib} GiB");
        }
        // 0.1 × GiB rounds up: 1001 GiB → 100 + 101.
        assert_eq!(v2(Model::AzureV2Ssd, 1001).1, 201);
    }

    #[test]
    fn azure_v2_hdd() {
        let table = [
            (32, 1007, 61, 5000, 14_374_800),
            (100, 1020, 62, 5000, 14_328_000),
            (1024, 1205, 81, 5000, 13_662_000),
            (10_240, 3048, 265, 9144, 21_945_600),
            (100_000, 21_000, 2060, 50_000, 104_400_000),
            (262_144, 50_000, 5120, 50_000, 0),
        ];
        for (gib, iops, mib, burst, credits) in table {
            assert_eq!(v2(Model::AzureV2Hdd, gib), (iops, mib, burst, credits), "{gib} GiB");
        }
    }

    #[test]
    fn azure_v2_published_burst_examples() {
        // The published table: provisioned IOPS → burst limit and credits.
        for (iops, burst, credits) in [
            (3000, 10_000, 25_200_000),
            (5000, 15_000, 36_000_000),
            (10_000, 30_000, 72_000_000),
            (25_000, 75_000, 180_000_000),
            (50_000, 102_400, 188_640_000),
            (75_000, 102_400, 98_640_000),
            (102_400, 102_400, 0),
        ] {
            assert_eq!(v2_burst(iops, &V2_SSD), (burst, credits), "SSD {iops}");
        }
        for (iops, burst, credits) in [
            (500, 5000, 16_200_000),
            (1000, 5000, 14_400_000),
            (3000, 9000, 21_600_000),
            (5000, 15_000, 36_000_000),
            (10_000, 30_000, 72_000_000),
            (25_000, 50_000, 90_000_000),
            (50_000, 50_000, 0),
        ] {
            assert_eq!(v2_burst(iops, &V2_HDD), (burst, credits), "HDD {iops}");
        }
    }

    #[test]
    fn anf_service_levels() {
        let mib = |m: Model, size: u64| provisioned(m, size).throughput.unwrap() as f64 / MIB as f64;
        assert_eq!(mib(Model::AnfStandard, TIB), 16.0);
        assert_eq!(mib(Model::AnfPremium, TIB), 64.0);
        assert_eq!(mib(Model::AnfUltra, TIB), 128.0);
        assert_eq!(mib(Model::AnfStandard, 4 * TIB), 64.0);
        assert_eq!(mib(Model::AnfPremium, 10 * TIB), 640.0);
        assert_eq!(mib(Model::AnfUltra, TIB / 2), 64.0);
        assert_eq!(mib(Model::AnfStandard, 100 * GIB), 1.5625);
        let l = provisioned(Model::AnfUltra, TIB);
        assert_eq!((l.iops, l.burst_iops, l.burst_credits), (None, None, None));
    }
}
