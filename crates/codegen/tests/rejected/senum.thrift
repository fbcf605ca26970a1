senum Names {
    "a", "b"
}
