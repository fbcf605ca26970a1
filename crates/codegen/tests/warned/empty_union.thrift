// A union without fields, as Apache's keyword tests write one (union1_return.thrift).
union Nothing {}
