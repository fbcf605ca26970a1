include base.thrift
