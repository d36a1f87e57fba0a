//! Error type shared by the whole crate.

/// Failures of the SMB2/3 cryptographic layer.
///
/// None of these carry key material or plaintext, so they are safe to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// A key of the wrong size was supplied for the selected cipher.
    #[error("invalid key length: expected {expected} bytes, got {got}")]
    InvalidKeyLength {
        /// Bytes the cipher needs.
        expected: usize,
        /// Bytes supplied.
        got: usize,
    },
    /// The buffer is shorter than a TRANSFORM_HEADER (MS-SMB2 2.2.41).
    #[error("buffer too short for a transform header: {0} bytes")]
    TooShort(usize),
    /// ProtocolId is not 0xFD 'S' 'M' 'B' (MS-SMB2 2.2.41).
    #[error("transform header protocol id mismatch")]
    BadProtocolId,
    /// OriginalMessageSize does not match the bytes that follow the header.
    #[error("OriginalMessageSize {declared} does not match payload length {actual}")]
    SizeMismatch {
        /// OriginalMessageSize from the header.
        declared: u32,
        /// Bytes actually present after the header.
        actual: usize,
    },
    /// Flags/EncryptionAlgorithm is not 0x0001 (MS-SMB2 3.3.5.2.1.1).
    #[error("unsupported transform flags/encryption algorithm 0x{0:04x}")]
    BadFlags(u16),
    /// The plaintext is too large to describe in OriginalMessageSize.
    #[error("message too large to encrypt: {0} bytes")]
    MessageTooLarge(usize),
    /// Tag verification failed or the AEAD refused the input.
    #[error("decryption failed: authentication tag mismatch")]
    AuthFailed,
    /// Every nonce of this key has been used; the session must be re-keyed.
    #[error("nonce space exhausted for this key")]
    NonceExhausted,
    /// The operating system random source failed.
    #[error("random number generator failure")]
    Rng,
}
