struct A {
  40000: i32 a,
}
