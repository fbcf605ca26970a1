const i32 X = 1
struct A { 1: X x }
