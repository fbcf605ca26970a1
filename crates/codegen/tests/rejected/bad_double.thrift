const double D = 1.
