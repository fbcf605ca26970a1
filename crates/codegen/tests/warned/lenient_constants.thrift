const bool B = 2
const bool F = -1
const i32 T = true
const double D = true
const set<i32> S = {1: 2}
const map<i32, i32> M = [1]
const list<i32> L = {}
