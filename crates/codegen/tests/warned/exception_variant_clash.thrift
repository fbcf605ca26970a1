exception E {}
service S {
    void f() throws (1: E x_1, 2: E x1)
}
