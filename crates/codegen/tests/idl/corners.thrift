// Corners of the language that code generators trip on, each asserted by a test:
// Thrift's own type names as field names, uuid constants written as strings, doubles
// where an order is needed, `{}` as an empty set, enum names that share a value,
// typedefs of typedefs, containers nested in every position, and two versions of a
// struct that must read each other's bytes.
namespace rs corners

/** Each field is named after a type of the language. */
struct TypeNames {
    1: i8 i8,
    2: i16 i16,
    3: i32 i32,
    4: i64 i64,
    5: uuid uuid,
    6: string string,
    7: binary binary,
    8: bool bool,
    9: byte byte,
    10: list<i8> list,
    11: set<i16> set,
    12: map<string, bool> map,
}

/** The canonical form of a uuid, lower and upper case. */
const uuid TICKET = "c0ffee00-1234-4abc-8def-0123456789ab"
/** The same form in braces, as a Windows GUID is written. */
const uuid BRACED = '{C0FFEE00-1234-4ABC-8DEF-FEDCBA987654}'
typedef uuid RequestId
const RequestId FIRST_REQUEST = "00000000-0000-0000-0000-000000000001"
const set<uuid> TICKETS = [TICKET, "{00000000-0000-0000-0000-000000000001}"]

/** Doubles as set elements and map keys need an order; in a list they do not. */
struct Readings {
    1: set<double> levels,
    2: map<double, i8> buckets,
    3: list<double> raw,
    4: double mean,
}

/** Integers where a double is expected, and the usual spellings of doubles. */
const double WHOLE = 3
const double NEGATIVE_WHOLE = -12
const list<double> STEPS = [1, -0.5, 2.5e-3, 7E2]
const Readings CALIBRATION = {
    "levels": [0.5, -2, 1e1],
    "buckets": {-1.25: 1, 4: 2},
    "raw": [1, 1],
    "mean": 1,
}

/** `{}` is an empty set or an empty map, as the field's type says. */
struct EmptyBraces {
    1: optional set<binary> blobs = {},
    2: optional map<binary, i32> counts = {},
    3: set<string> names = {},
}

/** Implicit values continue from the one before, negative or not; two names may share one. */
enum Level {
    FLOOR = -2,
    BELOW,
    ZERO,
    NONE = 0,
    ONE,
    TOP = 0x10,
}

struct Alarm {
    1: Level at = Level.ONE,
    2: Level quiet = Level.NONE,
}

/** A typedef of a typedef, and containers of it. */
typedef i32 Count
typedef Count Total
typedef list<Total> Totals
typedef map<Total, Totals> TotalsByTotal
const Totals SOME_TOTALS = [1, 2, 3]
const TotalsByTotal INDEX = {6: SOME_TOTALS, 0: []}

struct Label {
    1: string key,
    2: i32 weight,
}

/** Structs, sets and maps inside each other, keys included. */
struct Nesting {
    1: optional set<Label> labels,
    2: map<set<i32>, list<string>> by_ids,
    3: required list<map<set<i16>, map<i64, set<list<map<Label, string>>>>>> deep,
    4: map<Label, Level> levels,
    5: list<list<list<Label>>> cube,
}

/** The first version of a record. */
struct RecordV1 {
    1: i32 first,
    3: string dropped_later,
    12: i32 last,
}

/** The next version: new fields of every kind between the old ones. */
struct RecordV2 {
    1: i32 first,
    2: i8 small,
    4: i16 short_one,
    5: i64 long_one,
    6: double ratio,
    7: Label label,
    8: list<i32> numbers,
    9: set<string> words,
    10: map<i32, string> names,
    11: uuid id,
    12: i32 last,
}
