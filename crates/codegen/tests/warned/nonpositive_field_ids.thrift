struct A {
  0: i32 zero,
  -5: i32 minus,
  3: i32 three,
}
