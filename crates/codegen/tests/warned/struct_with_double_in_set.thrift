struct Point { 1: double x }
struct A {
  1: set<Point> s,
}
