struct NotAnError {}
service S {
  void f() throws (1: NotAnError e),
}
