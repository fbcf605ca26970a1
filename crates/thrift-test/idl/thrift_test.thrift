// The interface of Apache Thrift's cross-language test suite, declared for this crate.
//
// What crosses the wire is fixed by the suite: the service names, the method names,
// every argument, field and exception with its id and type, and the enum's values.
// Any binding's test client or server must find exactly these. Everything else in this
// file (the order of the declarations, the comments, which of the suite's other types
// are left out) is this crate's own: only the types the two services use are here.

namespace rs thrift_test

/// A number the suite names; `testEnum` echoes one and `testInsanity` keys by them.
/// Four and seven are missing on purpose: a value between the declared ones.
enum Numberz {
    ONE = 1,
    TWO = 2,
    THREE = 3,
    FIVE = 5,
    SIX = 6,
    EIGHT = 8,
}

/// The suite's user id, an `i64` by another name (`testTypedef`).
typedef i64 UserId

/// Four fields of four base types, with gaps between the ids so that a reader that
/// assumes consecutive ids fails.
struct Xtruct {
    1: string string_thing,
    4: i8 byte_thing,
    9: i32 i32_thing,
    11: i64 i64_thing,
}

/// An `Xtruct` between two scalars (`testNest`).
struct Xtruct2 {
    1: i8 byte_thing,
    2: Xtruct struct_thing,
    3: i32 i32_thing,
}

/// An enum-keyed map and a list of structs; `testInsanity` answers with maps of these.
struct Insanity {
    1: map<Numberz, UserId> userMap,
    2: list<Xtruct> xtructs,
}

/// Thrown by `testException` and `testMultiException` (as `err1`).
exception Xception {
    1: i32 errorCode,
    2: string message,
}

/// Thrown by `testMultiException` (as `err2`); carries a struct instead of a message.
exception Xception2 {
    1: i32 errorCode,
    2: Xtruct struct_thing,
}

/// What every test server serves. Most methods answer with their argument; this
/// crate's `handler` module says what the others answer and when they throw.
service ThriftTest {
    // Echoes, one per base type.
    void testVoid()
    string testString(1: string thing)
    bool testBool(1: bool thing)
    i8 testByte(1: i8 thing)
    i32 testI32(1: i32 thing)
    i64 testI64(1: i64 thing)
    double testDouble(1: double thing)
    binary testBinary(1: binary thing)
    uuid testUuid(1: uuid thing)

    // Echoes of structs, containers, an enum value and a typedef.
    Xtruct testStruct(1: Xtruct thing)
    Xtruct2 testNest(1: Xtruct2 thing)
    map<i32, i32> testMap(1: map<i32, i32> thing)
    map<string, string> testStringMap(1: map<string, string> thing)
    set<i32> testSet(1: set<i32> thing)
    list<i32> testList(1: list<i32> thing)
    Numberz testEnum(1: Numberz thing)
    UserId testTypedef(1: UserId thing)

    /// A map of maps built from `hello`, not an echo.
    map<i32, map<i32, i32>> testMapMap(1: i32 hello)
    /// Nested maps with `argument` in them.
    map<UserId, map<Numberz, Insanity>> testInsanity(1: Insanity argument)
    /// Six arguments of six types in, an `Xtruct` made of three of them out.
    Xtruct testMulti(1: i8 arg0, 2: i32 arg1, 3: i64 arg2, 4: map<i16, string> arg3,
                     5: Numberz arg4, 6: UserId arg5)

    /// Throws or fails as `arg` says.
    void testException(1: string arg) throws (1: Xception err1)
    /// Throws either exception, or answers, as `arg0` says.
    Xtruct testMultiException(1: string arg0, 2: string arg1)
        throws (1: Xception err1, 2: Xception2 err2)

    /// No answer; the server sleeps this long before it is done.
    oneway void testOneway(1: i32 secondsToSleep)
}

/// Served next to `ThriftTest` when the protocol is multiplexed.
service SecondService {
    /// Echoes `thing`.
    string secondtestString(1: string thing)
}
