"""NEGOTIATE as real clients send it, on a raw socket: hand-built requests (dialects,
capabilities, 3.1.1 negotiate contexts) and the fields of the response (MS-SMB2 3.3.5.4)."""

import os
import struct

import pytest

from test_security import SMB2_NEGOTIATE, Raw, command, frame, hdr, status

SMB2_300, SMB2_302, SMB2_311 = 0x0300, 0x0302, 0x0311
CAP_DFS, CAP_LEASING, CAP_LARGE_MTU, CAP_MULTI_CHANNEL = 0x01, 0x02, 0x04, 0x08
CAP_PERSISTENT_HANDLES, CAP_DIRECTORY_LEASING, CAP_ENCRYPTION = 0x10, 0x20, 0x40
CTX_PREAUTH, CTX_ENCRYPTION = 0x0001, 0x0002
AES_128_CCM, AES_128_GCM = 0x0001, 0x0002
# Capabilities a server grants only when the client offered them (MS-SMB2 3.3.5.4).
CLIENT_DEPENDENT = CAP_MULTI_CHANNEL | CAP_PERSISTENT_HANDLES | CAP_DIRECTORY_LEASING | CAP_ENCRYPTION


def preauth_context() -> tuple[int, bytes]:
    return CTX_PREAUTH, struct.pack("<HHH", 1, 32, 0x0001) + os.urandom(32)


def cipher_context(ciphers) -> tuple[int, bytes]:
    return CTX_ENCRYPTION, struct.pack("<H", len(ciphers)) + b"".join(struct.pack("<H", c) for c in ciphers)


def negotiate_request(dialects, capabilities, contexts=()) -> bytes:
    """A NEGOTIATE (header included); contexts are sent only when 3.1.1 is offered."""
    contexts = list(contexts) if SMB2_311 in dialects else []
    body_len = 36 + 2 * len(dialects)
    ctx_off = (64 + body_len + 7) & ~7 if contexts else 0
    body = struct.pack("<HHHHI16sIHH", 36, len(dialects), 1, 0, capabilities, os.urandom(16),
                       ctx_off, len(contexts), 0)
    body += b"".join(struct.pack("<H", d) for d in dialects)
    msg = hdr(SMB2_NEGOTIATE, 0) + body
    for kind, data in contexts:
        msg += bytes(-len(msg) % 8)
        msg += struct.pack("<HHI", kind, len(data), 0) + data
    return msg


def negotiate(srv, dialects, capabilities, contexts=()):
    """Sends one NEGOTIATE; returns (dialect, capabilities, {context type: data})."""
    r = Raw(srv)
    try:
        r.send(frame(negotiate_request(dialects, capabilities, contexts)))
        kind, pdu = r.recv()
    finally:
        r.close()
    assert kind == "pdu", f"no NEGOTIATE response ({kind})"
    assert command(pdu) == SMB2_NEGOTIATE
    assert status(pdu) == 0, f"NEGOTIATE failed with {status(pdu):#x}"
    _, dialect, ctx_count = struct.unpack_from("<HHH", pdu, 64 + 2)
    caps = struct.unpack_from("<I", pdu, 64 + 24)[0]
    ctx_off = struct.unpack_from("<I", pdu, 64 + 60)[0]
    found = {}
    pos = ctx_off
    for _ in range(ctx_count if dialect == SMB2_311 else 0):
        pos += -pos % 8
        kind, length = struct.unpack_from("<HH", pdu, pos)
        found[kind] = pdu[pos + 8:pos + 8 + length]
        pos += 8 + length
    return dialect, caps, found


def chosen_cipher(contexts) -> int:
    """The cipher of an encryption context in a response (count 1, one id); 0 = none."""
    data = contexts.get(CTX_ENCRYPTION)
    if data is None:
        return 0
    count, cipher = struct.unpack_from("<HH", data)
    assert count == 1, f"a response names exactly one cipher, not {count}"
    return cipher


def test_empty_cipher_list_negotiates_no_cipher(braid_server):
    """A client with encryption off may send SMB2_ENCRYPTION_CAPABILITIES with CipherCount 0
    (a Rust client library does): the server negotiates 3.1.1 with no cipher instead of
    failing, and answers without an encryption context, as Samba does."""
    dialect, _, contexts = negotiate(braid_server, [0x0202, 0x0210, SMB2_300, SMB2_302, SMB2_311],
                                     CAP_DFS | CAP_LEASING | CAP_LARGE_MTU,
                                     [preauth_context(), cipher_context([])])
    assert dialect == SMB2_311
    assert CTX_ENCRYPTION not in contexts, f"answered {contexts[CTX_ENCRYPTION].hex()}"


def test_cipher_choice_follows_server_preference(braid_server):
    """The server, not the client's list order, decides among the ciphers both support
    (docs/decisions.md): a client listing AES-128-CCM before AES-128-GCM gets GCM, the first
    cipher of the default server order (Braid's `ciphers`, Samba's "server smb encryption
    algorithms", Windows' EncryptionCiphers)."""
    for offered in ([AES_128_CCM, AES_128_GCM], [AES_128_GCM, AES_128_CCM]):
        _, _, contexts = negotiate(braid_server, [SMB2_311], CAP_ENCRYPTION,
                                   [preauth_context(), cipher_context(offered)])
        assert chosen_cipher(contexts) == AES_128_GCM, f"offered {offered}"
    _, _, contexts = negotiate(braid_server, [SMB2_311], CAP_ENCRYPTION,
                               [preauth_context(), cipher_context([AES_128_CCM])])
    assert chosen_cipher(contexts) == AES_128_CCM


@pytest.mark.parametrize("dialect", [SMB2_300, SMB2_302, SMB2_311], ids=["3.0", "3.0.2", "3.1.1"])
@pytest.mark.parametrize("offered", [0, CLIENT_DEPENDENT], ids=["none", "all"])
def test_client_dependent_capabilities_only_if_offered(braid_server, dialect, offered):
    """MULTI_CHANNEL, PERSISTENT_HANDLES, DIRECTORY_LEASING and (3.0/3.0.2) ENCRYPTION are
    returned only when the client's NEGOTIATE offered them (MS-SMB2 3.3.5.4)."""
    base = CAP_DFS | CAP_LEASING | CAP_LARGE_MTU
    contexts = [preauth_context(), cipher_context([AES_128_GCM, AES_128_CCM])]
    got_dialect, caps, _ = negotiate(braid_server, [dialect], base | offered, contexts)
    assert got_dialect == dialect
    assert caps & CLIENT_DEPENDENT & ~offered == 0, f"{caps:#x} has capabilities not offered"
    if offered:
        # Both servers support multichannel and encryption; 3.1.1 negotiates its cipher
        # with a context instead of the ENCRYPTION capability.
        assert caps & CAP_MULTI_CHANNEL
        assert bool(caps & CAP_ENCRYPTION) == (dialect != SMB2_311)
