"""Test certificates made with the openssl command line: a CA, a server certificate
for 127.0.0.1/localhost, and client certificates, each as one PEM file holding the
certificate and its unencrypted key (what `--tlsCertificateKeyFile` and drivers take).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

DAYS = "2"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Certificates:
    """A CA in `directory` that issues certificates; `ca` is its certificate's path."""

    def __init__(self, directory: Path, name: str = "Basalt Test CA"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ca_key = self.directory / "ca.key"
        self.ca = self.directory / "ca.pem"
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", DAYS,
            "-subj", f"/O=Basalt Tests/CN={name}",
            "-keyout", str(self.ca_key), "-out", str(self.ca),
            cwd=self.directory,
        )  # fmt: skip

    def issue(self, name: str, subject: str, server: bool = False) -> Path:
        """A certificate (with its key, in one PEM file) for `subject`, e.g.
        `/C=US/O=Acme/OU=apps/CN=ann`; a server's is valid for 127.0.0.1 and localhost."""
        key = self.directory / f"{name}.key"
        request = self.directory / f"{name}.csr"
        certificate = self.directory / f"{name}.crt"
        extensions = self.directory / f"{name}.ext"
        usage = "serverAuth,clientAuth" if server else "clientAuth"
        lines = [f"extendedKeyUsage={usage}", "basicConstraints=CA:FALSE"]
        if server:
            lines.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
        extensions.write_text("\n".join(lines) + "\n")
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
            "-keyout", str(key), "-out", str(request),
            cwd=self.directory,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", str(request), "-CA", str(self.ca), "-CAkey", str(self.ca_key),
            "-CAcreateserial", "-days", DAYS, "-extfile", str(extensions), "-out", str(certificate),
            cwd=self.directory,
        )  # fmt: skip
        pem = self.directory / f"{name}.pem"
        pem.write_text(certificate.read_text() + key.read_text())
        return pem
