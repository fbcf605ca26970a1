service A extends C {}
service B extends A {}
service C extends B {}
