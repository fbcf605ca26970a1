/**
 * Shared vocabulary for the other test IDLs: typedefs, constants and enums.
 */
namespace rs base
namespace py base.types
namespace * base

/** Milliseconds since the Unix epoch. */
typedef i64 Timestamp
typedef string (rust.type = "Arc<str>") Name
typedef list<i32> IdList (cpp.template = "std::vector")
typedef map<string, list<Timestamp>> History;

/** Lifecycle of a job; every value is explicit. */
enum Status {
    UNKNOWN = 0,
    ACTIVE = 1,
    SUSPENDED = 2 (deprecated = "use INACTIVE"),
    INACTIVE = 0x10,
} (rust.derive = "Hash")

/// Implicit values: 0, 1, 2.
enum Color {
    RED
    GREEN
    BLUE
}

/** Negative, implicit-after-explicit and hex values. */
enum Offset {
    BEHIND = -2,
    SLIGHTLY_BEHIND = -1;
    ON_TIME;
    AHEAD = 0x7fffffff;
    LAST = -0x80000000
}

/** A point on the plane; constants below are written as struct literals. */
struct Point {
    1: i32 x = 0,
    2: i32 y = 0,
}

struct Range {
    1: Point lo,
    2: Point hi,
}

const i32 MAX_ITEMS = 1000
const i64 MIN_I64 = -9223372036854775808
const i64 MAX_I64 = 0x7FFFFFFFFFFFFFFF
const i64 MASK = 0xFF00FF00
const double PI = 3.14159
const double AVOGADRO = 6.022e23
const double MILLI = 1.0E-3
const bool ENABLED = true
const bool DISABLED = false
const string GREETING = "hello, world"
const binary MAGIC = "THRIFT"
const Timestamp EPOCH = 0
/** References an enum value. */
const Status DEFAULT_STATUS = Status.ACTIVE
/** References another constant. */
const i32 LIMIT = MAX_ITEMS
const list<i32> PRIMES = [2, 3, 5, 7, 11]
const list<list<string>> MATRIX = [["a", "b"], [], ["c"]]
const set<Color> WARM = [Color.RED]
const map<string, i32> WEIGHTS = {"low": 1, "high": MAX_ITEMS}
const map<Status, list<Color>> PALETTE = {
    Status.ACTIVE: [Color.GREEN],
    Status.INACTIVE: [Color.RED, Color.BLUE],
}
const map<string, map<string, double>> NESTED = {"a": {"x": 1.5, "y": -2e10}, "b": {}}
const Point ORIGIN = {"x": 0, "y": 0}
const Range UNIT = {"lo": ORIGIN, "hi": {"x": 1, "y": LIMIT}}
const list<Point> CORNERS = [{"x": 0, "y": 0}, {"x": 1, "y": 1}]
