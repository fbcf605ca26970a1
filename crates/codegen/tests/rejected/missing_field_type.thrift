struct A {
    1: required
}
