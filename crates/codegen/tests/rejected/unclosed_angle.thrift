struct A {
    1: list<i32 nums
}
