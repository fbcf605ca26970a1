const map<string, i32> M = {"a" 1}
