service S {
    oneway ping()
}
