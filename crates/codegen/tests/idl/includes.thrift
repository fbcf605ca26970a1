include "base.thrift"
include 'shapes.thrift'
include "services.thrift"
cpp_include "<unordered_map>"

namespace rs includes
namespace java com.example.service
namespace py.twisted includes.twisted

typedef base.Timestamp When
const base.Status START = base.Status.ACTIVE
const list<base.Point> PATH = [base.ORIGIN, {"x": base.MAX_ITEMS, "y": 2}]

struct Event {
    1: required base.Timestamp at,
    2: base.Status status = base.Status.UNKNOWN,
    3: map<base.Color, list<base.Point>> marks,
    4: shapes.Shape shape,
    5: base.IdList ids = base.PRIMES,
}

service Events extends services.Store {
    list<Event> since(1: When at) throws (1: shapes.NotFound nf)
}
