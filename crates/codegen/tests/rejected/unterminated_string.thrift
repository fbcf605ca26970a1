const string S = "abc
