#!/usr/bin/env python3
"""RPC interop with Apache Thrift's Python library: idl/echo.thrift's EchoService.

  server --transport framed|buffered --protocol binary|compact|header
      Serves EchoService with the semantics written in the IDL (echo_or_fail fails with
      EchoError{code = 1, message = req.msg} when req.action == "fail"; notify is oneway
      and records the event). Listens on 127.0.0.1, an ephemeral port, prints the port
      on the first line of stdout, and serves until killed or until stdin closes. With
      `header`, Apache's THeaderProtocol as its test server sets it up: THeader clients
      in either subprotocol, and also plain framed or unframed Binary or Compact ones,
      each answered in kind.

  client --port N --transport framed|buffered --protocol binary|compact|header
         [--header-protocol binary|compact] [--zlib]
      Calls every method of a server at 127.0.0.1:N and checks every answer: echo,
      echo_test (a MyTest with 1,000 numbers), echo_ids, echo_or_fail with an ordinary
      request and with action "fail" (the EchoError must arrive as the declared
      exception), notify (oneway), then echo again on the same connection (a oneway got no
      reply that could be mistaken for the next one). Prints one line per check; exits 1
      if any failed. With `header`: Apache's THeaderProtocol in the given subprotocol
      (default binary), every request compressed with the zlib transform when --zlib
      is given, and an info header ("client" = "rpc.py") on every request.

Common options: --gen-dir DIR and --thrift PATH, as for apache.py.
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
    sys.path.insert(0, gen_dir)
    from thrift.protocol import TBinaryProtocol, TCompactProtocol, THeaderProtocol
    from thrift.transport import TSocket, TTransport, THeaderTransport
    from thrift.server import TServer
    from echo import EchoService, ttypes

    return {
        "EchoService": EchoService,
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


def cmd_server(m, transport, protocol):
    sock = m["TSocket"].TServerSocket(host="127.0.0.1", port=0)
    sock.listen()
    port = sock.handle.getsockname()[1]
    sock.listen = lambda: None  # already listening: serve() must not bind again
    handler = Handler(m["ttypes"])
    processor = m["EchoService"].Processor(handler)
    server = m["TServer"].TThreadedServer(
        processor, sock, m["transports"][transport][1](), protocol_factory(m, protocol), daemon=True
    )
    print(port, flush=True)
    threading.Thread(target=server.serve, daemon=True).start()
    # Serve until the parent closes stdin (or kills us).
    sys.stdin.read()


def cmd_client(m, port, transport, protocol, subprotocol, zlib):
    t = m["ttypes"]
    sock = m["TSocket"].TSocket("127.0.0.1", port)
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
    client = m["EchoService"].Client(prot)
    trans.open()
    failures = []

    def check(name, got, want):
        ok = got == want
        print("%s %s" % ("ok  " if ok else "FAIL", name))
        if not ok:
            print("     got  %r\n     want %r" % (got, want))
            failures.append(name)

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
    trans.close()
    if failures:
        print("%d check(s) failed: %s" % (len(failures), ", ".join(failures)))
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["server", "client"])
    p.add_argument("--port", type=int)
    p.add_argument("--transport", choices=["framed", "buffered"], required=True)
    p.add_argument("--protocol", choices=["binary", "compact", "header"], required=True)
    p.add_argument("--header-protocol", choices=["binary", "compact"], default="binary")
    p.add_argument("--zlib", action="store_true")
    p.add_argument("--gen-dir")
    p.add_argument("--thrift", default=os.environ.get("THRIFT", "thrift"))
    a = p.parse_args()
    gen_dir = a.gen_dir or tempfile.mkdtemp(prefix="rpc-interop-")
    m = load(gen_dir, a.thrift)
    if a.command == "server":
        cmd_server(m, a.transport, a.protocol)
    else:
        if a.port is None:
            apache.fail("client needs --port")
        cmd_client(m, a.port, a.transport, a.protocol, a.header_protocol, a.zlib)


if __name__ == "__main__":
    main()
