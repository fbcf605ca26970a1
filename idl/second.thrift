// A second service for the multiplexed-protocol interop test (examples/tests/interop.rs,
// interop/rpc.py with --multiplexed): one server serves it beside EchoService
// (idl/echo.thrift), each call routed by its `Service:method` name. It has two of
// EchoService's method names with other arguments and answers, so that a call routed to
// the wrong service fails; `notify` is answered here, while it is oneway in EchoService.
namespace rs second
namespace py second

service SecondService {
    // Returns "second:" followed by `text`.
    string echo(1: string text),
    // Records `event`; returns how many events (`notify` and `ping`) this service has
    // received, this one included.
    i32 notify(1: string event),
    // Records `event`; no reply.
    oneway void ping(1: string event),
}
