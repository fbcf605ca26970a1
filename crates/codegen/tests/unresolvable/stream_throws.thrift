struct R {}
exception E {}
service S {
  R f(1: R r) throws (1: E e) (streaming.mode = "bidirectional"),
}
