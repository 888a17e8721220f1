#include <stdio.h>
int tu1_value(void);
int tu2_value(void);
int main(void) { printf("host: %d %d\n", tu1_value(), tu2_value()); return 0; }
