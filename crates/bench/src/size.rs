//! Sizes on the command line: `4k`, `64KiB`, `1m`, `2G`, `512` (bytes). Units are binary
//! (1k = 1024), as in fio and diskspd, because block sizes are powers of two.

use crate::BenchError;

/// Parses a size such as `4k`, `1M`, `256KiB`, `2g` or `4096` into bytes.
pub fn parse_size(s: &str) -> Result<u64, BenchError> {
    let bad = || BenchError::BadInput(format!("bad size {s:?} (expected e.g. 4k, 64k, 1m, 2g or a byte count)"));
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// Formats a byte count in the shortest exact unit: 4096 → `4k`, 1048576 → `1m`, 1000 → `1000`.
pub fn format_size(n: u64) -> String {
    for (shift, unit) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if n != 0 && n % (1u64 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// Parses a comma-separated list with `item`, refusing an empty list.
pub fn parse_list<T>(s: &str, what: &str, item: impl Fn(&str) -> Result<T, BenchError>) -> Result<Vec<T>, BenchError> {
    let v = s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(item).collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() {
        return Err(BenchError::BadInput(format!("empty {what} list {s:?}")));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("1MB").unwrap(), 1 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1t").unwrap(), 1 << 40);
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size(" 8k ").unwrap(), 8192);
        for bad in ["", "k", "4x", "-4k", "4.5k", "99999999999999999999", "16777216t"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.starts_with("bad size"), "{bad}: {e}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_size(4096), "4k");
        assert_eq!(format_size(1 << 20), "1m");
        assert_eq!(format_size(3 << 30), "3g");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(0), "0");
        assert_eq!(format_size(1536), "1536");
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list("4k, 8k,1m", "block size", parse_size).unwrap(), vec![4096, 8192, 1 << 20]);
        assert!(parse_list(",", "block size", parse_size).is_err());
        assert!(parse_list("4k,zz", "block size", parse_size).is_err());
    }
}
