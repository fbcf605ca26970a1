const i32 X = Y
