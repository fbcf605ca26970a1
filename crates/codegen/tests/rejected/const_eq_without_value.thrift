const i32 X =
