service S {
    void ping;
}
