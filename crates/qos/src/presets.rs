//! Limits computed from a provisioned size, by the published formulas.

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
pub fn provisioned(model: Model, size: u64) -> super::Limits {
    let _ = (model, size);
    super::Limits::default()
}
