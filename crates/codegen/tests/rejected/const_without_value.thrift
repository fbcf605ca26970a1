const i32 X
struct A {}
