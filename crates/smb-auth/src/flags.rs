//! NTLMSSP NegotiateFlags bits (MS-NLMP 2.2.2.5).

/// NTLMSSP_NEGOTIATE_UNICODE (A): strings are UTF-16LE.
pub const UNICODE: u32 = 0x0000_0001;
/// NTLM_NEGOTIATE_OEM (B): strings are in the OEM code page.
pub const OEM: u32 = 0x0000_0002;
/// NTLMSSP_REQUEST_TARGET (C): the server must return a TargetName.
pub const REQUEST_TARGET: u32 = 0x0000_0004;
/// NTLMSSP_NEGOTIATE_SIGN (D).
pub const SIGN: u32 = 0x0000_0010;
/// NTLMSSP_NEGOTIATE_SEAL (E).
pub const SEAL: u32 = 0x0000_0020;
/// NTLMSSP_NEGOTIATE_LM_KEY (G).
pub const LM_KEY: u32 = 0x0000_0080;
/// NTLMSSP_NEGOTIATE_NTLM (H).
pub const NTLM: u32 = 0x0000_0200;
/// NTLMSSP_ANONYMOUS (J): the AUTHENTICATE message is anonymous.
pub const ANONYMOUS: u32 = 0x0000_0800;
/// NTLMSSP_NEGOTIATE_ALWAYS_SIGN (M).
pub const ALWAYS_SIGN: u32 = 0x0000_8000;
/// NTLMSSP_TARGET_TYPE_DOMAIN (N): TargetName is a domain name.
pub const TARGET_TYPE_DOMAIN: u32 = 0x0001_0000;
/// NTLMSSP_TARGET_TYPE_SERVER (O): TargetName is a server name.
pub const TARGET_TYPE_SERVER: u32 = 0x0002_0000;
/// NTLMSSP_NEGOTIATE_EXTENDED_SESSIONSECURITY (P).
pub const EXTENDED_SESSIONSECURITY: u32 = 0x0008_0000;
/// NTLMSSP_NEGOTIATE_TARGET_INFO (S): the CHALLENGE carries TargetInfo.
pub const TARGET_INFO: u32 = 0x0080_0000;
/// NTLMSSP_NEGOTIATE_VERSION (T): the Version field is meaningful.
pub const VERSION: u32 = 0x0200_0000;
/// NTLMSSP_NEGOTIATE_128 (U).
pub const NEGOTIATE_128: u32 = 0x2000_0000;
/// NTLMSSP_NEGOTIATE_KEY_EXCH (V): an EncryptedRandomSessionKey is sent.
pub const KEY_EXCH: u32 = 0x4000_0000;
/// NTLMSSP_NEGOTIATE_56 (W).
pub const NEGOTIATE_56: u32 = 0x8000_0000;
