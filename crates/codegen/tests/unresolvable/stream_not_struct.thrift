struct R {}
service S {
  string f(1: R r) (streaming.mode = "server"),
}
