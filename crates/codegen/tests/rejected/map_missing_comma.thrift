struct A {
    1: map<string i32> m
}
