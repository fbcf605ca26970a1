//! Generic servers of `idl/echo.thrift` answering the generated echo client: JSON and
//! value handlers, every protocol, declared and application exceptions, oneway calls,
//! methods the IDL lacks, answers that do not fit, and an IDL that reloads.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

mod support;

use bytes::Bytes;
use examples::echo::{EchoServiceClient, EchoServiceEchoOrFailException, Request};
use thrift_dynamic::value::{StructValue, Value};
use thrift_dynamic::{Descriptor, IdlProvider};
use thrift_generic::{
    GenericClient, GenericError, GenericService, JsonCall, JsonHandler, Thrown, ValueCall,
    ValueHandler,
};
use thrift_wire::{ApplicationException, ApplicationExceptionKind, Utf8Bytes};
use volo_core::client::{Client, ClientConfig, ClientContext, ClientError};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::{Address, ServerContext};
use volo_core::server::{Dispatch, Server, ServiceFacts};

fn echo_idl() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/echo.thrift")
}

fn descriptor() -> Descriptor {
    Descriptor::from_files(&[echo_idl()], &[] as &[PathBuf]).unwrap()
}

fn config(protocol: Protocol) -> ClientConfig {
    let mut config = ClientConfig::default();
    config.format.protocol = protocol;
    if protocol == Protocol::Json {
        // TTHeader has no protocol id for Apache's JSON protocol.
        config.format.framing = Framing::Framed;
    }
    config
}

/// Runs `f` with `service` served on a loopback port, bounded in time.
fn serving<D, F, Fut>(service: D, facts: ServiceFacts, f: F)
where
    D: Dispatch,
    F: FnOnce(Address) -> Fut,
    Fut: Future<Output = ()>,
{
    support::served(
        Server::with_facts(service, facts).bind(&support::loopback()),
        f,
    );
}

fn generated(addr: &Address, protocol: Protocol) -> EchoServiceClient {
    EchoServiceClient::builder()
        .address(addr.clone())
        .config(config(protocol))
        .build()
        .unwrap()
}

/// Echo's methods in JSON: the handler reads its arguments with serde_json, as a
/// gateway's code would.
#[derive(Default)]
struct JsonEcho {
    notified: AtomicUsize,
    /// When set, `echo` answers this instead.
    answer: Option<&'static str>,
}

impl JsonHandler for JsonEcho {
    async fn call(&self, _cx: &mut ServerContext, call: JsonCall) -> Result<Bytes, Thrown<Bytes>> {
        let args: serde_json::Value = serde_json::from_slice(&call.args).unwrap();
        match call.method.as_str() {
            "echo" if self.answer.is_some() => Ok(Bytes::from_static(
                self.answer.unwrap_or_default().as_bytes(),
            )),
            "echo" | "echo_or_fail" => {
                let req = &args["req"];
                if req["action"] == "fail" {
                    let e = serde_json::json!({"code": 7, "message": req["msg"]});
                    return Err(Thrown::Declared {
                        field: "err".into(),
                        exception: serde_json::to_vec(&e).unwrap().into(),
                    });
                }
                if req["action"] == "crash" {
                    return Err(Thrown::Application(ApplicationException::new(
                        ApplicationExceptionKind::InternalError,
                        "crashed on purpose",
                    )));
                }
                Ok(serde_json::to_vec(req).unwrap().into())
            }
            "notify" => {
                assert_eq!(args, serde_json::json!({"event": "e"}));
                self.notified.fetch_add(1, Ordering::SeqCst);
                Ok(Bytes::new())
            }
            other => panic!("unexpected method {other}"),
        }
    }
}

fn req(action: &str, msg: &str) -> Request {
    let (action, msg) = (action.to_string(), msg.to_string());
    Request {
        action: action.into(),
        msg: msg.into(),
    }
}

#[test]
fn a_json_handler_answers_the_generated_client_in_every_protocol() {
    for protocol in [Protocol::Binary, Protocol::Compact, Protocol::Json] {
        let service =
            GenericService::json(descriptor(), "EchoService", JsonEcho::default()).unwrap();
        let facts = service.facts();
        serving(service, facts, |addr| async move {
            let client = generated(&addr, protocol);
            let got = client.echo(req("echo", "h\u{e9} \"q\"")).await.unwrap();
            assert_eq!(
                (got.action.as_str(), got.msg.as_str()),
                ("echo", "h\u{e9} \"q\""),
                "{protocol:?}"
            );
        });
    }
}

#[test]
fn declared_and_application_exceptions_reach_the_caller_as_the_idl_says() {
    for protocol in [Protocol::Binary, Protocol::Compact, Protocol::Json] {
        let service =
            GenericService::json(descriptor(), "EchoService", JsonEcho::default()).unwrap();
        let facts = service.facts();
        serving(service, facts, |addr| async move {
            let client = generated(&addr, protocol);
            let err = client.echo_or_fail(req("fail", "boom")).await.unwrap_err();
            let ClientError::User(EchoServiceEchoOrFailException::Err(e)) = err else {
                panic!("{err:?}")
            };
            assert_eq!((e.code, e.message.as_str()), (7, "boom"), "{protocol:?}");

            let err = client.echo_or_fail(req("crash", "")).await.unwrap_err();
            let ClientError::Rpc(e) = err else {
                panic!("{err:?}")
            };
            let ex = e.application_exception().unwrap();
            assert_eq!(ex.kind, ApplicationExceptionKind::InternalError);
            assert_eq!(ex.message.as_str(), "crashed on purpose");
        });
    }
}

#[test]
fn a_oneway_call_reaches_the_handler_and_gets_no_reply() {
    let service = GenericService::json(descriptor(), "EchoService", JsonEcho::default()).unwrap();
    let facts = service.facts();
    assert!(facts.is_oneway("notify") && !facts.is_oneway("echo"));
    let handler = service.clone();
    serving(service, facts, |addr| async move {
        let client = generated(&addr, Protocol::Compact);
        client.notify(Utf8Bytes::from_static("e")).await.unwrap();
        // The next call on the connection reads its own reply, not one for notify.
        let got = client.echo(req("echo", "after")).await.unwrap();
        assert_eq!(got.msg.as_str(), "after");
        let mut waited = 0;
        while handler.handler().0.notified.load(Ordering::SeqCst) == 0 {
            waited += 1;
            assert!(waited < 500, "notify never arrived");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

/// A handler's JSON that is not the method's return type is an `INTERNAL_ERROR`
/// naming the field; a method the IDL lacks is `UNKNOWN_METHOD`.
#[test]
fn answers_that_do_not_fit_and_unknown_methods_are_application_exceptions() {
    let handler = JsonEcho {
        answer: Some(r#"{"action":"echo","msg":5}"#),
        ..JsonEcho::default()
    };
    let service = GenericService::json(descriptor(), "EchoService", handler).unwrap();
    let facts = service.facts();
    serving(service, facts, |addr| async move {
        let err = generated(&addr, Protocol::Binary)
            .echo(req("echo", "x"))
            .await
            .unwrap_err();
        let ClientError::Rpc(e) = err;
        let ex = e.application_exception().unwrap();
        assert_eq!(ex.kind, ApplicationExceptionKind::InternalError);
        assert!(
            ex.message.as_str().contains("msg"),
            "{}",
            ex.message.as_str()
        );

        // A client whose IDL has one method more than the server's.
        let bigger = Descriptor::from_text(
            "echo.thrift",
            "service EchoService { string extra(1: string s) }",
        )
        .unwrap();
        let client = Client::builder("EchoService")
            .address(addr.clone())
            .build()
            .unwrap();
        let generic = GenericClient::new(client, bigger, "EchoService").unwrap();
        let err = generic
            .call_json(&mut ClientContext::new(), "extra", br#"{"s":"x"}"#)
            .await
            .unwrap_err();
        let GenericError::Call(e) = err else {
            panic!("{err}")
        };
        let ex = e.application_exception().unwrap();
        assert_eq!(ex.kind, ApplicationExceptionKind::UnknownMethod);
    });
}

/// Echo's `echo` and `echo_or_fail` on values.
struct ValueEcho;

impl ValueHandler for ValueEcho {
    async fn call(
        &self,
        _cx: &mut ServerContext,
        call: ValueCall,
    ) -> Result<Option<Value>, Thrown<StructValue>> {
        let Some(Value::Struct(req)) = call.args.get(1) else {
            return Ok(None);
        };
        if call.method.as_str() == "echo_ids" {
            // No value, for a method that returns one.
            return Ok(None);
        }
        if req.get(1) == Some(&Value::String(Utf8Bytes::from_static("fail"))) {
            let e = StructValue::new()
                .with(1, Value::I32(9))
                .with(2, req.get(2).cloned().unwrap_or(Value::I32(0)));
            return Err(Thrown::Declared {
                field: "err".into(),
                exception: e,
            });
        }
        Ok(Some(Value::Struct(req.clone())))
    }
}

#[test]
fn a_value_handler_answers_in_every_protocol() {
    for protocol in [Protocol::Binary, Protocol::Compact, Protocol::Json] {
        let service = GenericService::values(descriptor(), "EchoService", ValueEcho).unwrap();
        let facts = service.facts();
        serving(service, facts, |addr| async move {
            let client = generated(&addr, protocol);
            let got = client.echo(req("echo", "v")).await.unwrap();
            assert_eq!(got.msg.as_str(), "v", "{protocol:?}");
            let err = client.echo_or_fail(req("fail", "bad")).await.unwrap_err();
            let ClientError::User(EchoServiceEchoOrFailException::Err(e)) = err else {
                panic!("{err:?}")
            };
            assert_eq!((e.code, e.message.as_str()), (9, "bad"));
            // A handler that gives no value for a method that returns one.
            let err = client.echo_ids(Default::default()).await.unwrap_err();
            let ClientError::Rpc(e) = err;
            let ex = e.application_exception().unwrap();
            assert_eq!(ex.kind, ApplicationExceptionKind::InternalError);
        });
    }
}

/// Answers `shout` (a method echo's IDL gets in these tests) with its argument in
/// capitals.
struct Shout;

impl JsonHandler for Shout {
    async fn call(&self, _: &mut ServerContext, call: JsonCall) -> Result<Bytes, Thrown<Bytes>> {
        let args: serde_json::Value = serde_json::from_slice(&call.args).unwrap();
        let s = args["s"].as_str().unwrap_or_default().to_uppercase();
        Ok(serde_json::to_vec(&s).unwrap().into())
    }
}

/// Echo's IDL with `string shout(1: string s)` added to its service.
fn with_shout(text: &str) -> String {
    text.replace(
        "service EchoService {",
        "service EchoService {\n    string shout(1: string s),",
    )
}

/// A method added to the IDL file is served once the provider reloads it, without a
/// restart.
#[test]
fn a_method_added_to_the_idl_is_served_after_a_reload() {
    let dir = std::env::temp_dir().join(format!("generic-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("echo.thrift");
    let text = std::fs::read_to_string(echo_idl()).unwrap();
    std::fs::write(&file, &text).unwrap();
    let provider = Arc::new(IdlProvider::new(&[&file], &[] as &[PathBuf]).unwrap());

    let service = GenericService::json(Arc::clone(&provider), "EchoService", Shout).unwrap();
    let facts = service.facts();
    serving(service, facts, |addr| async move {
        let bigger = with_shout(&text);
        let client = Client::builder("EchoService")
            .address(addr.clone())
            .build()
            .unwrap();
        let client_idl = Descriptor::from_text("echo.thrift", &bigger).unwrap();
        let generic = GenericClient::new(client, client_idl, "EchoService").unwrap();
        let call = || async {
            generic
                .call_json(&mut ClientContext::new(), "shout", br#"{"s":"hey"}"#)
                .await
        };
        assert!(matches!(call().await, Err(GenericError::Call(_))));
        std::fs::write(&file, &bigger).unwrap();
        assert!(provider.reload().unwrap());
        assert_eq!(&call().await.unwrap()[..], br#""HEY""#);
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One process serves some methods from generated code and the rest from an IDL
/// read at run time: the generic service is the generated dispatcher's fallback.
#[test]
fn a_generic_service_answers_what_the_generated_dispatcher_does_not_know() {
    let text = with_shout(&std::fs::read_to_string(echo_idl()).unwrap());
    let bigger = Descriptor::from_text("echo.thrift", &text).unwrap();
    let generic = GenericService::json(bigger.clone(), "EchoService", Shout).unwrap();
    let known = examples::echo::EchoServiceServer::new(examples::echo_service::Echo::default());
    let both = volo_core::server::with_fallback(known, generic);
    let facts =
        ServiceFacts::of::<examples::echo::EchoServiceServer<examples::echo_service::Echo>>();
    serving(both, facts, |addr| async move {
        let client = Client::builder("EchoService")
            .address(addr.clone())
            .build()
            .unwrap();
        let generic = GenericClient::new(client, bigger, "EchoService").unwrap();
        let shout = generic
            .call_json(&mut ClientContext::new(), "shout", br#"{"s":"hey"}"#)
            .await
            .unwrap();
        assert_eq!(&shout[..], br#""HEY""#);
        let echo = generic
            .call_json(
                &mut ClientContext::new(),
                "echo",
                br#"{"req":{"action":"echo","msg":"m"}}"#,
            )
            .await
            .unwrap();
        assert_eq!(&echo[..], br#"{"action":"echo","msg":"m"}"#);
    });
}
