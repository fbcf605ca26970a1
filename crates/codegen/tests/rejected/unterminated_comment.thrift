struct A {}
/* never closed
struct B {}
