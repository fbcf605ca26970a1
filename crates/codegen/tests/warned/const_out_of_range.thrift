const i8 X = 300
