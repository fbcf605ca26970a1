// Fields always present that lead back to their own struct, so that no value of them
// would end: `&` (Apache's reference marker) changes nothing in Rust.
struct Chain {
  1: Chain & next,
  2: i32 value,
}

struct Left {
  1: Right & right,
}

struct Right {
  1: Left & left,
}

// Through a list the cycle ends (an empty list): nothing to change.
struct Bag {
  1: list<Bag> & items,
}

// Unions that hold only each other: no value of either ends, so a field always present
// that holds one, in a struct or in a method's arguments, cannot be.
union Spiral {
  1: Spiral inward,
  2: Twist twist,
}

union Twist {
  1: Spiral back,
}

struct Coil {
  1: Spiral spiral,
  2: i32 turns,
}

service Spirals {
  void turn(1: Spiral spiral),
}
