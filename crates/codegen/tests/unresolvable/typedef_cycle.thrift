typedef A B
typedef B A
struct S { 1: A a }
