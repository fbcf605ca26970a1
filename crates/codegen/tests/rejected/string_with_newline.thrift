const string S = 'line one
line two'
