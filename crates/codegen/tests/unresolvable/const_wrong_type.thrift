const i32 X = "text"
