// An include whose name holds dots, as Apache's netstd tests write them
// (include "Thrift5320.enum.thrift", then Thrift5320.enum.Task): the stem is
// dotted.names, and its types and enum values are named through it.
include "dotted.names.thrift"

const dotted.names.Color FAVOURITE = dotted.names.Color.GREEN

struct Job {
  1: dotted.names.Task task
  2: dotted.names.Color color = dotted.names.Color.RED
}

service Jobs {
  dotted.names.Task next(1: dotted.names.Color color)
}
