enum E { A, B }
const E X = E.C
