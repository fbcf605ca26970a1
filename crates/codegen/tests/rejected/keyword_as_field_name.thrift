struct A {
    1: string true
}
