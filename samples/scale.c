int scale(int x) { return 3 * x + 1; }
