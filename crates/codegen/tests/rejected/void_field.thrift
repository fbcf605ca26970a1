struct A { 1: void x }
