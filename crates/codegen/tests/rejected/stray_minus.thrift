const i32 X = - 1
