//! A generic client against the generated echo server of `idl/echo.thrift`: values and
//! bytes in and out, declared exceptions, oneway calls, and calls refused before they
//! are sent.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

mod support;

use bytes::Bytes;
use examples::echo::{EchoServiceEchoArgs, EchoServiceEchoResult, EchoServiceServer, Request};
use examples::echo_service::Echo;
use thrift_dynamic::Descriptor;
use thrift_dynamic::value::{StructValue, Value, ValueError};
use thrift_generic::{GenericClient, GenericError};
use thrift_wire::{Codec, Compact, LinkBuffer, Utf8Bytes};
use volo_core::client::{Client, ClientConfig, ClientContext};
use volo_core::codec::{Framing, Protocol};
use volo_core::server::Server;

fn descriptor() -> Descriptor {
    let idl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/echo.thrift");
    Descriptor::from_files(&[idl], &[] as &[PathBuf]).unwrap()
}

fn s(t: &str) -> Value {
    Value::String(Utf8Bytes::from(t.to_string()))
}

fn request(action: &str, msg: &str) -> StructValue {
    StructValue::new().with(
        1,
        Value::Struct(StructValue::new().with(1, s(action)).with(2, s(msg))),
    )
}

/// Runs `f` with the echo server on a loopback port and a generic client of it in
/// `protocol`, bounded in time.
fn with_echo<F, Fut>(protocol: Protocol, f: F)
where
    F: FnOnce(GenericClient<volo_core::client::DefaultStack>, Echo) -> Fut,
    Fut: Future<Output = ()>,
{
    let echo = Echo::default();
    let server = Server::new(EchoServiceServer::new(echo.clone()));
    support::served(server.bind(&support::loopback()), |addr| async move {
        let mut config = ClientConfig::default();
        config.format.protocol = protocol;
        if protocol == Protocol::Json {
            // TTHeader has no protocol id for Apache's JSON protocol.
            config.format.framing = Framing::Framed;
        }
        let client = Client::builder("EchoService")
            .address(addr)
            .config(config)
            .build()
            .unwrap();
        let generic = GenericClient::new(client, descriptor(), "EchoService").unwrap();
        f(generic, echo).await;
    });
}

/// A oneway call is done once sent: waits (bounded) for the server to count it.
async fn notify_arrives(echo: &Echo) {
    let mut waited = 0;
    while echo.notified() == 0 {
        waited += 1;
        assert!(waited < 500, "notify never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn values_go_in_and_the_return_value_comes_back() {
    for protocol in [Protocol::Binary, Protocol::Compact] {
        with_echo(protocol, |client, _| async move {
            let got = client
                .call_value(&mut ClientContext::new(), "echo", request("echo", "hi"))
                .await
                .unwrap();
            let want = StructValue::new().with(1, s("echo")).with(2, s("hi"));
            assert_eq!(got, Some(Value::Struct(want)), "{protocol:?}");
        });
    }
}

#[test]
fn a_declared_exception_comes_back_typed() {
    with_echo(Protocol::Binary, |client, _| async move {
        let err = client
            .call_value(
                &mut ClientContext::new(),
                "echo_or_fail",
                request("fail", "boom"),
            )
            .await
            .unwrap_err();
        let GenericError::Declared {
            method,
            field,
            exception,
            value,
        } = err
        else {
            panic!("{err}")
        };
        assert_eq!((method.as_str(), field.as_str()), ("echo_or_fail", "err"));
        assert_eq!(exception, "EchoError");
        assert_eq!(
            value,
            StructValue::new()
                .with(1, Value::I32(examples::echo_service::ECHO_ERROR_CODE))
                .with(2, s("boom"))
        );
    });
}

#[test]
fn a_oneway_call_gets_no_reply_and_reaches_the_server() {
    with_echo(Protocol::Binary, |client, echo| async move {
        let args = StructValue::new().with(1, s("event"));
        let got = client
            .call_value(&mut ClientContext::new(), "notify", args)
            .await
            .unwrap();
        assert_eq!(got, None);
        notify_arrives(&echo).await;
    });
}

/// The encoded arguments go as they are; the encoded result comes back as it came:
/// what the generated types encode and decode.
#[test]
fn bytes_pass_through_both_ways() {
    with_echo(Protocol::Compact, |client, _| async move {
        let args = EchoServiceEchoArgs {
            req: Request {
                action: "echo".into(),
                msg: "raw".into(),
            },
        };
        let codec = Codec::<Compact>::new();
        let mut buf = LinkBuffer::new();
        let n = codec.encode(&args, &mut buf).unwrap();
        let reply = client
            .call_binary(&mut ClientContext::new(), "echo", buf.next(n))
            .await
            .unwrap();
        let result: EchoServiceEchoResult = codec.decode(reply).unwrap();
        let response = result.success.unwrap();
        assert_eq!(
            (response.action.as_str(), response.msg.as_str()),
            ("echo", "raw")
        );
    });
}

/// A method the IDL does not have, or arguments that do not fit, fail before
/// anything is sent; so does a service the IDL does not have.
#[test]
fn calls_that_do_not_fit_the_idl_are_refused_unsent() {
    with_echo(Protocol::Binary, |client, _| async move {
        let err = client
            .call_value(&mut ClientContext::new(), "nope", StructValue::new())
            .await
            .unwrap_err();
        assert!(matches!(err, GenericError::UnknownMethod { .. }), "{err}");
        let err = client
            .call_binary(&mut ClientContext::new(), "nope", Bytes::new())
            .await
            .unwrap_err();
        assert!(matches!(err, GenericError::UnknownMethod { .. }), "{err}");

        let bad = StructValue::new().with(1, Value::Struct(StructValue::new().with(1, s("echo"))));
        let err = client
            .call_value(&mut ClientContext::new(), "echo", bad)
            .await
            .unwrap_err();
        let GenericError::Args { source, .. } = &err else {
            panic!("{err}")
        };
        assert!(matches!(source, ValueError::MissingRequired { field, .. } if field == "msg"));
        assert_eq!(
            err.to_string(),
            "the arguments of echo: echo_args.req: the required field msg is missing"
        );

        let client = client.client().clone();
        let err = GenericClient::new(client, descriptor(), "Nope").unwrap_err();
        assert!(matches!(err, GenericError::UnknownService(_)), "{err}");
    });
}

/// JSON in, JSON out, in every protocol; also when the generic client was told
/// another protocol than its stack writes (the arguments are re-encoded).
#[test]
fn json_goes_in_and_the_return_value_comes_back_as_json() {
    let said = [
        (Protocol::Binary, Protocol::Binary),
        (Protocol::Compact, Protocol::Compact),
        (Protocol::Json, Protocol::Json),
        (Protocol::Compact, Protocol::Binary),
        (Protocol::Binary, Protocol::Json),
    ];
    for (stack, told) in said {
        with_echo(stack, |client, _| async move {
            let client = client.with_protocol(told);
            let got = client
                .call_json(
                    &mut ClientContext::new(),
                    "echo",
                    br#"{"req":{"action":"echo","msg":"h\u00e9 \"you\""}}"#,
                )
                .await
                .unwrap();
            assert_eq!(
                std::str::from_utf8(&got).unwrap(),
                r#"{"action":"echo","msg":"hé \"you\""}"#,
                "stack {stack:?}, told {told:?}"
            );
            let ids = br#"{"ids":{"ids32":[1,-2],"ids64":["9007199254740993"],"blob":"AAEC"}}"#;
            let got = client
                .call_json(&mut ClientContext::new(), "echo_ids", ids)
                .await
                .unwrap();
            assert_eq!(
                std::str::from_utf8(&got).unwrap(),
                // The generated server writes its empty `scores` list.
                r#"{"ids32":[1,-2],"ids64":[9007199254740993],"scores":[],"blob":"AAEC"}"#
            );
        });
    }
}

#[test]
fn a_declared_exception_comes_back_as_json() {
    for protocol in [Protocol::Binary, Protocol::Compact] {
        with_echo(protocol, |client, _| async move {
            let err = client
                .with_protocol(protocol)
                .call_json(
                    &mut ClientContext::new(),
                    "echo_or_fail",
                    br#"{"req":{"action":"fail","msg":"boom"}}"#,
                )
                .await
                .unwrap_err();
            let GenericError::DeclaredJson {
                method,
                field,
                exception,
                json,
            } = err
            else {
                panic!("{err}")
            };
            assert_eq!(
                (method.as_str(), field.as_str(), exception.as_str()),
                ("echo_or_fail", "err", "EchoError")
            );
            let code = examples::echo_service::ECHO_ERROR_CODE;
            assert_eq!(
                std::str::from_utf8(&json).unwrap(),
                format!(r#"{{"code":{code},"message":"boom"}}"#)
            );
        });
    }
}

#[test]
fn a_oneway_json_call_answers_null_and_reaches_the_server() {
    with_echo(Protocol::Compact, |client, echo| async move {
        let got = client
            .with_protocol(Protocol::Compact)
            .call_json(&mut ClientContext::new(), "notify", br#"{"event":"e"}"#)
            .await
            .unwrap();
        assert_eq!(&got[..], b"null");
        notify_arrives(&echo).await;
    });
}

/// JSON that does not fit the arguments struct fails with its path and offset, and
/// nothing is sent (`JsonArgs` comes only from the transcoding before the send).
#[test]
fn json_that_does_not_fit_is_refused_unsent() {
    with_echo(Protocol::Binary, |client, _| async move {
        let err = client
            .call_json(
                &mut ClientContext::new(),
                "notify",
                br#"{"event":"e", "extra": [1, }"#,
            )
            .await
            .unwrap_err();
        let GenericError::JsonArgs { method, source } = &err else {
            panic!("{err}")
        };
        assert_eq!(method, "notify");
        assert_eq!(source.offset(), Some(27));
        let err = client
            .call_json(
                &mut ClientContext::new(),
                "echo",
                br#"{"req":{"action":"x"}}"#,
            )
            .await
            .unwrap_err();
        let GenericError::JsonArgs { source, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(source.path(), "req");
        assert!(err.to_string().contains("msg"), "{err}");
    });
}

/// Kitex's form: the one argument's value, not an object keyed by argument name.
#[test]
fn a_kitex_style_call_gives_the_one_argument_alone() {
    with_echo(Protocol::Compact, |client, _| async move {
        let client = client.with_protocol(Protocol::Compact);
        let got = client
            .call_json_arg(
                &mut ClientContext::new(),
                "echo",
                br#"{"action":"k","msg":"itex"}"#,
            )
            .await
            .unwrap();
        assert_eq!(&got[..], br#"{"action":"k","msg":"itex"}"#);
        let got = client
            .call_json_arg(&mut ClientContext::new(), "notify", br#""e""#)
            .await
            .unwrap();
        assert_eq!(&got[..], b"null");
        // Errors point into the argument's own text.
        let err = client
            .call_json_arg(&mut ClientContext::new(), "echo", br#"{"action":1}"#)
            .await
            .unwrap_err();
        let GenericError::JsonArgs { source, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(source.offset(), Some(10));
        assert_eq!(source.path(), "req.action");
    });
    let idl = Descriptor::from_text("two.thrift", "service Two { void two(1: i32 a, 2: i32 b) }")
        .unwrap();
    with_echo(Protocol::Binary, |client, _| async move {
        let two = GenericClient::new(client.client().clone(), idl, "Two").unwrap();
        let err = two
            .call_json_arg(&mut ClientContext::new(), "two", b"1")
            .await
            .unwrap_err();
        assert!(
            matches!(err, GenericError::NotOneArgument { count: 2, .. }),
            "{err}"
        );
    });
}
