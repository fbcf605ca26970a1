struct A {}
}
