"""A throwaway PostgreSQL cluster on a loopback port, from Debian's `postgresql` package.

The server refuses to run as root, so when the tests run as root the cluster belongs to the
`postgres` user (runuser). Password authentication (SCRAM) over TCP, so tests can check that
the password never reaches lakemirror's output.
"""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass

USER, PASSWORD = "lakemirror", "pw-Secret-7f3a"


@dataclass
class Postgres:
    port: int
    data_dir: str
    run_as: list[str]
    # PEM of the CA that signed the server's certificate (DNS name localhost only), for
    # sslmode=verify-full tests; TLS is on, plain connections are still accepted.
    ca_file: str = ""

    @property
    def url(self) -> str:
        # verify-full, as lakemirror connects by default: the certificate names localhost.
        return (f"postgres://{USER}:{PASSWORD}@localhost:{self.port}/postgres"
                f"?sslmode=verify-full&sslrootcert={self.ca_file}")

    def stop(self):
        subprocess.run([*self.run_as, _bin("pg_ctl"), "-D", self.data_dir, "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.ca_file and os.path.exists(self.ca_file):
            os.remove(self.ca_file)


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found or not found[-1]:
        raise RuntimeError(f"PostgreSQL's {name} not found: apt-get install postgresql")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start() -> Postgres:
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data_dir = tempfile.mkdtemp(prefix="lakemirror-pg-")
    if run_as:
        shutil.chown(data_dir, "postgres", "postgres")
    pwfile = os.path.join(data_dir, "..", f"{os.path.basename(data_dir)}.pw")
    with open(pwfile, "w") as f:
        f.write(PASSWORD)
    if run_as:
        shutil.chown(pwfile, "postgres", "postgres")
    try:
        subprocess.run([*run_as, _bin("initdb"), "-D", data_dir, "-U", USER, "--pwfile", pwfile,
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True)
    finally:
        os.remove(pwfile)
    port = _free_port()
    ca_file = _server_certificate(data_dir, run_as)
    options = (f"-p {port} -k {data_dir} -c listen_addresses=127.0.0.1 -c fsync=off "
               f"-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key")
    subprocess.run([*run_as, _bin("pg_ctl"), "-D", data_dir, "-o", options, "-l", os.path.join(data_dir, "log"),
                    "-w", "start"], check=True, capture_output=True)
    return Postgres(port=port, data_dir=data_dir, run_as=run_as, ca_file=ca_file)


def _server_certificate(data_dir: str, run_as: list[str]) -> str:
    """A throwaway CA and a server certificate for DNS name `localhost` (not 127.0.0.1, so
    that verify-full to the address fails on the name) in the data directory; returns the
    CA's PEM path (outside the data directory, readable by the tests)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("lakemirror test CA")).issuer_name(name("lakemirror test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(valid[0]).not_valid_after(valid[1])
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server = (x509.CertificateBuilder().subject_name(name("localhost")).issuer_name(ca.subject)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(valid[0]).not_valid_after(valid[1])
              .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    crt, pem = os.path.join(data_dir, "server.crt"), os.path.join(data_dir, "server.key")
    with open(crt, "wb") as f:
        f.write(server.public_bytes(serialization.Encoding.PEM))
    with open(pem, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    os.chmod(pem, 0o600)
    if run_as:
        for path in (crt, pem):
            shutil.chown(path, "postgres", "postgres")
    ca_file = data_dir.rstrip("/") + "-ca.pem"
    with open(ca_file, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    return ca_file
