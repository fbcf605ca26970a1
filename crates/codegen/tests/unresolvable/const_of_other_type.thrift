const string S = "s"
const i32 X = S
