//! The server's handlers: `ThriftTest` and `SecondService` with the semantics of
//! Apache's test servers (the comments of the suite's `ThriftTest.thrift`, and
//! `test/py/TestServer.py`'s `TestHandler`): every `testX` returns its argument,
//! `testMapMap` and `testInsanity` build the maps the suite describes, `testMulti` an
//! `Xtruct` from its first three arguments, the exception methods throw on the
//! documented arguments.
//!
//! `testOneway(n)` sleeps `n` seconds, as the suite says, but in a task of its own: the
//! handler returns at once, so the sleep holds up no other call, not even the next call
//! on the same connection (Framed and Buffered calls of a connection are answered in
//! order). At most [`MAX_SLEEPERS`] sleeps run at once; beyond that a oneway call is
//! logged and not slept, so callers cannot pile up tasks without bound.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use thrift_wire::Utf8Bytes;
use volo_core::context::ServerContext;
use volo_core::server::ServerError;

use crate::thrift_test::{
    Insanity, Numberz, SecondService, ThriftTest, ThriftTestTestExceptionException,
    ThriftTestTestMultiExceptionException, Xception, Xception2, Xtruct, Xtruct2,
};

/// `testOneway` sleeps running at once, at most.
pub const MAX_SLEEPERS: usize = 1024;

/// What a handler method returns when it declares no exception.
type Plain<T> = Result<T, ServerError<Infallible>>;

/// The `ThriftTest` handler.
#[derive(Debug, Clone, Default)]
pub struct TestHandler {
    sleepers: Arc<AtomicUsize>,
}

impl TestHandler {
    /// A handler with no sleep running.
    pub fn new() -> Self {
        Self::default()
    }

    /// `testOneway` sleeps running now.
    pub fn sleeping(&self) -> usize {
        self.sleepers.load(Ordering::Acquire)
    }
}

/// The map `testMapMap` answers with, whatever its argument:
/// `{-4 => {-4 => -4, -3 => -3, -2 => -2, -1 => -1}, 4 => {1 => 1, 2 => 2, 3 => 3, 4 => 4}}`.
pub fn map_map() -> BTreeMap<i32, BTreeMap<i32, i32>> {
    BTreeMap::from([
        (-4, (-4..=-1).map(|i| (i, i)).collect()),
        (4, (1..=4).map(|i| (i, i)).collect()),
    ])
}

/// The map `testInsanity(argument)` answers with:
/// `{1 => {TWO => argument, THREE => argument}, 2 => {SIX => <empty Insanity>}}`.
pub fn insanity(argument: &Insanity) -> BTreeMap<i64, BTreeMap<Numberz, Insanity>> {
    BTreeMap::from([
        (
            1,
            BTreeMap::from([
                (Numberz::TWO, argument.clone()),
                (Numberz::THREE, argument.clone()),
            ]),
        ),
        (2, BTreeMap::from([(Numberz::SIX, Insanity::default())])),
    ])
}

/// The `Xtruct` `testMulti(arg0, arg1, arg2, ..)` answers with.
pub fn multi(arg0: i8, arg1: i32, arg2: i64) -> Xtruct {
    Xtruct {
        string_thing: Utf8Bytes::from_static("Hello2"),
        byte_thing: arg0,
        i32_thing: arg1,
        i64_thing: arg2,
    }
}

/// What `secondtestString(thing)` answers: `testString("<thing>")`.
pub fn second_test_string(thing: &str) -> String {
    format!("testString(\"{thing}\")")
}

impl ThriftTest for TestHandler {
    async fn test_void(&self, _cx: &mut ServerContext) -> Plain<()> {
        tracing::debug!("testVoid()");
        Ok(())
    }

    async fn test_string(&self, _cx: &mut ServerContext, thing: Utf8Bytes) -> Plain<Utf8Bytes> {
        tracing::debug!("testString({:?})", thing.as_str());
        Ok(thing)
    }

    async fn test_bool(&self, _cx: &mut ServerContext, thing: bool) -> Plain<bool> {
        tracing::debug!("testBool({thing})");
        Ok(thing)
    }

    async fn test_byte(&self, _cx: &mut ServerContext, thing: i8) -> Plain<i8> {
        tracing::debug!("testByte({thing})");
        Ok(thing)
    }

    async fn test_i32(&self, _cx: &mut ServerContext, thing: i32) -> Plain<i32> {
        tracing::debug!("testI32({thing})");
        Ok(thing)
    }

    async fn test_i64(&self, _cx: &mut ServerContext, thing: i64) -> Plain<i64> {
        tracing::debug!("testI64({thing})");
        Ok(thing)
    }

    async fn test_double(&self, _cx: &mut ServerContext, thing: f64) -> Plain<f64> {
        tracing::debug!("testDouble({thing})");
        Ok(thing)
    }

    async fn test_binary(&self, _cx: &mut ServerContext, thing: Bytes) -> Plain<Bytes> {
        tracing::debug!("testBinary({} bytes)", thing.len());
        Ok(thing)
    }

    async fn test_uuid(&self, _cx: &mut ServerContext, thing: [u8; 16]) -> Plain<[u8; 16]> {
        tracing::debug!("testUuid({thing:02x?})");
        Ok(thing)
    }

    async fn test_struct(&self, _cx: &mut ServerContext, thing: Xtruct) -> Plain<Xtruct> {
        tracing::debug!("testStruct({thing:?})");
        Ok(thing)
    }

    async fn test_nest(&self, _cx: &mut ServerContext, thing: Xtruct2) -> Plain<Xtruct2> {
        tracing::debug!("testNest({thing:?})");
        Ok(thing)
    }

    async fn test_map(
        &self,
        _cx: &mut ServerContext,
        thing: BTreeMap<i32, i32>,
    ) -> Plain<BTreeMap<i32, i32>> {
        tracing::debug!("testMap({thing:?})");
        Ok(thing)
    }

    async fn test_string_map(
        &self,
        _cx: &mut ServerContext,
        thing: BTreeMap<Utf8Bytes, Utf8Bytes>,
    ) -> Plain<BTreeMap<Utf8Bytes, Utf8Bytes>> {
        tracing::debug!("testStringMap({} entries)", thing.len());
        Ok(thing)
    }

    async fn test_set(
        &self,
        _cx: &mut ServerContext,
        thing: std::collections::BTreeSet<i32>,
    ) -> Plain<std::collections::BTreeSet<i32>> {
        tracing::debug!("testSet({thing:?})");
        Ok(thing)
    }

    async fn test_list(&self, _cx: &mut ServerContext, thing: Vec<i32>) -> Plain<Vec<i32>> {
        tracing::debug!("testList({thing:?})");
        Ok(thing)
    }

    async fn test_enum(&self, _cx: &mut ServerContext, thing: Numberz) -> Plain<Numberz> {
        tracing::debug!("testEnum({thing:?})");
        Ok(thing)
    }

    async fn test_typedef(&self, _cx: &mut ServerContext, thing: i64) -> Plain<i64> {
        tracing::debug!("testTypedef({thing})");
        Ok(thing)
    }

    async fn test_map_map(
        &self,
        _cx: &mut ServerContext,
        hello: i32,
    ) -> Plain<BTreeMap<i32, BTreeMap<i32, i32>>> {
        tracing::debug!("testMapMap({hello})");
        Ok(map_map())
    }

    async fn test_insanity(
        &self,
        _cx: &mut ServerContext,
        argument: Insanity,
    ) -> Plain<BTreeMap<i64, BTreeMap<Numberz, Insanity>>> {
        tracing::debug!("testInsanity({argument:?})");
        Ok(insanity(&argument))
    }

    async fn test_multi(
        &self,
        _cx: &mut ServerContext,
        arg0: i8,
        arg1: i32,
        arg2: i64,
        arg3: BTreeMap<i16, Utf8Bytes>,
        arg4: Numberz,
        arg5: i64,
    ) -> Plain<Xtruct> {
        tracing::debug!("testMulti({arg0}, {arg1}, {arg2}, {arg3:?}, {arg4:?}, {arg5})");
        Ok(multi(arg0, arg1, arg2))
    }

    async fn test_exception(
        &self,
        _cx: &mut ServerContext,
        arg: Utf8Bytes,
    ) -> Result<(), ServerError<ThriftTestTestExceptionException>> {
        tracing::debug!("testException({:?})", arg.as_str());
        match arg.as_str() {
            "Xception" => Err(ServerError::User(
                Xception {
                    error_code: 1001,
                    message: arg,
                }
                .into(),
            )),
            // Any exception the IDL does not declare: the caller gets a
            // TApplicationException (INTERNAL_ERROR), as from Apache's servers.
            "TException" => Err(ServerError::internal("This is a TException")),
            _ => Ok(()),
        }
    }

    async fn test_multi_exception(
        &self,
        _cx: &mut ServerContext,
        arg0: Utf8Bytes,
        arg1: Utf8Bytes,
    ) -> Result<Xtruct, ServerError<ThriftTestTestMultiExceptionException>> {
        tracing::debug!(
            "testMultiException({:?}, {:?})",
            arg0.as_str(),
            arg1.as_str()
        );
        match arg0.as_str() {
            "Xception" => Err(ServerError::User(
                Xception {
                    error_code: 1001,
                    message: Utf8Bytes::from_static("This is an Xception"),
                }
                .into(),
            )),
            "Xception2" => Err(ServerError::User(
                Xception2 {
                    error_code: 2002,
                    struct_thing: Xtruct {
                        string_thing: Utf8Bytes::from_static("This is an Xception2"),
                        ..Xtruct::default()
                    },
                }
                .into(),
            )),
            _ => Ok(Xtruct {
                string_thing: arg1,
                ..Xtruct::default()
            }),
        }
    }

    async fn test_oneway(&self, _cx: &mut ServerContext, seconds_to_sleep: i32) -> Plain<()> {
        let seconds = u64::try_from(seconds_to_sleep).unwrap_or(0);
        let taken = self.sleepers.fetch_add(1, Ordering::AcqRel);
        if taken >= MAX_SLEEPERS {
            self.sleepers.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(
                "testOneway({seconds_to_sleep}): {MAX_SLEEPERS} sleeps running already, not sleeping"
            );
            return Ok(());
        }
        tracing::debug!("testOneway({seconds_to_sleep}): sleeping...");
        let sleepers = Arc::clone(&self.sleepers);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            sleepers.fetch_sub(1, Ordering::AcqRel);
            tracing::debug!("testOneway({seconds_to_sleep}): done sleeping!");
        });
        Ok(())
    }
}

/// The `SecondService` handler.
#[derive(Debug, Clone, Copy, Default)]
pub struct SecondHandler;

impl SecondService for SecondHandler {
    async fn secondtest_string(
        &self,
        _cx: &mut ServerContext,
        thing: Utf8Bytes,
    ) -> Plain<Utf8Bytes> {
        tracing::debug!("secondtestString({:?})", thing.as_str());
        Ok(Utf8Bytes::from(second_test_string(thing.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use volo_core::codec::{Framing, Protocol};

    use super::*;

    fn cx() -> ServerContext {
        ServerContext::new(Framing::Framed, Protocol::Binary)
    }

    #[tokio::test(start_paused = true)]
    async fn oneway_returns_at_once_and_sleeps_apart() {
        let h = TestHandler::new();
        h.test_oneway(&mut cx(), 5).await.unwrap();
        assert_eq!(h.sleeping(), 1, "the sleep runs after the handler returned");
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert_eq!(h.sleeping(), 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(h.sleeping(), 0, "done after the seconds asked");
    }

    #[tokio::test(start_paused = true)]
    async fn oneway_sleeps_are_capped_and_negative_seconds_do_not_sleep() {
        let h = TestHandler::new();
        for _ in 0..MAX_SLEEPERS + 10 {
            h.test_oneway(&mut cx(), i32::MAX).await.unwrap();
        }
        assert_eq!(h.sleeping(), MAX_SLEEPERS);
        let h = TestHandler::new();
        h.test_oneway(&mut cx(), -3).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(h.sleeping(), 0);
    }

    #[tokio::test]
    async fn exceptions_come_on_the_documented_arguments() {
        let h = TestHandler::new();
        assert!(h.test_exception(&mut cx(), "Safe".into()).await.is_ok());
        match h.test_exception(&mut cx(), "Xception".into()).await {
            Err(ServerError::User(ThriftTestTestExceptionException::Err1(x))) => {
                assert_eq!((x.error_code, x.message.as_str()), (1001, "Xception"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            h.test_exception(&mut cx(), "TException".into()).await,
            Err(ServerError::Application(_))
        ));
        match h
            .test_multi_exception(&mut cx(), "Xception2".into(), "x".into())
            .await
        {
            Err(ServerError::User(ThriftTestTestMultiExceptionException::Err2(x))) => {
                assert_eq!(x.error_code, 2002);
                assert_eq!(x.struct_thing.string_thing.as_str(), "This is an Xception2");
            }
            other => panic!("{other:?}"),
        }
        let ok = h
            .test_multi_exception(&mut cx(), "other".into(), "back".into())
            .await
            .unwrap();
        assert_eq!(ok.string_thing.as_str(), "back");
    }

    #[test]
    fn the_built_answers_are_the_idl_s() {
        let mm = map_map();
        assert_eq!(
            mm[&-4],
            BTreeMap::from([(-4, -4), (-3, -3), (-2, -2), (-1, -1)])
        );
        assert_eq!(mm[&4], BTreeMap::from([(1, 1), (2, 2), (3, 3), (4, 4)]));
        assert_eq!(mm.len(), 2);
        let arg = Insanity {
            user_map: BTreeMap::from([(Numberz::ONE, 7)]),
            xtructs: vec![Xtruct::default()],
        };
        let ins = insanity(&arg);
        assert_eq!(ins[&1][&Numberz::TWO], arg);
        assert_eq!(ins[&1][&Numberz::THREE], arg);
        assert_eq!(ins[&2][&Numberz::SIX], Insanity::default());
        assert_eq!(second_test_string("foobar"), "testString(\"foobar\")");
        let m = multi(1, 2, 3);
        assert_eq!(
            (
                m.string_thing.as_str(),
                m.byte_thing,
                m.i32_thing,
                m.i64_thing
            ),
            ("Hello2", 1, 2, 3)
        );
    }
}
