"""Certificates made with openssl for the TLS tests: a CA, and per node a peer leaf for its IP (etcd 3.4
checks a peer's IP SANs), both client and server auth, as etcd's peer side uses one leaf for both."""
import os
import shutil

from harness import log, require, run, wait_healthy


def make_ca(directory, name):
    """A CA in directory/name.crt and name.key; returns (crt, key)."""
    os.makedirs(directory, exist_ok=True)
    crt, key = os.path.join(directory, f"{name}.crt"), os.path.join(directory, f"{name}.key")
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", key, "-out", crt, "-days", "30", "-subj", f"/CN={name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        check_rc=0)
    return crt, key


def make_leaf(ca, crt, key, ip, name):
    """A leaf for `ip` signed by `ca` (crt, key), written to crt and key."""
    os.makedirs(os.path.dirname(crt), exist_ok=True)
    csr = crt + ".csr"
    ext = crt + ".ext"
    with open(ext, "w") as f:
        # etcd 3.4 checks a peer client's IP SANs against the address it connects from, and on a
        # loopback every node connects from 127.0.0.1.
        f.write(f"subjectAltName=IP:{ip},IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n")
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
         "-out", csr, "-subj", f"/CN={name}"], check_rc=0)
    run(["openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial", "-out", crt,
         "-days", "30", "-extfile", ext], check_rc=0)
    os.remove(csr)
    os.remove(ext)


def node_files(pki, node):
    """The node's peer files as quorate is given them: pki/<node>/{ca,peer}.crt, peer.key."""
    d = os.path.join(pki, node.name)
    return os.path.join(d, "ca.crt"), os.path.join(d, "peer.crt"), os.path.join(d, "peer.key")


def client_files(pki, node):
    """The node's client-side files as quorate is given them: pki/<node>/{client-ca,client}.crt, client.key."""
    d = os.path.join(pki, node.name)
    return os.path.join(d, "client-ca.crt"), os.path.join(d, "client.crt"), os.path.join(d, "client.key")


def install(pki, node, ca, next_dir=False, files=node_files):
    """Puts CA `ca`'s certificate and a new leaf for `node` into its files (node_files: the peer side's;
    client_files), or into next/ beside them."""
    ca_file, crt, key = files(pki, node)
    if next_dir:
        ca_file, crt, key = (os.path.join(os.path.dirname(p), "next", os.path.basename(p)) for p in (ca_file, crt, key))
    os.makedirs(os.path.dirname(ca_file), exist_ok=True)
    shutil.copyfile(ca[0], ca_file)
    make_leaf(ca, crt, key, node.ip, node.name)


def client_args(pki, node):
    ca_file, crt, key = client_files(pki, node)
    return ["--trusted-ca-file", ca_file, "--cert-file", crt, "--key-file", key, "--client-cert-auth"]


def cross_signed(new_ca, old_ca, out):
    """`new_ca`'s certificate again, signed by `old_ca` (same subject and key): a leaf of the new CA sent with
    it is verified by a peer that trusts only the old CA, and by one that trusts only the new. Returns `out`."""
    csr, ext = out + ".csr", out + ".ext"
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
                "subjectKeyIdentifier=hash\n")
    subject = run(["openssl", "x509", "-in", new_ca[0], "-noout", "-subject", "-nameopt", "compat"],
                  check_rc=0).stdout.strip().removeprefix("subject=")
    run(["openssl", "req", "-new", "-key", new_ca[1], "-out", csr, "-subj", subject], check_rc=0)
    run(["openssl", "x509", "-req", "-in", csr, "-CA", old_ca[0], "-CAkey", old_ca[1], "-CAcreateserial", "-out", out,
         "-days", "30", "-extfile", ext], check_rc=0)
    os.remove(csr)
    os.remove(ext)
    return out


def promote(pki, node):
    """The operator's step after a rotation: next/ put in place of the old files, by rename (the client side's
    when it was rotated too)."""
    client = client_files(pki, node)
    rotated = client if os.path.exists(os.path.join(os.path.dirname(client[0]), "next", "client-ca.crt")) else ()
    for p in node_files(pki, node) + rotated:
        os.replace(os.path.join(os.path.dirname(p), "next", os.path.basename(p)), p)


def peer_args(pki, node):
    ca_file, crt, key = node_files(pki, node)
    return ["--peer-trusted-ca-file", ca_file, "--peer-cert-file", crt, "--peer-key-file", key,
            "--peer-client-cert-auth"]


def handshake(node, ca, crt=None, key=None, prefix=(), port=2380, path="/members"):
    """True when etcd's peer listener of `node` (on `port`; its client listener at 2379, path /health) completes a TLS handshake trusting only `ca` (a
    path), presenting crt/key when given (peer client-cert-auth refuses a client cert it does not trust)."""
    argv = ["curl", "--http1.1", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", "--cacert", ca]
    if crt:
        argv += ["--cert", crt, "--key", key]
    r = run(argv + [f"https://{node.ip}:{port}{path}"], prefix=prefix, check_rc=None, timeout=10)
    if r.returncode != 0 or r.stdout.strip() != "200":
        log(f"handshake with {node.name}: {r.returncode} {r.stdout} {r.stderr.strip()}")
    return r.returncode == 0 and r.stdout.strip() == "200"


def run_cluster(c, ca_name):
    """Makes CA `ca_name` and a peer leaf of it per node, starts every node's `quorate run` on those files
    and waits until the cluster is healthy; returns (the pki dir, the CA's (crt, key))."""
    for binary in ("etcd", "etcdctl", "openssl", "curl"):
        require(binary)
    pkidir = os.path.join(c.dir, "pki")
    ca = make_ca(os.path.join(c.dir, "cas"), ca_name)
    for n in c.nodes:
        install(pkidir, n, ca)
    for n in c.nodes:
        n.run(extra=peer_args(pkidir, n))
    wait_healthy(c)
    return pkidir, ca
