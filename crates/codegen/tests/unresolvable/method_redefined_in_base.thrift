service Base { void ping() }
service Mid extends Base { void other() }
service Derived extends Mid {
    i32 ping()
}
