// A default that names a value through the wrong enum: Apache Thrift looks the name up
// in the field's own enum.
enum Fruit {
  APPLE = 1,
  PEAR = 2,
}

enum Tree {
  OAK = 1,
  PEAR = 7,
}

struct Orchard {
  1: Tree tree = Fruit.PEAR,
  2: Fruit fruit = Fruit.PEAR,
}
