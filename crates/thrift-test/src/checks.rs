//! The client's checks: every check Apache's `test/py/TestClient.py` makes, in its
//! words, and a few more that Apache's other clients make (`testStringMap`,
//! `testInsanity`, and the declared exceptions required, not only checked when they
//! come).
//!
//! Each check is named after the Python test it mirrors. A failed check is reported
//! with its name and what differed, and sets its category's bit in the exit code, as
//! the suite's `test/README.md` defines them ([`BASETYPES`], [`STRUCTS`],
//! [`CONTAINERS`], [`EXCEPTIONS`]). A call that times out stops the run: the
//! connection is in an unknown state, and the checks not run count as failed
//! ([`TIMEOUT`] and their categories).
//!
//! Not carried over: `testException__traceback__`, which checks how Python's generated
//! exception classes are built (`__slots__`), not what crosses the wire.
//!
//! # Sequence ids
//!
//! Python's client wraps its protocol in a "pedantic" checker: no sequence id sent
//! twice in a row, and each reply carries the id of its call. Here the second half is
//! the library's own rule (a reply whose sequence id or method name is not its call's
//! fails the call, so the check it belongs to fails), and the first is checked by
//! [`SeqWatch`], a layer around each attempt that reads the id the call used.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use thrift_wire::Utf8Bytes;
use volo_core::client::{ClientContext, ClientError, ClientRequest, ClientResponse, Error};
use volo_core::service::{Layer, Service};

use crate::handler;
use crate::thrift_test::{
    Insanity, Numberz, SecondServiceClient, ThriftTestClient, ThriftTestTestExceptionException,
    ThriftTestTestMultiExceptionException, Xception, Xtruct, Xtruct2,
};

/// Exit-code bit: a base type check failed (`TEST_BASETYPES`).
pub const BASETYPES: u8 = 1;
/// Exit-code bit: a struct check failed (`TEST_STRUCTS`).
pub const STRUCTS: u8 = 2;
/// Exit-code bit: a container check failed (`TEST_CONTAINERS`).
pub const CONTAINERS: u8 = 4;
/// Exit-code bit: an exception check failed (`TEST_EXCEPTIONS`).
pub const EXCEPTIONS: u8 = 8;
/// Exit-code bit: the run could not start (bad options, an unsupported combination,
/// no connection) (`TEST_UNKNOWN`).
pub const UNKNOWN: u8 = 64;
/// Exit-code bit: a call timed out (`TEST_TIMEOUT`).
pub const TIMEOUT: u8 = 128;

/// How long `testOneway(1)` may take to return at most, as in Python's client: a
/// oneway call is done once sent, so a client that waits for the server's sleep fails.
pub const ONEWAY_LIMIT: Duration = Duration::from_secs(3);

/// A failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The check's name (Python's test name).
    pub check: &'static str,
    /// Its exit-code bit.
    pub category: u8,
    /// What went wrong.
    pub detail: String,
}

/// Why a check failed.
#[derive(Debug)]
struct Problem {
    detail: String,
    timed_out: bool,
}

impl Problem {
    fn new(detail: impl Into<String>) -> Self {
        Problem {
            detail: detail.into(),
            timed_out: false,
        }
    }
}

impl<E: Debug> From<ClientError<E>> for Problem {
    fn from(e: ClientError<E>) -> Self {
        match e {
            ClientError::User(e) => Problem::new(format!("unexpected exception {e:?}")),
            ClientError::Rpc(e) => Problem {
                timed_out: e.is_timeout(),
                detail: format!("call failed: {}", chain(&e)),
            },
        }
    }
}

/// An error and its causes, on one line. A cause whose text the line already ends
/// with is not repeated (volo-core's errors write their source into their own text
/// and give it as their `source()` too).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// `Ok` when `got` is `want`, else a problem naming the call.
fn expect<T: PartialEq + Debug>(call: &str, got: T, want: T) -> Result<(), Problem> {
    if got == want {
        Ok(())
    } else {
        Err(Problem::new(format!(
            "{call}: expected {want:?}, got {got:?}"
        )))
    }
}

/// Records the sequence id each call used and flags one used twice in a row (Python's
/// `TPedanticSequenceIdProtocolWrapper`, outbound half). Put it around each attempt
/// with `ClientBuilder::layer_inner`; share it between the clients of one connection.
#[derive(Debug, Clone, Default)]
pub struct SeqWatch {
    state: Arc<Mutex<SeqState>>,
}

#[derive(Debug, Default)]
struct SeqState {
    last: Option<i32>,
    calls: u64,
    repeats: Vec<i32>,
}

impl SeqWatch {
    /// A watch that has seen no call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes a call's sequence id.
    pub fn record(&self, seq_id: i32) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.last == Some(seq_id) {
            s.repeats.push(seq_id);
        }
        s.last = Some(seq_id);
        s.calls += 1;
    }

    /// The calls seen.
    pub fn calls(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .calls
    }

    /// The ids used twice in a row since the last look.
    pub fn take_repeats(&self) -> Vec<i32> {
        std::mem::take(
            &mut self
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .repeats,
        )
    }
}

impl<S> Layer<S> for SeqWatch {
    type Service = Watched<S>;

    fn layer(self, inner: S) -> Watched<S> {
        Watched { inner, watch: self }
    }
}

/// A service with a [`SeqWatch`] around it.
#[derive(Debug, Clone)]
pub struct Watched<S> {
    inner: S,
    watch: SeqWatch,
}

impl<S> Service<ClientContext, ClientRequest> for Watched<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let oneway = req.is_oneway();
        let out = self.inner.call(cx, req).await;
        // A oneway call has no reply, and its id is not reported back.
        if out.is_ok() && !oneway {
            self.watch.record(cx.rpc.seq_id);
        }
        out
    }
}

/// The clients of one connection: `ThriftTest`, and `SecondService` when the protocol
/// is multiplexed.
#[derive(Debug)]
pub struct Clients<T> {
    /// The `ThriftTest` client.
    pub test: ThriftTestClient<T>,
    /// The `SecondService` client (multiplexed protocols only).
    pub second: Option<SecondServiceClient<T>>,
    /// The sequence ids both use.
    pub seq: SeqWatch,
}

/// One run of the checks: what failed so far.
#[derive(Debug, Default)]
pub struct Report {
    /// The failed checks, in order.
    pub failures: Vec<Failure>,
    /// The checks that passed.
    pub passed: usize,
    /// Whether a call timed out (the run stopped there).
    pub timed_out: bool,
    /// What the server did that the checks let pass but the Thrift specification
    /// does not (printed, not counted).
    pub notes: Vec<String>,
}

impl Report {
    /// The exit code the suite expects: 0, or the bits of the failed categories.
    pub fn exit_code(&self) -> u8 {
        let bits = self.failures.iter().fold(0, |b, f| b | f.category);
        if self.timed_out { bits | TIMEOUT } else { bits }
    }
}

/// Something unique enough for the second `testUuid` value (Python sends `uuid4()`):
/// 16 bytes from the standard library's per-process random hash keys, with the
/// version-4 and variant bits set.
pub fn random_uuid() -> [u8; 16] {
    let mut out = [0u8; 16];
    for half in out.chunks_mut(8) {
        let mut h = std::hash::RandomState::new().build_hasher();
        h.write_u64(0x7e57);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out[6] = (out[6] & 0x0f) | 0x40;
    out[8] = (out[8] & 0x3f) | 0x80;
    out
}

/// Strings that each protocol must carry unchanged: the escapes JSON defines (quote,
/// backslash, slash, the five named control characters), a control character JSON
/// has no short escape for, and text in one-, two-, three- and four-byte UTF-8
/// (the last becomes a surrogate pair when a JSON writer escapes it).
pub fn strings() -> [String; 4] {
    let tricky = "\u{8}\t\n\u{c}/\\\\\r\"{}[]:,\u{1}\u{1f} パイソン Ωμέγα 𝄞 😀".to_string();
    let mut long = String::new();
    for word in [
        "Afrikaans",
        "العربية",
        "Български",
        "বাংলা",
        "Čeština",
        "Ελληνικά",
        "Esperanto",
        "فارسی",
        "Français",
        "עברית",
        "हिन्दी",
        "日本語",
        "한국어",
        "ქართული",
        "Lietuvių",
        "മലയാളം",
        "Русский",
        "Slovenščina",
        "தமிழ்",
        "ไทย",
        "Tiếng Việt",
        "中文",
        "粵語",
        "ᏣᎳᎩ",
        "Ⰳⰾⰰⰳⱁⰾⰹⱌⰰ",
        "e\u{301}\u{327}",
    ] {
        long.push_str(word);
        long.push_str(", ");
    }
    ["Python".repeat(20), String::new(), tricky, long]
}

/// Runs every check once over `clients`, appending to `report`.
pub async fn run<T>(clients: &Clients<T>, report: &mut Report)
where
    T: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    let c = &clients.test;
    let mut r = Runner {
        report,
        seq: &clients.seq,
        multiplexed: clients.second.is_some(),
    };

    r.check("testVoid", BASETYPES, async || Ok(c.test_void().await?))
        .await;
    r.check("testString", BASETYPES, async || {
        for s in strings() {
            let got = c.test_string(Utf8Bytes::from(s.clone())).await?;
            expect("testString", got.as_str(), s.as_str())?;
        }
        Ok(())
    })
    .await;
    if let Some(second) = &clients.second {
        r.check("testMultiplexed", BASETYPES, async || {
            let got = second.secondtest_string("foobar".into()).await?;
            expect(
                "secondtestString",
                got.as_str(),
                &handler::second_test_string("foobar"),
            )
        })
        .await;
    }
    r.check("testBool", BASETYPES, async || {
        expect("testBool", c.test_bool(true).await?, true)?;
        expect("testBool", c.test_bool(false).await?, false)
    })
    .await;
    r.check("testByte", BASETYPES, async || {
        expect("testByte", c.test_byte(63).await?, 63)?;
        expect("testByte", c.test_byte(-127).await?, -127)
    })
    .await;
    r.check("testI32", BASETYPES, async || {
        for v in [-1, 0, i32::MIN, i32::MAX] {
            expect("testI32", c.test_i32(v).await?, v)?;
        }
        Ok(())
    })
    .await;
    r.check("testI64", BASETYPES, async || {
        for v in [1, -34_359_738_368, i64::MIN, i64::MAX] {
            expect("testI64", c.test_i64(v).await?, v)?;
        }
        Ok(())
    })
    .await;
    let mut sign_lost = false;
    r.check("testDouble", BASETYPES, async || {
        // Python's four, then the extremes, bit for bit. -0.0 answered as 0.0 passes,
        // with a note: equal as numbers, which is what Apache's clients compare (none
        // sends -0.0), and Apache's Node.js writers drop the sign of zero.
        for v in [
            -5.235098235,
            0.0,
            -1.0,
            -0.000_341_012_439_638_598_3,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1.0 / 3.0,
        ] {
            let got = c.test_double(v).await?;
            if got.to_bits() != v.to_bits() {
                if got == v {
                    sign_lost = true;
                    continue;
                }
                return Err(Problem::new(format!(
                    "testDouble: expected {v:e}, got {got:e}"
                )));
            }
        }
        Ok(())
    })
    .await;
    const SIGN_LOST: &str = "testDouble(-0.0) came back as 0.0: the server lost the sign \
                             of zero (equal as numbers, so the check passes)";
    if sign_lost && !r.report.notes.iter().any(|n| n == SIGN_LOST) {
        r.report.notes.push(SIGN_LOST.into());
    }
    r.check("testBinary", BASETYPES, async || {
        let all: Bytes = (0..=255u8).collect::<Vec<_>>().into();
        expect("testBinary", c.test_binary(all.clone()).await?, all)
    })
    .await;
    r.check("testUuid", BASETYPES, async || {
        let fixed = [
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff,
        ];
        expect("testUuid", c.test_uuid(fixed).await?, fixed)?;
        let random = random_uuid();
        expect("testUuid", c.test_uuid(random).await?, random)
    })
    .await;
    r.check("testStruct", STRUCTS, async || {
        let x = zero();
        expect("testStruct", c.test_struct(x.clone()).await?, x)
    })
    .await;
    r.check("testNest", STRUCTS, async || {
        let x = Xtruct2 {
            struct_thing: zero(),
            byte_thing: 0,
            i32_thing: 0,
        };
        expect("testNest", c.test_nest(x.clone()).await?, x)
    })
    .await;
    r.check("testMap", CONTAINERS, async || {
        let x = BTreeMap::from([(0, 1), (1, 2), (2, 3), (3, 4), (-1, -2)]);
        expect("testMap", c.test_map(x.clone()).await?, x)
    })
    .await;
    r.check("testStringMap", CONTAINERS, async || {
        let [.., tricky, long] = strings();
        let x = BTreeMap::from([
            (Utf8Bytes::from("a"), Utf8Bytes::from("2")),
            (Utf8Bytes::from(tricky), Utf8Bytes::from(long)),
            (Utf8Bytes::new(), Utf8Bytes::new()),
        ]);
        expect("testStringMap", c.test_string_map(x.clone()).await?, x)
    })
    .await;
    r.check("testSet", CONTAINERS, async || {
        let x = BTreeSet::from([8, 1, 42]);
        expect("testSet", c.test_set(x.clone()).await?, x)
    })
    .await;
    r.check("testList", CONTAINERS, async || {
        let x = vec![1, 4, 9, -42];
        expect("testList", c.test_list(x.clone()).await?, x)
    })
    .await;
    r.check("testEnum", BASETYPES, async || {
        expect("testEnum", c.test_enum(Numberz::FIVE).await?, Numberz::FIVE)
    })
    .await;
    r.check("testTypedef", BASETYPES, async || {
        let x = 0x00ff_ffff_ffff_ffff;
        expect("testTypedef", c.test_typedef(x).await?, x)
    })
    .await;
    r.check("testMapMap", CONTAINERS, async || {
        expect("testMapMap", c.test_map_map(42).await?, handler::map_map())
    })
    .await;
    r.check("testInsanity", CONTAINERS, async || {
        let argument = Insanity {
            user_map: BTreeMap::from([(Numberz::FIVE, 5), (Numberz::EIGHT, 8)]),
            xtructs: vec![
                zero(),
                Xtruct {
                    string_thing: "Goodbye4".into(),
                    byte_thing: 4,
                    i32_thing: 4,
                    i64_thing: 4,
                },
            ],
        };
        let got = c.test_insanity(argument.clone()).await?;
        expect("testInsanity", got, handler::insanity(&argument))
    })
    .await;
    r.check("testMulti", STRUCTS, async || {
        let want = handler::multi(74, 0x00ff_00ff, 0xffff_ffff_d0d0);
        let got = c
            .test_multi(
                want.byte_thing,
                want.i32_thing,
                want.i64_thing,
                BTreeMap::from([(0, "abc".into())]),
                Numberz::FIVE,
                0x00f0_f0f0,
            )
            .await?;
        expect("testMulti", got, want)
    })
    .await;
    r.check("testException", EXCEPTIONS, async || {
        c.test_exception("Safe".into()).await?;
        match c.test_exception("Xception".into()).await {
            Err(ClientError::User(ThriftTestTestExceptionException::Err1(x))) => expect(
                "testException(\"Xception\")",
                x,
                Xception {
                    error_code: 1001,
                    message: "Xception".into(),
                },
            )?,
            other => {
                return Err(Problem::new(format!(
                    "testException(\"Xception\"): expected Xception, got {other:?}"
                )));
            }
        }
        match c.test_exception("TException".into()).await {
            Err(ClientError::Rpc(e)) if e.application_exception().is_some() => {}
            other => {
                return Err(Problem::new(format!(
                    "testException(\"TException\"): expected a TApplicationException, \
                     got {other:?}"
                )));
            }
        }
        c.test_exception("success".into()).await?;
        Ok(())
    })
    .await;
    r.check("testMultiException", EXCEPTIONS, async || {
        match c
            .test_multi_exception("Xception".into(), "ignore".into())
            .await
        {
            Err(ClientError::User(ThriftTestTestMultiExceptionException::Err1(x))) => {
                expect("testMultiException: Xception.errorCode", x.error_code, 1001)?;
                expect(
                    "testMultiException: Xception.message",
                    x.message.as_str(),
                    "This is an Xception",
                )?;
            }
            other => {
                return Err(Problem::new(format!(
                    "testMultiException(\"Xception\"): expected Xception, got {other:?}"
                )));
            }
        }
        match c
            .test_multi_exception("Xception2".into(), "ignore".into())
            .await
        {
            Err(ClientError::User(ThriftTestTestMultiExceptionException::Err2(x))) => {
                expect(
                    "testMultiException: Xception2.errorCode",
                    x.error_code,
                    2002,
                )?;
                expect(
                    "testMultiException: Xception2.struct_thing.string_thing",
                    x.struct_thing.string_thing.as_str(),
                    "This is an Xception2",
                )?;
            }
            other => {
                return Err(Problem::new(format!(
                    "testMultiException(\"Xception2\"): expected Xception2, got {other:?}"
                )));
            }
        }
        let got = c
            .test_multi_exception("success".into(), "foobar".into())
            .await?;
        expect(
            "testMultiException: string_thing",
            got.string_thing.as_str(),
            "foobar",
        )
    })
    .await;
    r.check("testOneway", BASETYPES, async || {
        let start = Instant::now();
        c.test_oneway(1).await?;
        let took = start.elapsed();
        if took >= ONEWAY_LIMIT {
            return Err(Problem::new(format!(
                "testOneway(1) took {took:?}: a oneway call must not wait for the server"
            )));
        }
        Ok(())
    })
    .await;
    r.check("testOnewayThenNormal", BASETYPES, async || {
        c.test_oneway(1).await?;
        expect(
            "testString after testOneway",
            c.test_string("Python".into()).await?.as_str(),
            "Python",
        )
    })
    .await;
}

/// The `Xtruct` Python's client sends to `testStruct` and `testNest`.
fn zero() -> Xtruct {
    Xtruct {
        string_thing: "Zero".into(),
        byte_thing: 1,
        i32_thing: -3,
        i64_thing: -5,
    }
}

/// Runs checks and files their outcome.
struct Runner<'a> {
    report: &'a mut Report,
    seq: &'a SeqWatch,
    multiplexed: bool,
}

impl Runner<'_> {
    /// Runs `body` as the check `name`, unless a call timed out before.
    async fn check(
        &mut self,
        name: &'static str,
        category: u8,
        body: impl AsyncFnOnce() -> Result<(), Problem>,
    ) {
        if self.report.timed_out {
            self.fail(name, category, "not run: an earlier call timed out".into());
            return;
        }
        let outcome = body().await;
        let repeats = self.seq.take_repeats();
        match outcome {
            Err(p) => {
                if p.timed_out {
                    self.report.timed_out = true;
                }
                self.fail(name, category, p.detail);
            }
            Ok(()) if !repeats.is_empty() => {
                let how = if self.multiplexed {
                    " (ThriftTest and SecondService share the connection's ids)"
                } else {
                    ""
                };
                self.fail(
                    name,
                    category,
                    format!("sequence ids {repeats:?} used twice in a row{how}"),
                );
            }
            Ok(()) => {
                tracing::info!("{name}: ok");
                self.report.passed += 1;
            }
        }
    }

    fn fail(&mut self, check: &'static str, category: u8, detail: String) {
        tracing::error!("{check}: FAILED: {detail}");
        self.report.failures.push(Failure {
            check,
            category,
            detail,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cause the text already ends with is not written twice (volo-core's errors
    /// carry their source in their text); one it does not is added.
    #[test]
    fn a_chain_names_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Error::io(io);
        assert!(e.to_string().ends_with("no such file"), "{e}");
        assert_eq!(chain(&e), e.to_string());
        let outer = std::io::Error::other(std::io::Error::other("inner"));
        assert_eq!(outer.to_string(), "inner");
        let wrapped = std::io::Error::other(Wrapper(outer));
        assert_eq!(chain(&wrapped), "wrapper: inner");
    }

    #[derive(Debug)]
    struct Wrapper(std::io::Error);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("wrapper")
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_seq_watch_flags_an_id_used_twice_in_a_row_only() {
        let w = SeqWatch::new();
        for id in [1, 2, 3, 1, 2] {
            w.record(id);
        }
        assert_eq!(w.take_repeats(), Vec::<i32>::new());
        w.record(2);
        w.record(7);
        w.record(7);
        assert_eq!(w.take_repeats(), vec![2, 7]);
        assert_eq!(w.take_repeats(), Vec::<i32>::new(), "taken");
        assert_eq!(w.calls(), 8);
    }

    #[test]
    fn random_uuids_differ_and_are_version_4() {
        let (a, b) = (random_uuid(), random_uuid());
        assert_ne!(a, b);
        for u in [a, b] {
            assert_eq!(u[6] >> 4, 4);
            assert_eq!(u[8] >> 6, 0b10);
        }
    }

    #[test]
    fn the_exit_code_holds_the_failed_categories() {
        let mut r = Report::default();
        assert_eq!(r.exit_code(), 0);
        for (check, category) in [("a", STRUCTS), ("b", STRUCTS), ("c", EXCEPTIONS)] {
            r.failures.push(Failure {
                check,
                category,
                detail: String::new(),
            });
        }
        assert_eq!(r.exit_code(), STRUCTS | EXCEPTIONS);
        r.timed_out = true;
        assert_eq!(r.exit_code(), STRUCTS | EXCEPTIONS | TIMEOUT);
    }

    #[test]
    fn the_strings_cover_every_utf8_length_and_json_escape() {
        let [.., tricky, long] = strings();
        for c in ['"', '\\', '/', '\u{8}', '\u{c}', '\n', '\r', '\t', '\u{1}'] {
            assert!(tricky.contains(c), "{c:?}");
        }
        let lengths: BTreeSet<usize> = tricky.chars().map(char::len_utf8).collect();
        assert_eq!(lengths, BTreeSet::from([1, 2, 3, 4]));
        assert!(long.len() > 300);
    }
}
