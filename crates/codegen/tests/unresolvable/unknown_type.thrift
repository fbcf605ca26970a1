struct A {
  1: Missing m,
}
