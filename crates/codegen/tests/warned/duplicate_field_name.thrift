struct A {
  1: i32 userId,
  2: i32 user_id,
}

struct B {
  1: bool flag,
  2: bool Flag,
}
