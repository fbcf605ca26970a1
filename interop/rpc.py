#!/usr/bin/env python3
"""RPC interop with Apache Thrift's Python library: idl/echo.thrift's EchoService, and
with --multiplexed idl/second.thrift's SecondService beside it.

  server --transport framed|buffered --protocol binary|compact|header [--multiplexed]
      Serves EchoService with the semantics written in the IDL (echo_or_fail fails with
      EchoError{code = 1, message = req.msg} when req.action == "fail"; notify is oneway
      and records the event). Listens on 127.0.0.1, an ephemeral port, prints the port
      on the first line of stdout, and serves until killed or until stdin closes. With
      `header`, Apache's THeaderProtocol as its test server sets it up: THeader clients
      in either subprotocol, and also plain framed or unframed Binary or Compact ones,
      each answered in kind. With --multiplexed: a TMultiplexedProcessor with
      EchoService registered as "EchoService" and as the default, and SecondService as
      "SecondService".

  client --port N --transport framed|buffered --protocol binary|compact|header
         [--header-protocol binary|compact] [--zlib] [--multiplexed]
      Calls every method of a server at 127.0.0.1:N and checks every answer: echo,
      echo_test (a MyTest with 1,000 numbers), echo_ids, echo_or_fail with an ordinary
      request and with action "fail" (the EchoError must arrive as the declared
      exception), notify (oneway), then echo again on the same connection (a oneway got no
      reply that could be mistaken for the next one). With --multiplexed, through a
      TMultiplexedProtocol for "EchoService", then on the same connection SecondService
      through one for "SecondService" (echo, and notify, the oneway ping, notify again:
      the count went up by two), and
      EchoService's echo without a prefix (the server's default service). With
      `header`: Apache's THeaderProtocol in the given subprotocol (default binary),
      every request compressed with the zlib transform when --zlib is given, and an
      info header ("client" = "rpc.py") on every request. Prints one line per check;
      exits 1 if any failed.

Common options: --gen-dir DIR and --thrift PATH, as for apache.py.

TLS (--ssl, with --keys-dir DIR laid out like Apache's test/keys): the sockets are
Apache's TSSLSocket and TSSLServerSocket, set up as the suite's TestClient.py and
TestServer.py set them up (PROTOCOL_TLS_CLIENT / PROTOCOL_TLS_SERVER, CERT_REQUIRED):

  server: presents server.crt with server.key and requires a client certificate
      trusted by --client-ca (default client.pem, as TestServer.py).
  client: trusts server.pem, presents --client-cert (default client, i.e. client.crt
      with client.key, as TestClient.py), and checks the server's name against --host
      (default 127.0.0.1; the suite uses localhost).

Note: thrift 0.25's TSSLServerSocket also requires the client certificate to cover the
client's IP address with a subjectAltName (sslcompat.match_peer_ipaddress), which
Apache's client.crt (a v1 certificate without extensions) does not; so a client that
presents client.crt is refused by TestServer.py (Apache's own TestClient.py included).
client_v3.crt (self-signed, IP SANs 127.0.0.1, ::1) passes when the server trusts it:
--client-ca client_v3.crt.
"""

import argparse
import os
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import apache  # noqa: E402  (generate, fail)

ECHO_ERROR_CODE = 1


def load(gen_dir, thrift):
    apache.generate(gen_dir, thrift)
    apache.generate(gen_dir, thrift, ("second.thrift",))
    sys.path.insert(0, gen_dir)
    from thrift.protocol import TBinaryProtocol, TCompactProtocol, THeaderProtocol
    from thrift.protocol.TMultiplexedProtocol import TMultiplexedProtocol
    from thrift.transport import TSocket, TTransport, THeaderTransport
    from thrift.server import TServer
    from thrift.TMultiplexedProcessor import TMultiplexedProcessor
    from echo import EchoService, ttypes
    from second import SecondService

    return {
        "EchoService": EchoService,
        "SecondService": SecondService,
        "TMultiplexedProtocol": TMultiplexedProtocol,
        "TMultiplexedProcessor": TMultiplexedProcessor,
        "ttypes": ttypes,
        "TSocket": TSocket,
        "TServer": TServer,
        "transports": {
            "framed": (TTransport.TFramedTransport, TTransport.TFramedTransportFactory),
            "buffered": (TTransport.TBufferedTransport, TTransport.TBufferedTransportFactory),
        },
        "protocols": {
            "binary": TBinaryProtocol.TBinaryProtocolFactory(),
            "compact": TCompactProtocol.TCompactProtocolFactory(),
        },
        "THeaderProtocol": THeaderProtocol,
        "THeaderTransport": THeaderTransport,
    }


def header_factory(m, subprotocol="binary"):
    """THeaderProtocol's factory: every client type its server accepts, as Apache's
    test server allows them, and `subprotocol` for what a client writes."""
    ht = m["THeaderTransport"]
    allowed = (
        ht.THeaderClientType.HEADERS,
        ht.THeaderClientType.FRAMED_BINARY,
        ht.THeaderClientType.UNFRAMED_BINARY,
        ht.THeaderClientType.FRAMED_COMPACT,
        ht.THeaderClientType.UNFRAMED_COMPACT,
    )
    sub = {"binary": ht.THeaderSubprotocolID.BINARY, "compact": ht.THeaderSubprotocolID.COMPACT}
    return m["THeaderProtocol"].THeaderProtocolFactory(allowed, sub[subprotocol])


def protocol_factory(m, protocol, subprotocol="binary"):
    if protocol == "header":
        return header_factory(m, subprotocol)
    return m["protocols"][protocol]


class Handler:
    def __init__(self, t):
        self.t = t
        self.events = []

    def echo(self, req):
        return self.t.Response(action=req.action, msg=req.msg)

    def echo_test(self, t):
        return t

    def echo_ids(self, ids):
        return ids

    def echo_or_fail(self, req):
        if req.action == "fail":
            raise self.t.EchoError(code=ECHO_ERROR_CODE, message=req.msg)
        return self.t.Response(action=req.action, msg=req.msg)

    def notify(self, event):
        self.events.append(event)


class SecondHandler:
    """SecondService: echo answers "second:" + text; notify and ping record their event,
    and notify returns how many there are."""

    def __init__(self):
        self.events = []

    def echo(self, text):
        return "second:" + text

    def notify(self, event):
        self.events.append(event)
        return len(self.events)

    def ping(self, event):
        self.events.append(event)


def ssl_server_socket(keys, client_ca):
    import ssl
    from thrift.transport import TSSLSocket

    return TSSLSocket.TSSLServerSocket(
        host="127.0.0.1",
        port=0,
        certfile=os.path.join(keys, "server.crt"),
        keyfile=os.path.join(keys, "server.key"),
        ca_certs=os.path.join(keys, client_ca),
        cert_reqs=ssl.CERT_REQUIRED,
        ssl_version=ssl.PROTOCOL_TLS_SERVER,
    )


def ssl_client_socket(keys, client_cert, host, port):
    import ssl
    from thrift.transport import TSSLSocket

    return TSSLSocket.TSSLSocket(
        host,
        port,
        certfile=os.path.join(keys, client_cert + ".crt"),
        keyfile=os.path.join(keys, client_cert + ".key"),
        ca_certs=os.path.join(keys, "server.pem"),
        cert_reqs=ssl.CERT_REQUIRED,
        ssl_version=ssl.PROTOCOL_TLS_CLIENT,
    )


def cmd_server(m, transport, protocol, multiplexed, tls):
    if tls:
        sock = ssl_server_socket(tls["keys"], tls["client_ca"])
    else:
        sock = m["TSocket"].TServerSocket(host="127.0.0.1", port=0)
    sock.listen()
    port = sock.handle.getsockname()[1]
    sock.listen = lambda: None  # already listening: serve() must not bind again
    handler = Handler(m["ttypes"])
    processor = m["EchoService"].Processor(handler)
    if multiplexed:
        echo_processor = processor
        processor = m["TMultiplexedProcessor"]()
        processor.registerDefault(echo_processor)
        processor.registerProcessor("EchoService", echo_processor)
        processor.registerProcessor("SecondService", m["SecondService"].Processor(SecondHandler()))
    server = m["TServer"].TThreadedServer(
        processor, sock, m["transports"][transport][1](), protocol_factory(m, protocol), daemon=True
    )
    print(port, flush=True)
    threading.Thread(target=server.serve, daemon=True).start()
    # Serve until the parent closes stdin (or kills us).
    sys.stdin.read()


def cmd_client(m, host, port, transport, protocol, multiplexed, tls, subprotocol, zlib):
    t = m["ttypes"]
    if tls:
        sock = ssl_client_socket(tls["keys"], tls["client_cert"], host, port)
    else:
        sock = m["TSocket"].TSocket(host, port)
    sock.setTimeout(20000)
    trans = m["transports"][transport][0](sock)
    prot = protocol_factory(m, protocol, subprotocol).getProtocol(trans)
    if protocol == "header":
        if zlib:
            prot.add_transform(m["THeaderTransport"].THeaderTransformID.ZLIB)
        # Headers are sent with one request: set them again before each call.
        original_flush = prot.trans.flush

        def flush_with_header():
            prot.set_header(b"client", b"rpc.py")
            original_flush()

        prot.trans.flush = flush_with_header
    if multiplexed:
        client = m["EchoService"].Client(m["TMultiplexedProtocol"](prot, "EchoService"))
    else:
        client = m["EchoService"].Client(prot)
    trans.open()
    failures = []

    def check(name, got, want):
        ok = got == want
        print("%s %s" % ("ok  " if ok else "FAIL", name))
        if not ok:
            print("     got  %r\n     want %r" % (got, want))
            failures.append(name)

    call_every_method(t, client, check)
    if multiplexed:
        second = m["SecondService"].Client(m["TMultiplexedProtocol"](prot, "SecondService"))
        check("SecondService:echo", second.echo("hi"), "second:hi")
        before = second.notify("n1")
        second.ping("p")
        check("SecondService:notify counts the ping", second.notify("n2") - before, 2)
        r = client.echo(t.Request(action="echo", msg="again"))
        check("EchoService:echo after SecondService", (r.action, r.msg), ("echo", "again"))
        plain = m["EchoService"].Client(prot)
        r = plain.echo(t.Request(action="default", msg="service"))
        check("echo without a prefix (default service)", (r.action, r.msg), ("default", "service"))
    trans.close()
    if failures:
        print("%d check(s) failed: %s" % (len(failures), ", ".join(failures)))
        sys.exit(1)


def call_every_method(t, client, check):
    """EchoService's checks, through `client`."""
    r = client.echo(t.Request(action="hello", msg="wörld"))
    check("echo", (r.action, r.msg), ("hello", "wörld"))
    mt = t.MyTest(num=7, ano=t.Ano(num=-1), nums=list(range(-500, 500)))
    check("echo_test", client.echo_test(mt), mt)
    ids = t.Ids(ids32=[1, -2, 2**31 - 1], ids64=[-(2**63), 2**63 - 1], scores=[0.5, -1.25], blob=b"\x00\xffbin")
    check("echo_ids", client.echo_ids(ids), ids)
    r = client.echo_or_fail(t.Request(action="pass", msg="fine"))
    check("echo_or_fail (ok)", (r.action, r.msg), ("pass", "fine"))
    try:
        client.echo_or_fail(t.Request(action="fail", msg="on purpose"))
        check("echo_or_fail (fail)", "no exception", "EchoError")
    except t.EchoError as e:
        check("echo_or_fail (fail)", (e.code, e.message), (ECHO_ERROR_CODE, "on purpose"))
    client.notify("event-1")
    r = client.echo(t.Request(action="after", msg="notify"))
    check("echo after notify", (r.action, r.msg), ("after", "notify"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["server", "client"])
    p.add_argument("--port", type=int)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--ssl", action="store_true")
    p.add_argument("--keys-dir")
    p.add_argument("--client-ca", default="client.pem")
    p.add_argument("--client-cert", default="client")
    p.add_argument("--transport", choices=["framed", "buffered"], required=True)
    p.add_argument("--protocol", choices=["binary", "compact", "header"], required=True)
    p.add_argument("--header-protocol", choices=["binary", "compact"], default="binary")
    p.add_argument("--zlib", action="store_true")
    p.add_argument("--multiplexed", action="store_true")
    p.add_argument("--gen-dir")
    p.add_argument("--thrift", default=os.environ.get("THRIFT", "thrift"))
    a = p.parse_args()
    gen_dir = a.gen_dir or tempfile.mkdtemp(prefix="rpc-interop-")
    tls = None
    if a.ssl:
        if not a.keys_dir:
            apache.fail("--ssl needs --keys-dir")
        tls = {"keys": a.keys_dir, "client_ca": a.client_ca, "client_cert": a.client_cert}
    m = load(gen_dir, a.thrift)
    if a.command == "server":
        cmd_server(m, a.transport, a.protocol, a.multiplexed, tls)
    else:
        if a.port is None:
            apache.fail("client needs --port")
        cmd_client(m, a.host, a.port, a.transport, a.protocol, a.multiplexed, tls, a.header_protocol, a.zlib)


if __name__ == "__main__":
    main()
