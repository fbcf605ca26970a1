// The other file named module_clash.thrift, included from ../module_clash.thrift.
struct Inner {
  1: i32 n
}
