struct A {
	1: i32 a
	2: i32 $
}
