struct A {} (a = 1)
