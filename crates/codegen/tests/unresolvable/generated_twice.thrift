service A { void bC() }
service A_b { void c() }
