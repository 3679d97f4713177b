// A small reference model of the analysis, for differential tests of the engine
// (engine_reference_test.cpp): the capture's records decoded into whole events per
// thread, sorted, nested by interval containment, the steps made of the markers, and
// the rows added up. Nothing here is fast or bounded; it is meant to be read.
//
// It also says whether interval nesting is unambiguous for the capture: no two
// intervals of a thread overlap without one holding the other, and no two share an
// endpoint where the empty one's place would be a matter of order. Only then does the
// engine promise the same table.
#pragma once

#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/model.h"

namespace torchprof::test {

struct ReferenceResult {
  std::vector<OpStats> ops;  // in order of first use, as the engine gives them
  bool unambiguous = true;
  std::string ambiguity;     // the first reason it is not
};

ReferenceResult reference_analysis(const std::string& capture_path, const AnalysisOptions& options);

}  // namespace torchprof::test
