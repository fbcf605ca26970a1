include "include_cycle_b.thrift"
