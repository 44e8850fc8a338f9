"""TLS and SCRAM libraries are loaded when a broker first needs them, not by every broker: `cryptography` and
`scramp` cost a plaintext broker about 15 MB of memory and a tenth of its start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from kafkette.broker.testing import BrokerProcess

SECURITY_LIBRARIES = ("cryptography", "scramp", "asn1crypto")
# cryptography's compiled core: mapped into a process once anything of cryptography is imported.
CRYPTOGRAPHY_CORE = "cryptography/hazmat/bindings/_rust"


def loaded_after(statements: str) -> list[str]:
    """Which security libraries a fresh interpreter holds after running `statements`."""
    probe = f"import sys\n{statements}\nprint(' '.join(m for m in {SECURITY_LIBRARIES!r} if m in sys.modules))"
    return subprocess.run(
        [sys.executable, "-P", "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()


def test_the_broker_start_path_imports_no_security_library_until_one_is_used() -> None:
    start_path = "import kafkette.broker.cli.broker_cmd, kafkette.broker.cli.main, kafkette.broker.server.app"
    assert loaded_after(start_path) == []
    # What loads them: a SCRAM credential, a client certificate's principal.
    scram = "from kafkette.broker.security.scram import ScramMechanism, new_credential\n"
    scram += "new_credential(ScramMechanism.SCRAM_SHA_256, 'secret', 4096)"
    assert "scramp" in loaded_after(f"{start_path}\n{scram}")
    certificate = "from kafkette.broker.security.tls import peer_principal\ntry:\n    peer_principal(b'not DER')\n"
    certificate += "except ValueError:\n    pass"
    assert "cryptography" in loaded_after(f"{start_path}\n{certificate}")


def test_a_plaintext_broker_serving_produce_never_maps_cryptography(tmp_path: Path) -> None:
    import cryptography.hazmat.bindings._rust  # noqa: F401  # the check below sees it when it is there

    assert CRYPTOGRAPHY_CORE in Path("/proc/self/maps").read_text()
    with BrokerProcess(tmp_path) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        delivered: list[bool] = []
        producer.produce("plain", b"x", on_delivery=lambda error, _message: delivered.append(error is None))
        producer.flush(30)
        assert delivered == [True]
        assert CRYPTOGRAPHY_CORE not in Path(f"/proc/{broker.pid}/maps").read_text()
