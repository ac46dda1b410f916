#include "runner/cli.hpp"

int main(int argc, char** argv) { return vlessbench::runner::run_cli(argc, argv); }
