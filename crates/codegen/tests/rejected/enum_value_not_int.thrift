enum E {
    A = "x"
}
