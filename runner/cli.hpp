#pragma once
// The `vlessbench` command line: run, compare, verify. Exit codes: 0 ok; 1 route mismatches
// (unless --allow-mismatch), all samples failed, or verify found problems; 2 usage errors.
namespace vlessbench::runner {

int run_cli(int argc, char** argv);

}  // namespace vlessbench::runner
