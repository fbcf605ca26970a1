struct A { 1 i32 a }
