include "shapes.thrift"

namespace rs services

/** The service every other one extends. */
service Base {
    void ping(),
    string version() (idempotent = "true"),
}

/** A key-value store of shapes. */
service Store extends Base {
    /** Stores a shape. */
    void put(1: string key, 2: shapes.Shape value) throws (1: shapes.Invalid invalid),
    shapes.Shape get(1: required string key) throws (1: shapes.NotFound nf, 2: shapes.Invalid bad);
    oneway void forget(1: string key)
    list<shapes.Rect> rects(1: i32 limit = 10, 2: optional string prefix)
    map<string, i64> stats() throws ()
    bool exists(string key)
    i32 count(1: list<string> (cpp.template = "std::vector") keys (x = "y")) (timeout_ms = "100")
} (rust.client = "StoreClient")

service Empty {}
