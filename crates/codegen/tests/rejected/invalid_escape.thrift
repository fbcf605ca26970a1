const string S = "a\qb"
