exception E {}
service S {
  oneway void f() throws (1: E e),
}
