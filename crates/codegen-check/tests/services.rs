//! The generated server side: service traits implemented as a user would, and the
//! generated dispatchers called as the `Service<ServerContext, ServerRequest>` the
//! server runs, directly (no sockets). Each reply must encode to exactly the bytes of
//! the result struct the IDL prescribes.

use std::any::TypeId;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use codegen_check::echo::{
    EchoError, EchoService, EchoServiceEchoArgs, EchoServiceEchoIdsArgs, EchoServiceEchoIdsResult,
    EchoServiceEchoOrFailArgs, EchoServiceEchoOrFailException, EchoServiceEchoOrFailResult,
    EchoServiceEchoResult, EchoServiceEchoTestArgs, EchoServiceNotifyArgs, EchoServiceReply,
    EchoServiceServer, Ids, MyTest, Request, Response,
};
use codegen_check::test_idls::{handlers, includes, services, shapes};
use thrift_wire::bytes::Bytes;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, DecodeErrorKind,
    LinkBuffer, Message, Protocol, Utf8Bytes,
};
use volo_core::codec::{Body, Framing, Protocol as WireProtocol};
use volo_core::context::ServerContext;
use volo_core::server::{Dispatch, DispatchError, ServerError, ServerRequest, ServiceInfo};

/// `EchoService` with the semantics its IDL states: every method answers its argument;
/// `echo_or_fail` fails with `EchoError` when `req.action == "fail"` (and, for these
/// tests, with an application error when it is `"crash"`); `notify` counts.
#[derive(Debug, Default)]
struct Echo {
    notified: Arc<AtomicUsize>,
}

impl EchoService for Echo {
    async fn echo(
        &self,
        _cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<Infallible>> {
        Ok(Response {
            action: req.action,
            msg: req.msg,
        })
    }

    async fn echo_test(
        &self,
        _cx: &mut ServerContext,
        t: MyTest,
    ) -> Result<MyTest, ServerError<Infallible>> {
        Ok(t)
    }

    async fn echo_ids(
        &self,
        _cx: &mut ServerContext,
        ids: Ids,
    ) -> Result<Ids, ServerError<Infallible>> {
        Ok(ids)
    }

    async fn echo_or_fail(
        &self,
        _cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<EchoServiceEchoOrFailException>> {
        match req.action.as_str() {
            "fail" => Err(ServerError::User(
                EchoError {
                    code: 7,
                    message: req.msg,
                }
                .into(),
            )),
            "crash" => Err(ServerError::internal("the handler crashed")),
            _ => Ok(Response {
                action: req.action,
                msg: req.msg,
            }),
        }
    }

    async fn notify(
        &self,
        _cx: &mut ServerContext,
        _event: Utf8Bytes,
    ) -> Result<(), ServerError<Infallible>> {
        self.notified.fetch_add(1, Ordering::Relaxed);
        // Dropped by the dispatcher: a oneway call gets no reply.
        Err(ServerError::internal("nobody hears this"))
    }
}

fn encode<P: Protocol, M: Message>(m: &M) -> Bytes {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(m, &mut buf).unwrap();
    buf.next(n)
}

/// The bytes of a reply, written through `Body` as the server writes it.
fn reply_bytes<P: Protocol, R: Body>(reply: &R) -> Bytes {
    let codec = Codec::<P>::new();
    let n = reply.size(&mut codec.sizer());
    let mut buf = LinkBuffer::new();
    buf.reserve(n);
    reply.encode(&mut codec.encoder(&mut buf));
    assert_eq!(buf.len(), n, "size() is exact");
    buf.next(n)
}

/// The context's name for protocol `P`.
fn wire_protocol<P: Protocol>() -> WireProtocol {
    if TypeId::of::<P>() == TypeId::of::<Compact>() {
        WireProtocol::Compact
    } else {
        WireProtocol::Binary
    }
}

/// Calls `method` with `args` (already encoded in `P`), as the server does after
/// reading a call's header: the method in the context, the arguments in the request.
async fn call<P: Protocol, S: Dispatch>(
    server: &S,
    method: &str,
    args: Bytes,
) -> Result<S::Reply, DispatchError> {
    let mut cx = ServerContext::new(Framing::Framed, wire_protocol::<P>());
    cx.rpc.method = text(method);
    server.call(&mut cx, ServerRequest::new(args)).await
}

fn text(s: &str) -> Utf8Bytes {
    Utf8Bytes::from(s.to_string())
}

fn request(action: &str, msg: &str) -> Request {
    Request {
        action: text(action),
        msg: text(msg),
    }
}

/// One call of `method` with `args`, whose reply must be `want` on the wire, in `P`.
async fn answers<P: Protocol, A: Message, R: Message>(method: &str, args: &A, want: &R) {
    let server = EchoServiceServer::new(Echo::default());
    let reply = call::<P, _>(&server, method, encode::<P, _>(args))
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(
        reply_bytes::<P, _>(&reply),
        encode::<P, _>(want),
        "{method}"
    );
}

#[tokio::test]
async fn a_call_is_answered_with_its_result_struct_in_both_protocols() {
    let args = EchoServiceEchoArgs {
        req: request("echo", "hello"),
    };
    let want = EchoServiceEchoResult {
        success: Some(Response {
            action: text("echo"),
            msg: text("hello"),
        }),
    };
    answers::<Binary, _, _>("echo", &args, &want).await;
    answers::<Compact, _, _>("echo", &args, &want).await;

    let ids = Ids {
        ids32: vec![1, -2, 3],
        ids64: vec![i64::MAX],
        scores: vec![0.5],
        blob: Bytes::from_static(b"\x00\x01"),
    };
    answers::<Binary, _, _>(
        "echo_ids",
        &EchoServiceEchoIdsArgs { ids: ids.clone() },
        &EchoServiceEchoIdsResult { success: Some(ids) },
    )
    .await;

    // The reply holds the result struct itself, not only its bytes.
    let server = EchoServiceServer::new(Echo::default());
    let args = EchoServiceEchoTestArgs {
        t: MyTest {
            num: 42,
            ..MyTest::default()
        },
    };
    match call::<Binary, _>(&server, "echo_test", encode::<Binary, _>(&args)).await {
        Ok(EchoServiceReply::EchoTest(r)) => assert_eq!(r.success, Some(args.t)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_declared_exception_goes_back_in_the_result_struct() {
    answers::<Binary, _, _>(
        "echo_or_fail",
        &EchoServiceEchoOrFailArgs {
            req: request("fail", "out of cheese"),
        },
        &EchoServiceEchoOrFailResult {
            success: None,
            err: Some(EchoError {
                code: 7,
                message: text("out of cheese"),
            }),
        },
    )
    .await;
    // And without the failure, the same method succeeds.
    answers::<Binary, _, _>(
        "echo_or_fail",
        &EchoServiceEchoOrFailArgs {
            req: request("echo", "fine"),
        },
        &EchoServiceEchoOrFailResult {
            success: Some(Response {
                action: text("echo"),
                msg: text("fine"),
            }),
            err: None,
        },
    )
    .await;
}

#[tokio::test]
async fn an_application_error_is_a_dispatch_error() {
    let server = EchoServiceServer::new(Echo::default());
    let args = EchoServiceEchoOrFailArgs {
        req: request("crash", ""),
    };
    match call::<Binary, _>(&server, "echo_or_fail", encode::<Binary, _>(&args)).await {
        Err(DispatchError::Application(e)) => {
            assert_eq!(e.kind, ApplicationExceptionKind::InternalError);
            assert_eq!(e.message.as_str(), "the handler crashed");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_method_is_refused_without_reading_its_arguments() {
    let server = EchoServiceServer::new(Echo::default());
    let args = encode::<Binary, _>(&EchoServiceEchoArgs {
        req: request("echo", "x"),
    });
    for method in ["missing", "Echo", "echo_or_fail_", ""] {
        let reply = call::<Binary, _>(&server, method, args.clone()).await;
        assert!(
            matches!(reply, Err(DispatchError::UnknownMethod)),
            "{method}: {reply:?}"
        );
    }
}

#[tokio::test]
async fn undecodable_arguments_are_a_decode_error() {
    let server = EchoServiceServer::new(Echo::default());
    // Cut short.
    let args = encode::<Binary, _>(&EchoServiceEchoArgs {
        req: request("echo", "cut short"),
    });
    match call::<Binary, _>(&server, "echo", args.slice(..args.len() - 3)).await {
        Err(DispatchError::Decode(_)) => {}
        other => panic!("{other:?}"),
    }
    // Another method's arguments: a `MyTest` stands where `echo` wants a `Request`,
    // whose required fields it lacks.
    let args = encode::<Binary, _>(&EchoServiceEchoTestArgs {
        t: MyTest::default(),
    });
    match call::<Binary, _>(&server, "echo", args).await {
        Err(DispatchError::Decode(e)) => {
            assert_eq!(e.kind(), &DecodeErrorKind::MissingRequiredField);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_oneway_call_runs_its_handler_and_replies_nothing() {
    let echo = Echo::default();
    let notified = Arc::clone(&echo.notified);
    let server = EchoServiceServer::new(echo);
    let args = encode::<Binary, _>(&EchoServiceNotifyArgs {
        event: text("tick"),
    });
    // The handler's error is dropped: nobody waits for it.
    let reply = call::<Binary, _>(&server, "notify", args).await.unwrap();
    assert_eq!(reply, EchoServiceReply::Oneway);
    assert_eq!(notified.load(Ordering::Relaxed), 1);
    assert!(reply_bytes::<Binary, _>(&reply).is_empty());
    assert_eq!(server.inner().notified.load(Ordering::Relaxed), 1);
}

/// `services.Base`, `services.Store` and `includes.Events` (which extends `Store`,
/// which extends `Base`) on one type.
#[derive(Debug, Default)]
struct Shelf;

impl services::Base for Shelf {
    async fn ping(&self, _cx: &mut ServerContext) -> Result<(), ServerError<Infallible>> {
        Ok(())
    }

    async fn version(&self, cx: &mut ServerContext) -> Result<Utf8Bytes, ServerError<Infallible>> {
        // The context is the dispatcher's: what the server knows about the call.
        Ok(text(&format!("1.0/{:?}", cx.protocol)))
    }
}

impl services::Store for Shelf {
    async fn put(
        &self,
        _cx: &mut ServerContext,
        key: Utf8Bytes,
        _value: shapes::Shape,
    ) -> Result<(), ServerError<services::StorePutException>> {
        if key.is_empty() {
            return Err(ServerError::User(
                shapes::Invalid {
                    reason: text("empty key"),
                    fields: None,
                }
                .into(),
            ));
        }
        Ok(())
    }

    async fn get(
        &self,
        _cx: &mut ServerContext,
        key: Utf8Bytes,
    ) -> Result<shapes::Shape, ServerError<services::StoreGetException>> {
        Err(ServerError::User(services::StoreGetException::Nf(
            shapes::NotFound { key, code: 404 },
        )))
    }

    async fn forget(
        &self,
        _cx: &mut ServerContext,
        _key: Utf8Bytes,
    ) -> Result<(), ServerError<Infallible>> {
        Ok(())
    }

    async fn rects(
        &self,
        _cx: &mut ServerContext,
        limit: i32,
        _prefix: Option<Utf8Bytes>,
    ) -> Result<Vec<shapes::Rect>, ServerError<Infallible>> {
        Ok(vec![shapes::Rect::default(); limit as usize])
    }

    async fn stats(
        &self,
        _cx: &mut ServerContext,
    ) -> Result<BTreeMap<Utf8Bytes, i64>, ServerError<Infallible>> {
        Ok(BTreeMap::new())
    }

    async fn exists(
        &self,
        _cx: &mut ServerContext,
        _key: Utf8Bytes,
    ) -> Result<bool, ServerError<Infallible>> {
        Ok(false)
    }

    async fn count(
        &self,
        _cx: &mut ServerContext,
        keys: Vec<Utf8Bytes>,
    ) -> Result<i32, ServerError<Infallible>> {
        Ok(keys.len() as i32)
    }
}

impl includes::Events for Shelf {
    async fn since(
        &self,
        _cx: &mut ServerContext,
        _at: i64,
    ) -> Result<Vec<includes::Event>, ServerError<includes::EventsSinceException>> {
        Ok(Vec::new())
    }
}

#[tokio::test]
async fn methods_inherited_through_extends_are_dispatched_to_their_trait() {
    let store = services::StoreServer::new(Shelf);
    // `version` is `Base`'s; its reply is `Base`'s result struct.
    let reply = call::<Binary, _>(
        &store,
        "version",
        encode::<Binary, _>(&services::BaseVersionArgs {}),
    )
    .await
    .unwrap();
    let want = services::BaseVersionResult {
        success: Some(text("1.0/Binary")),
    };
    assert_eq!(reply, services::StoreReply::Version(want.clone()));
    assert_eq!(reply_bytes::<Binary, _>(&reply), encode::<Binary, _>(&want));
    // A void method answers with an empty result struct.
    let reply = call::<Binary, _>(
        &store,
        "ping",
        encode::<Binary, _>(&services::BasePingArgs {}),
    )
    .await
    .unwrap();
    assert_eq!(
        reply,
        services::StoreReply::Ping(services::BasePingResult {})
    );
    assert_eq!(
        reply_bytes::<Binary, _>(&reply),
        encode::<Binary, _>(&services::BasePingResult {})
    );

    // Two files and two levels down: `Events` extends `Store` extends `Base`.
    let events = includes::EventsServer::new(Shelf);
    let reply = call::<Compact, _>(
        &events,
        "version",
        encode::<Compact, _>(&services::BaseVersionArgs {}),
    )
    .await
    .unwrap();
    // The handler sees the call's protocol in its context.
    let want = services::BaseVersionResult {
        success: Some(text("1.0/Compact")),
    };
    assert_eq!(reply, includes::EventsReply::Version(want));
    let args = services::StoreGetArgs { key: text("gone") };
    let reply = call::<Compact, _>(&events, "get", encode::<Compact, _>(&args))
        .await
        .unwrap();
    let want = services::StoreGetResult {
        success: None,
        nf: Some(shapes::NotFound {
            key: text("gone"),
            code: 404,
        }),
        bad: None,
    };
    assert_eq!(
        reply_bytes::<Compact, _>(&reply),
        encode::<Compact, _>(&want)
    );
    let reply = call::<Binary, _>(
        &events,
        "since",
        encode::<Binary, _>(&includes::EventsSinceArgs { at: 0 }),
    )
    .await
    .unwrap();
    assert_eq!(
        reply,
        includes::EventsReply::Since(includes::EventsSinceResult {
            success: Some(Vec::new()),
            nf: None,
        })
    );
    // Inherited oneway and void methods with exceptions.
    let reply = call::<Binary, _>(
        &events,
        "forget",
        encode::<Binary, _>(&services::StoreForgetArgs { key: text("k") }),
    )
    .await
    .unwrap();
    assert_eq!(reply, includes::EventsReply::Oneway);
    let put = services::StorePutArgs {
        key: text(""),
        value: shapes::Shape::default(),
    };
    let reply = call::<Binary, _>(&events, "put", encode::<Binary, _>(&put))
        .await
        .unwrap();
    let want = services::StorePutResult {
        invalid: Some(shapes::Invalid {
            reason: text("empty key"),
            fields: None,
        }),
    };
    assert_eq!(reply_bytes::<Binary, _>(&reply), encode::<Binary, _>(&want));
    // `since` is `Events`' own: `Store`'s dispatcher does not know it.
    assert!(matches!(
        call::<Binary, _>(
            &store,
            "since",
            encode::<Binary, _>(&includes::EventsSinceArgs { at: 0 })
        )
        .await,
        Err(DispatchError::UnknownMethod)
    ));
}

#[tokio::test]
async fn a_service_without_methods_knows_none() {
    #[derive(Debug)]
    struct Nothing;
    impl services::Empty for Nothing {}
    let server = services::EmptyServer::new(Nothing);
    let reply = call::<Binary, _>(
        &server,
        "ping",
        encode::<Binary, _>(&services::BasePingArgs {}),
    )
    .await;
    assert!(matches!(reply, Err(DispatchError::UnknownMethod)));
}

#[test]
fn declared_exceptions_convert_into_their_enum_and_display_as_themselves() {
    let e: services::StoreGetException = shapes::Invalid {
        reason: text("r"),
        fields: None,
    }
    .into();
    assert!(matches!(e, services::StoreGetException::Bad(_)));
    let err = EchoError {
        code: 1,
        message: text("m"),
    };
    let wrapped = EchoServiceEchoOrFailException::from(err.clone());
    assert_eq!(wrapped.to_string(), err.to_string());
    let _: &dyn std::error::Error = &wrapped;
    // An application error converts into any handler's error.
    let app: ServerError<Infallible> =
        ApplicationException::new(ApplicationExceptionKind::Unknown, "x").into();
    assert!(matches!(app, ServerError::Application(_)));
}

/// `handlers.T` extends `handlers.Tricky`, which extends `services.Empty`: names that
/// meet the generated ones.
#[derive(Debug)]
struct Tricky;

impl services::Empty for Tricky {}

impl handlers::Tricky for Tricky {
    async fn r#type(
        &self,
        cx: &mut ServerContext,
        cx_arg: i32,
        self_: Utf8Bytes,
        a: i64,
        args: i64,
        method: i64,
        inner: i64,
        r: i64,
        e: i64,
    ) -> Result<i32, ServerError<handlers::TrickyTypeException>> {
        assert_eq!(cx.framing, Framing::Framed);
        let sum = a + args + method + inner + r + e;
        match self_.as_str() {
            // The same exception type under two names: the variant says which field.
            "first" => Err(ServerError::User(handlers::TrickyTypeException::First(
                shapes::NotFound {
                    key: self_,
                    code: 1,
                },
            ))),
            "second" => Err(ServerError::User(handlers::TrickyTypeException::Second(
                shapes::NotFound {
                    key: self_,
                    code: 2,
                },
            ))),
            _ => Ok(cx_arg + sum as i32),
        }
    }

    async fn r#match(
        &self,
        _cx: &mut ServerContext,
        result: Option<shapes::Shape>,
    ) -> Result<(), ServerError<handlers::TrickyMatchException>> {
        match result {
            Some(_) => Ok(()),
            None => Err(ServerError::User(
                handlers::Oops {
                    why: text("no shape"),
                }
                .into(),
            )),
        }
    }

    async fn r#async(&self, _cx: &mut ServerContext) -> Result<Bytes, ServerError<Infallible>> {
        Ok(Bytes::from_static(b"async"))
    }
}

impl handlers::T for Tricky {
    async fn fire(
        &self,
        _cx: &mut ServerContext,
        _what: Utf8Bytes,
    ) -> Result<(), ServerError<Infallible>> {
        Ok(())
    }
}

#[tokio::test]
async fn names_that_meet_the_generated_ones_are_passed_through() {
    let server = handlers::TServer::new(Tricky);
    let args = |self_: &str| handlers::TrickyTypeArgs {
        cx: 100,
        self_: text(self_),
        a: 1,
        args: 2,
        method: 3,
        inner: 4,
        r: 5,
        e: 6,
    };
    let reply = call::<Binary, _>(&server, "type", encode::<Binary, _>(&args("sum")))
        .await
        .unwrap();
    match reply {
        handlers::TReply::Type(r) => assert_eq!(r.success, Some(121)),
        other => panic!("{other:?}"),
    }
    let reply = call::<Binary, _>(&server, "type", encode::<Binary, _>(&args("second")))
        .await
        .unwrap();
    let want = handlers::TrickyTypeResult {
        success: None,
        first: None,
        second: Some(shapes::NotFound {
            key: text("second"),
            code: 2,
        }),
        oops: None,
    };
    assert_eq!(reply_bytes::<Binary, _>(&reply), encode::<Binary, _>(&want));
    let reply = call::<Binary, _>(
        &server,
        "match",
        encode::<Binary, _>(&handlers::TrickyMatchArgs { result: None }),
    )
    .await
    .unwrap();
    let want = handlers::TrickyMatchResult {
        r#fn: Some(handlers::Oops {
            why: text("no shape"),
        }),
    };
    assert_eq!(reply, handlers::TReply::Match(want));
    let reply = call::<Binary, _>(
        &server,
        "fire",
        encode::<Binary, _>(&handlers::TFireArgs::default()),
    )
    .await
    .unwrap();
    assert_eq!(reply, handlers::TReply::Oneway);

    // A service of oneway methods only replies nothing, ever.
    #[derive(Debug)]
    struct Quiet;
    impl handlers::Oneways for Quiet {
        async fn fire(
            &self,
            _cx: &mut ServerContext,
            _what: Utf8Bytes,
        ) -> Result<(), ServerError<Infallible>> {
            Ok(())
        }
        async fn forget(&self, _cx: &mut ServerContext) -> Result<(), ServerError<Infallible>> {
            Ok(())
        }
    }
    let quiet = handlers::OnewaysServer::new(Quiet);
    let reply = call::<Binary, _>(
        &quiet,
        "forget",
        encode::<Binary, _>(&handlers::OnewaysForgetArgs {}),
    )
    .await
    .unwrap();
    assert_eq!(reply, handlers::OnewaysReply::Oneway);
    assert!(reply_bytes::<Binary, _>(&reply).is_empty());
}

/// What the server learns from a generated dispatcher before any layer wraps it: the
/// service's IDL name, and which methods are oneway, inherited ones included.
#[test]
fn generated_servers_tell_which_methods_are_oneway() {
    type Echo_ = EchoServiceServer<Echo>;
    assert_eq!(Echo_::NAME, "EchoService");
    assert!(Echo_::is_oneway("notify"));
    for method in ["echo", "echo_or_fail", "missing", ""] {
        assert!(!Echo_::is_oneway(method), "{method}");
    }
    // `forget` is `Store`'s, inherited by `Events`.
    assert_eq!(includes::EventsServer::<Shelf>::NAME, "Events");
    assert!(includes::EventsServer::<Shelf>::is_oneway("forget"));
    assert!(!includes::EventsServer::<Shelf>::is_oneway("since"));
    assert!(services::StoreServer::<Shelf>::is_oneway("forget"));
    assert!(!services::BaseServer::<Shelf>::is_oneway("ping"));
    assert!(!services::EmptyServer::<Tricky>::is_oneway("ping"));
    // By IDL name, not Rust name.
    assert!(handlers::TServer::<Tricky>::is_oneway("fire"));
    assert!(!handlers::TServer::<Tricky>::is_oneway("type"));
    assert!(handlers::OnewaysServer::<()>::is_oneway("forget"));
}
