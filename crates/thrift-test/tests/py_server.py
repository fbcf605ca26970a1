"""Runs Apache's TestServer.py (unmodified) with two settings of the test run.

Usage: python3 py_server.py PATH/TO/TestServer.py ARGS...

1. The listening socket is on the loopback interface. TestServer.py passes no host,
   and Apache's TServerSocket then listens on every interface ("::", dual stack);
   a test on a shared machine listens on 127.0.0.1 only.

2. With --ssl, the client certificate is checked by its subject, not by the peer's
   IP address. thrift 0.25's TSSLServerSocket, by default, requires the address the
   client connected from among the IP subjectAltNames of the client certificate
   (thrift.transport.sslcompat.match_peer_ipaddress). The suite's client.crt is an
   X.509 v1 certificate with no subjectAltName at all, so TestServer.py refuses
   every client that presents it, Apache's own TestClient.py included ("Peer address
   ... is not covered by the certificate it presented"). The handshake still
   requires a certificate that verifies against keys/client.pem (TestServer.py's
   CERT_REQUIRED and ca_certs are unchanged); this replaces only the address check,
   with the subject check TSSLServerSocket's documentation gives as its example.
"""

import os
import runpy
import sys

from thrift.transport import TSocket, TSSLSocket, TTransport

_server_socket_init = TSocket.TServerSocket.__init__


def _loopback_init(self, host=None, *args, **kwargs):
    _server_socket_init(self, host or "127.0.0.1", *args, **kwargs)


TSocket.TServerSocket.__init__ = _loopback_init


def _suite_client_certificate(cert, peer_address):
    subject = dict(x[0] for x in cert.get("subject", ()))
    if subject.get("organizationalUnitName") != "Apache Thrift":
        raise TTransport.TTransportException(
            message="client certificate not issued for the Apache Thrift suite"
        )


_ssl_server_socket_init = TSSLSocket.TSSLServerSocket.__init__


def _ssl_init(self, *args, **kwargs):
    kwargs.setdefault("validate_callback", _suite_client_certificate)
    _ssl_server_socket_init(self, *args, **kwargs)


TSSLSocket.TSSLServerSocket.__init__ = _ssl_init

if __name__ == "__main__":
    script = os.path.abspath(sys.argv[1])
    sys.argv = [script] + sys.argv[2:]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")
