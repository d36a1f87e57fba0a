//! The provisioned-performance keys (`config/limits.rs`).

use super::*;
use braid_qos::Limits;

/// The limits of a memory share with `keys` (one per line, from line 4 on).
fn limits(keys: &str) -> Limits {
    let d = dir();
    let text = format!("[[share]]\nname = \"ram\"\nbackend = \"memory\"\n{keys}");
    let c = parse(&text, "braid.toml", d.path()).unwrap_or_else(|e| panic!("{keys}: {e}")).server;
    c.shares[0].limits.clone()
}

/// The error of a memory share whose line 4 on are `keys`.
fn limits_error(keys: &str, line: usize, needles: &[&str]) {
    error(&format!("[[share]]\nname = \"ram\"\nbackend = \"memory\"\n{keys}"), line, needles);
}

const MIB: u64 = 1 << 20;

#[test]
fn no_keys_no_limits() {
    assert!(limits("").is_unlimited());
}

#[test]
fn explicit_keys() {
    let l = limits(
        "iops = 200\nburst_iops = 600\nburst_seconds = 5\nthroughput = \"4MiB\"\ningress = 1048576\negress = \"2MiB/s\"\n\
         max_file_iops = 100\nmax_file_throughput = \"512KiB\"\n",
    );
    let want = Limits {
        iops: Some(200),
        burst_iops: Some(600),
        burst_credits: Some(2000),
        throughput: Some(4 * MIB),
        ingress: Some(MIB),
        egress: Some(2 * MIB),
        max_file_iops: Some(100),
        max_file_throughput: Some(512 << 10),
    };
    assert_eq!(l, want);
    assert_eq!(limits("iops = 100\nburst_iops = 300\nburst_credits = 12345\n").burst_credits, Some(12345));
    // Without a bucket size, a burst lasts an hour (Azure's rule).
    assert_eq!(limits("iops = 100\nburst_iops = 300\n").burst_credits, Some(200 * 3600));
    // A burst no higher than the baseline is no burst.
    let flat = limits("iops = 100\nburst_iops = 100\nburst_seconds = 60\n");
    assert_eq!((flat.iops, flat.burst_iops, flat.burst_credits), (Some(100), None, None));
    assert_eq!(limits("throughput = \"1G\"\n").throughput, Some(1 << 30));
}

#[test]
fn limit_errors_name_the_line_and_key() {
    limits_error("iops = 0\n", 4, &["share \"ram\"", "iops", "0 would stop"]);
    limits_error("iops = -5\n", 4, &["iops", "out of range"]);
    limits_error("iops = \"fast\"\n", 4, &["iops"]);
    limits_error("iops = 100\n\nburst_iops = 50\n", 6, &["burst_iops 50 is below iops 100"]);
    limits_error("burst_iops = 500\n", 4, &["burst_iops needs iops"]);
    limits_error("iops = 100\nburst_seconds = 60\n", 5, &["need burst_iops"]);
    limits_error("iops = 100\nburst_iops = 200\nburst_seconds = 60\nburst_credits = 5\n", 7, &["burst_seconds or burst_credits, not both"]);
    limits_error("iops = 100\nburst_iops = 200\nburst_seconds = 0\n", 6, &["burst_seconds", "0 would stop"]);
    limits_error("iops = 100\nburst_iops = 200\nburst_seconds = 100000\n", 6, &["burst_seconds", "out of range"]);
    limits_error("throughput = 0\n", 4, &["throughput", "0 would stop"]);
    limits_error("ingress = \"fast\"\n", 4, &["ingress", "not a rate"]);
    limits_error("egress = \"1K\"\n", 4, &["egress", "too small"]);
    limits_error("max_file_throughput = true\n", 4, &["max_file_throughput", "expected a rate"]);
    limits_error("max_file_iops = 0\n", 4, &["max_file_iops"]);
    limits_error("provisioned = { model = \"azure-v9\", size = \"1TiB\" }\n", 4, &["provisioned: model \"azure-v9\" is unknown", "anf-ultra"]);
    limits_error("provisioned = { model = \"azure-v1\", size = \"big\" }\n", 4, &["provisioned: size", "not a size"]);
    limits_error("provisioned = { model = \"azure-v1\", size = \"1M\" }\n", 4, &["too small"]);
    limits_error("provisioned = { model = \"azure-v1\" }\n", 4, &["size"]);
    limits_error("provisioned = { model = \"azure-v1\", size = \"1TiB\", tier = 2 }\n", 4, &["tier"]);
}

#[test]
fn preset_with_explicit_overrides() {
    let size = 1u64 << 40;
    let preset = braid_qos::provisioned(braid_qos::Model::AzureV1, size);
    assert_eq!(limits("provisioned = { model = \"azure-v1\", size = \"1TiB\" }\n"), preset);
    assert_eq!(limits("provisioned = { model = \"AZURE-V1\", size = 1099511627776 }\n"), preset);
    for (name, model) in [
        ("azure-v2-ssd", braid_qos::Model::AzureV2Ssd),
        ("azure-v2-hdd", braid_qos::Model::AzureV2Hdd),
        ("anf-standard", braid_qos::Model::AnfStandard),
        ("anf-premium", braid_qos::Model::AnfPremium),
        ("anf-ultra", braid_qos::Model::AnfUltra),
    ] {
        assert_eq!(limits(&format!("provisioned = {{ model = \"{name}\", size = \"4TiB\" }}\n")), braid_qos::provisioned(model, 4 << 40));
    }
    // Explicit keys win over the preset's values; the rest stays.
    let l = limits("provisioned = { model = \"azure-v1\", size = \"1TiB\" }\nmax_file_iops = 8000\negress = \"50MiB\"\n");
    assert_eq!(l, Limits { max_file_iops: Some(8000), egress: Some(50 * MIB), ..preset.clone() });
    let l = limits("provisioned = { model = \"azure-v1\", size = \"1TiB\" }\niops = 500\nburst_iops = 1000\nburst_seconds = 10\n");
    assert_eq!((l.iops, l.burst_iops, l.burst_credits), (Some(500), Some(1000), Some(5000)));
}

/// The published Azure Files provisioned v1 example: 1 TiB buys 4,024 IOPS, bursts to
/// 10,000 for an hour (21,513,600 credits) and 203 MiB/s.
#[test]
fn azure_v1_example_as_check_prints_it() {
    let l = limits("provisioned = { model = \"azure-v1\", size = \"1TiB\" }\n");
    assert_eq!(describe_limits(&l), "4024 IOPS, burst 10000 IOPS (21513600 credits, 60 min), throughput 203 MiB/s");
}

#[test]
fn describe_lines() {
    assert_eq!(describe_limits(&Limits::default()), "unlimited");
    let l = limits("iops = 200\nburst_iops = 600\nburst_seconds = 5\nthroughput = \"1536KiB\"\nmax_file_iops = 50\nmax_file_throughput = 70000\n");
    assert_eq!(describe_limits(&l), "200 IOPS, burst 600 IOPS (2000 credits, 5 s), throughput 1.50 MiB/s, per file 50 IOPS, per file 70000 B/s");
}
