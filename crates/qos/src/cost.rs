//! What one request costs, counted the way Azure Files counts it: a data I/O is one IO per
//! 64 KiB or part of it (a 4 KiB read is 1, a 1 MiB write 16), every other operation that
//! reaches the share (open, close, query, set, list, lock, flush...) is 1.

/// The size of one IO unit.
pub const IO_UNIT: u64 = 64 * 1024;

/// One request, as the limiter charges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// Data read from the share: egress.
    Read(u64),
    /// Data written to the share: ingress.
    Write(u64),
    /// Any other operation on the share.
    Meta,
}

impl Io {
    /// IO units this request costs.
    pub fn units(self) -> u64 {
        match self {
            Io::Read(n) | Io::Write(n) => io_units(n),
            Io::Meta => 1,
        }
    }
}

/// IO units of a data transfer of `bytes`: one per 64 KiB or part of it, at least one.
pub fn io_units(bytes: u64) -> u64 {
    bytes.div_ceil(IO_UNIT).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(io_units(0), 1);
        assert_eq!(io_units(4096), 1);
        assert_eq!(io_units(65536), 1);
        assert_eq!(io_units(65537), 2);
        assert_eq!(io_units(1 << 20), 16);
        assert_eq!(Io::Meta.units(), 1);
    }
}
