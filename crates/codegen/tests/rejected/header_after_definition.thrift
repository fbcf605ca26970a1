struct A {}
include "b.thrift"
