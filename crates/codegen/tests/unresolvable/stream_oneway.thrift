struct R {}
service S {
  oneway void f(1: R r) (streaming.mode = "client"),
}
