// The streaming service of the examples, benchmarks and Kitex interop checks: streams
// over TTHeader as Kitex's StreamX speaks them (the `streaming.mode` annotation), beside
// a ping-pong echo of the same messages for comparison.
namespace rs stream
// Not `stream` in Go: the code Kitex's generator writes names a local variable
// `stream`, which would shadow a package of that name.
namespace go kstream

struct Request {
    1: required string action,
    2: required string msg,
    // How many answers a server stream sends.
    3: i32 count,
}

struct Response {
    1: required string action,
    2: required string msg,
}

// Metadata, on every stream: the server's header carries back the value of the
// client's header key "x-echo" under the same key, when the client sent one.
service StreamService {
    // Ping-pong: answers {action, msg} of the request.
    Response echo(1: Request req),
    // Server stream: answers `count` times with {action, msg} of the request, then ends.
    // With action "fail" it then ends with an error whose message is `msg`; with action
    // "bizfail", with business status 1001 and message `msg`; with action "slow" it
    // waits 100 ms before each answer.
    Response server_echo(1: Request req) (streaming.mode = "server"),
    // Client stream: takes requests until the client ends its side, then answers once
    // with action "received" and msg the count of requests, in decimal. A request with
    // action "fail" ends the stream with an error whose message is its `msg`.
    Response client_count(1: Request req) (streaming.mode = "client"),
    // Bidirectional: answers each request with its {action, msg}, in order. A request
    // with action "fail" ends the stream with an error whose message is its `msg`; one
    // with action "bizfail", with business status 1001 and message `msg`.
    Response bidi_echo(1: Request req) (streaming.mode = "bidirectional"),
}
