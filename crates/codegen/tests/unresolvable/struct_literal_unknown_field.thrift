struct P { 1: i32 x }
const P ORIGIN = { "x": 0, "y": 0 }
