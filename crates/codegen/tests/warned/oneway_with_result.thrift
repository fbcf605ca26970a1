service S {
  oneway i32 f(),
}
