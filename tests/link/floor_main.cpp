// A program made of one floor of lib/ and the floors docs/architecture.md lets it use, nothing
// else: it links only if that floor calls nothing above it. Running it runs the floor's static
// registrations.
#include <cstdio>

int main() {
  std::printf("floor %s links with only the floors below it\n", TRAINER_FLOOR);
  return 0;
}
