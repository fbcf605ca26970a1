struct A {
    0x: i32 a
}
