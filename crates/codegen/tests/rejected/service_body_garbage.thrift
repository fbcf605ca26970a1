service S {
    void a()
    = 1
}
