// Includes a file of the same name from another directory, as Apache's PHP test
// IDL includes ../../../../test/ThriftTest.thrift from its own ThriftTest.thrift.
include "same_name/module_clash.thrift"

struct Outer {
  1: module_clash.Inner inner
}
