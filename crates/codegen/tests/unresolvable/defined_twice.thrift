struct A {}
enum A { X }
