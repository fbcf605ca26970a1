// Services whose names meet the names generated service code uses: parameters named
// like the handler's context and the dispatcher's locals, Rust keywords and prelude
// names as method and parameter names, one exception type thrown under two names,
// more arguments than clippy likes, a one-letter service, oneway-only services, and an
// `extends` chain across files whose root has no methods.
include "shapes.thrift"
include "services.thrift"

namespace rs handlers

exception Oops {
    1: string why,
}

/** Extends a service of another file that has no methods. */
service Tricky extends services.Empty {
    /** Parameters named like the context and the dispatcher's locals. */
    i32 type(1: i32 cx, 2: string self, 3: i64 a, 4: i64 args, 5: i64 method, 6: i64 inner,
             7: i64 r, 8: i64 e)
        throws (1: shapes.NotFound first, 2: shapes.NotFound second, 3: Oops oops)
    void match(1: optional shapes.Shape Result) throws (1: Oops fn)
    binary async()
}

/** One letter, like the dispatcher's type parameter. */
service T extends Tricky {
    oneway void fire(1: string what)
}

service Oneways {
    oneway void fire(1: string what)
    oneway void forget()
}
