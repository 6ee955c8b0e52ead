// The unit tests' main (Catch2's implementation is tests/catch_session.cc).
#include "tests/catch_session.h"

int main(int argc, char** argv) { return zps::testing::runCatchSession(argc, argv); }
