include "include_cycle.thrift"
