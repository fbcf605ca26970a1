struct R {}
service S {
  R f(1: R a, 2: R b) (streaming.mode = "client"),
}
