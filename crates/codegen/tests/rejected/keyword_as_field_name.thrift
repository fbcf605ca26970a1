struct A {
    1: string required
}
