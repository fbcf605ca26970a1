// Structs, unions and exceptions: requiredness, defaults, annotations, recursion.
namespace rs shapes

/** A rectangle: every base type, every requiredness, several defaults. */
struct Rect {
    1: required i32 width,
    2: required i32 height,
    3: optional string label,
    4: double scale = 1.0,
    5: bool visible = true,
    6: list<string> tags = [],
    7: map<string, i32> props = {},
    8: optional binary thumbnail,
    9: i8 layer = -1,
    10: i16 z,
    11: byte flags = 0x0F,
    12: uuid id,
    13: string kind = 'rect',
    14: i64 created_at,
}

struct Circle {
    1: double radius = 0.5 (unit = "mm"),
}

/** Exactly one of these is set. */
union Shape {
    1: Rect rect,
    2: Circle circle,
    3: list<Shape> group,
} (rust.name = "AnyShape")

/** Recursive: a tree of nodes. */
struct TreeNode {
    1: i64 value
    2: list<TreeNode> children
    3: optional TreeNode parent (rust.box = "true")
}

struct LinkedList { 1: i32 head; 2: optional LinkedList tail; }

exception NotFound {
    1: string key,
    2: i32 code = 404,
}

exception Invalid {
    1: required string reason
    2: optional list<string> fields
} (message = "reason")

/** Annotations on types, fields and the struct; legacy cpp_type. */
struct Annotated {
    1: list<i32> (cpp.template = "std::list") ids,
    2: set<string> (rust.type = "BTreeSet") names (serde.rename = "n"),
    3: map<i32, string> (cpp.template = "std::unordered_map") index,
    4: string (rust.type = "SmolStr") small,
    5: i64 ts (rust.serde = "skip", deprecated),
    6: map cpp_type "std::map<int, int>" <i32, i32> legacy_map,
    7: set cpp_type "std::set<int>" <i32> legacy_set,
    8: list<i32> cpp_type "std::deque<int>" legacy_list,
    9: list<map<string, set<i64>>> deep,
} (rust.derive = "Hash", final)

/** Fields without ids: the resolver assigns -1, -2, ... */
struct NoIds {
    string name
    i32 count
    optional bool flag
}

struct Empty {}

/** Names that are Rust keywords or prelude names are fine in Thrift. */
struct Keywords {
    1: string type,
    2: i32 match,
    3: bool async,
    4: string self (rust.name = "self_"),
    5: optional string Result,
    6: Empty fn = {},
}

/** Recursive through each other: both fields close the cycle, so both are boxed. */
struct Ping { 1: i32 n, 2: optional Pong pong }
struct Pong { 1: i32 n, 2: optional Ping ping }

/** A literal of the mutually recursive pair, boxed as the fields are. */
const Ping PING_PONG = {"n": 1, "pong": {"n": 2, "ping": {"n": 3}}}
