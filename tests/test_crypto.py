"""SMB3 signing and encryption interop: smbclient's --client-protection, smbprotocol on every
SMB3 dialect and every 3.1.1 cipher, and refusal of clients that cannot (or do not) encrypt.

Each server configuration is its own braid process (started once per module) with two shares:
`plain` and `enc` (encrypt = true). The byte-level negative cases (tampered signatures and
ciphertext, wrong session ids, downgrade detection) are in crates/smb-server/tests/crypto_negative.rs.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pytest
from smbprotocol.connection import Ciphers, Dialects
from smbprotocol.exceptions import SMBResponseException

import harness
from harness import Smb, St, sha256_file

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="starts braid with custom [server] settings")

# name -> extra [server] lines
SERVERS = {
    "offered": [],
    "sign-required": ['signing = "required"'],
    "enc-required": ['encryption = "required"'],
    "enc-required-lax": ['encryption = "required"', "reject_unencrypted = false"],
    "aes-128-ccm": ['ciphers = ["aes-128-ccm"]'],
    "aes-128-gcm": ['ciphers = ["aes-128-gcm"]'],
    "aes-256-ccm": ['ciphers = ["aes-256-ccm"]'],
    "aes-256-gcm": ['ciphers = ["aes-256-gcm"]'],
}
CIPHER_IDS = {"aes-128-ccm": Ciphers.AES_128_CCM, "aes-128-gcm": Ciphers.AES_128_GCM,
              "aes-256-ccm": Ciphers.AES_256_CCM, "aes-256-gcm": Ciphers.AES_256_GCM}
SMB3_DIALECTS = [pytest.param(Dialects.SMB_3_0_0, id="3.0"), pytest.param(Dialects.SMB_3_0_2, id="3.0.2"),
                 pytest.param(Dialects.SMB_3_1_1, id="3.1.1")]



@pytest.fixture(scope="module")
def crypto_server():
    """crypto_server(kind) -> harness.Server for one of SERVERS, started on first use."""
    started: dict[str, harness.Server] = {}

    def get(kind: str) -> harness.Server:
        if kind not in started:
            users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
            root = harness.tmp_dir(f"braid-crypto-{kind}-")
            try:
                started[kind] = harness.start_braid(root, users, share_specs=[{"name": "plain"},
                                                                              {"name": "enc", "encrypt": True}],
                                                    server_extra=SERVERS[kind])
            except Exception as e:
                shutil.rmtree(root, ignore_errors=True)
                pytest.fail(f"could not start braid ({kind}): {e}", pytrace=False)
        srv = started[kind]
        problem = srv.health()
        if problem:
            pytest.fail(f"braid ({kind}) is not healthy: {problem}", pytrace=False)
        return srv

    yield get
    problems = []
    for kind, srv in started.items():
        problem = harness.stop_braid(srv)
        if problem:
            saved = harness.log_dir() / f"braid-crypto-{kind}-{os.getpid()}.log"
            shutil.copyfile(srv.log, saved)
            problems.append(f"{kind}: {problem} (log saved to {saved})")
        shutil.rmtree(srv.root, ignore_errors=True)
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


@pytest.fixture
def local_tmp():
    d = harness.tmp_dir("braid-crypto-local-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def status_of(excinfo) -> int:
    return excinfo.value.status


# --------------------------------------------------------------------------------------------
# smbclient
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["sign-required", "enc-required"])
@pytest.mark.parametrize("protection", ["sign", "encrypt"])
def test_smbclient_protection_16mib(crypto_server, client_conf, local_tmp, kind, protection):
    srv = crypto_server(kind)
    src = local_tmp / "src.bin"
    with open(src, "wb") as f:
        f.write(os.urandom(16 << 20))
    back = local_tmp / "back.bin"
    name = f"p_{protection}_{secrets.token_hex(3)}.bin"
    r = harness.smbclient(srv, client_conf, "plain", f'put "{src}" {name}; get {name} "{back}"',
                          extra=[f"--client-protection={protection}"], timeout=120)
    assert r.ok, r.out
    want = sha256_file(src)
    assert sha256_file(srv.shares["plain"] / name) == want
    assert sha256_file(back) == want


def test_smbclient_encrypted_share(crypto_server, client_conf, local_tmp):
    srv = crypto_server("offered")
    src = local_tmp / "e.bin"
    data = os.urandom(1 << 20)
    src.write_bytes(data)
    back = local_tmp / "back.bin"
    r = harness.smbclient(srv, client_conf, "enc", f'put "{src}" e.bin; get e.bin "{back}"')
    assert r.ok, r.out
    assert (srv.shares["enc"] / "e.bin").read_bytes() == data
    assert back.read_bytes() == data


def test_smbclient_smb2_10_refused_when_encryption_required(crypto_server, client_conf):
    srv = crypto_server("enc-required")
    r = harness.smbclient(srv, client_conf, "plain", "ls", extra=["-m", "SMB2_10"])
    assert r.rc != 0, r.out
    assert "NT_STATUS_ACCESS_DENIED" in r.out, r.out
    # Refused cleanly: the server is still there for a client that encrypts.
    r = harness.smbclient(srv, client_conf, "plain", "ls", extra=["--client-protection=encrypt"])
    assert r.ok, r.out


def test_smbclient_smb2_10_served_when_not_rejecting(crypto_server, client_conf):
    srv = crypto_server("enc-required-lax")
    for share in ("plain", "enc"):
        r = harness.smbclient(srv, client_conf, share, "ls", extra=["-m", "SMB2_10"])
        assert r.ok, r.out


def test_smbclient_smb2_10_refused_by_encrypted_share(crypto_server, client_conf):
    srv = crypto_server("offered")
    r = harness.smbclient(srv, client_conf, "enc", "ls", extra=["-m", "SMB2_10"])
    assert r.rc != 0 and "NT_STATUS_ACCESS_DENIED" in r.out, r.out
    r = harness.smbclient(srv, client_conf, "plain", "ls", extra=["-m", "SMB2_10"])
    assert r.ok, r.out


# --------------------------------------------------------------------------------------------
# smbprotocol
# --------------------------------------------------------------------------------------------

def _write_read_check(s: Smb, srv: harness.Server, share: str, size: int = 1 << 20):
    name = f"x_{secrets.token_hex(4)}.bin"
    data = os.urandom(size)
    f = s.open(name)
    try:
        # unaligned pieces, so several requests of different sizes go through the cipher
        pos = 0
        for n in (1, 4095, 65536, 70000, size):
            n = min(n, size - pos)
            if n <= 0:
                break
            assert f.write(data[pos:pos + n], pos) == n
            pos += n
        assert f.read(0, size) == data
        assert f.read(12345, 100) == data[12345:12445]
    finally:
        f.close()
    assert (srv.shares[share] / name).read_bytes() == data


@pytest.mark.parametrize("dialect", SMB3_DIALECTS)
def test_smbprotocol_signed(crypto_server, dialect):
    srv = crypto_server("sign-required")
    with Smb(srv, "plain", dialect=dialect, require_signing=True) as s:
        assert s.conn.dialect == dialect
        assert s.session.signing_required and not s.session.encrypt_data
        _write_read_check(s, srv, "plain")


@pytest.mark.parametrize("dialect", SMB3_DIALECTS)
def test_smbprotocol_signed_and_encrypted(crypto_server, dialect):
    srv = crypto_server("offered")
    with Smb(srv, "plain", dialect=dialect, require_signing=True, require_encryption=True) as s:
        assert s.conn.dialect == dialect
        assert s.session.encrypt_data
        if dialect == Dialects.SMB_3_1_1:
            # the server's preference decides: AES-128-GCM first
            assert s.conn.cipher_id == Ciphers.AES_128_GCM
        _write_read_check(s, srv, "plain")


@pytest.mark.parametrize("cipher", list(CIPHER_IDS))
def test_smbprotocol_each_cipher(crypto_server, cipher):
    srv = crypto_server(cipher)
    with Smb(srv, "plain", dialect=Dialects.SMB_3_1_1, require_signing=True, require_encryption=True) as s:
        assert s.conn.cipher_id == CIPHER_IDS[cipher]
        assert s.session.encrypt_data
        _write_read_check(s, srv, "plain")


@pytest.mark.parametrize("dialect", SMB3_DIALECTS)
def test_smbprotocol_encrypted_share(crypto_server, dialect):
    srv = crypto_server("offered")
    with Smb(srv, "enc", dialect=dialect) as s:
        assert s.tree.encrypt_data and not s.session.encrypt_data
        _write_read_check(s, srv, "enc", size=200_000)


def test_unencrypted_request_to_encrypted_share_denied(crypto_server):
    srv = crypto_server("offered")
    with Smb(srv, "enc", dialect=Dialects.SMB_3_1_1) as s:
        assert s.tree.encrypt_data
        s.tree.encrypt_data = False  # the client now sends in the clear
        with pytest.raises(SMBResponseException) as ei:
            s.open("denied.txt")
        assert status_of(ei) == St.ACCESS_DENIED
        assert not (srv.shares["enc"] / "denied.txt").exists()
        # the connection survives; encrypted requests are still served
        s.tree.encrypt_data = True
        s.open("allowed.txt").close()
    assert (srv.shares["enc"] / "allowed.txt").exists()


def test_unencrypted_request_on_encrypting_session_denied(crypto_server):
    srv = crypto_server("enc-required")
    with Smb(srv, "plain", dialect=Dialects.SMB_3_1_1) as s:
        assert s.session.encrypt_data  # SESSION_FLAG_ENCRYPT_DATA made the client encrypt
        s.session.encrypt_data = False
        with pytest.raises(SMBResponseException) as ei:
            s.open("denied.txt")
        assert status_of(ei) == St.ACCESS_DENIED
        s.session.encrypt_data = True
        s.open("allowed.txt").close()
    assert not (srv.shares["plain"] / "denied.txt").exists()


def test_client_that_cannot_encrypt_refused_by_encrypted_share(crypto_server):
    srv = crypto_server("offered")
    with pytest.raises(SMBResponseException) as ei:
        Smb(srv, "enc", dialect=Dialects.SMB_2_1_0)
    assert status_of(ei) == St.ACCESS_DENIED
    with Smb(srv, "plain", dialect=Dialects.SMB_2_1_0) as s:
        _write_read_check(s, srv, "plain", size=100_000)


def test_client_that_cannot_encrypt_refused_at_session_setup(crypto_server):
    srv = crypto_server("enc-required")
    with pytest.raises(SMBResponseException) as ei:
        Smb(srv, "plain", dialect=Dialects.SMB_2_1_0)
    assert status_of(ei) == St.ACCESS_DENIED
