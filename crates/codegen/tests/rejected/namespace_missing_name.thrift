namespace rs
struct A {}
