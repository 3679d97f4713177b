#include "cli/app.h"

int main(int argc, char** argv) {
  return torchprof::cli::run_cli(argc, argv, torchprof::cli::Entry::kTorchprofRun);
}
