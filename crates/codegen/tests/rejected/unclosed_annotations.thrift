struct A {} (a = "b"
