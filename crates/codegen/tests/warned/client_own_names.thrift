// Methods named like the generated client's own functions (Apache's netstd test
// Thrift5253.thrift has a method `client`): their Rust names are numbered.
service Names {
  i32 client(1: i32 n)
  void new()
  oneway void builder()
  i32 other()
}
