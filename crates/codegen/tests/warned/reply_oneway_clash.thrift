service S {
    oneway void notify()
    void Oneway()
}
