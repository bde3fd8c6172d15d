/* plainapp.c - a program that uses no annotation API at all. */
#include <stdio.h>
int main(void) {
  volatile unsigned long x = 0;
  for (unsigned long i = 0; i < 1000000; i++) x += i;
  printf("plainapp: %lu\n", (unsigned long)x);
  return 0;
}
