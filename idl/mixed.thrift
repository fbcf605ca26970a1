// A mixed struct of about 20 KiB for the codec benchmarks: every base type, nested
// structs, lists, a set, a map, an optional binary. Values are built by the benchmark
// (16 requests of 512-byte messages, 64 counters, 256 tags, 64 labels, 3000-byte
// payload, 128 entries per Ids list, a 512-byte blob).
include "echo.thrift"

namespace rs mixed
namespace py mixed

struct Mixed {
    1: i64 id,
    2: string name,
    3: bool flag,
    4: byte tiny,
    5: i16 small,
    6: i32 count,
    7: double ratio,
    8: list<echo.Request> requests,
    9: map<string, i64> counters,
    10: set<i32> tags,
    11: list<string> labels,
    12: optional binary payload,
    13: echo.Ids ids,
}
