struct A {
    1: slist s
}
