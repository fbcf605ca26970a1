"""Runs Apache's TestServer.py (unmodified) with one setting of the test run.

Usage: python3 py_server.py PATH/TO/TestServer.py ARGS...

The listening socket is on the loopback interface: TestServer.py passes no host, and
Apache's TServerSocket then listens on every interface ("::", dual stack); a test on a
shared machine listens on 127.0.0.1 only. (For --ssl nothing is changed: the matrix
gives our client a certificate the unmodified server accepts; see client_keys in
matrix.rs.)
"""

import os
import runpy
import sys

from thrift.transport import TSocket

_server_socket_init = TSocket.TServerSocket.__init__


def _loopback_init(self, host=None, *args, **kwargs):
    _server_socket_init(self, host or "127.0.0.1", *args, **kwargs)


TSocket.TServerSocket.__init__ = _loopback_init


if __name__ == "__main__":
    script = os.path.abspath(sys.argv[1])
    sys.argv = [script] + sys.argv[2:]
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")
