struct A {
  1: i32 a,
  1: i32 b,
}
