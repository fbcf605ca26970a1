service S {
    void f() throws 1: E e
}
