struct A {
  1: set<double> s,
}
