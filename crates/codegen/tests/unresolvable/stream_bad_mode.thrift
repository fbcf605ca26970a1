struct R {}
service S {
  R f(1: R r) (streaming.mode = "unary"),
}
