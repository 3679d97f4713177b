// PyTorch op capture through torch's RecordFunction callbacks (torch_observer.cpp).
#pragma once

namespace torchprof::inject {

// torchprof_torch_observer_start's modes.
constexpr int kObserverRecord = 0;  // ops become records on their threads' buffers
constexpr int kObserverTrial = 1;   // a self-check: the callbacks fill a small log
constexpr int kObserverFloor = 2;   // callbacks that do nothing: RecordFunction's own cost
                                    // with a callback on (bench/torch_observer_bench.py)
constexpr int kObserverShapes = 3;  // kObserverRecord, each op's name with its input shapes
                                    // (--record-shapes: torch keeps the inputs for us)
constexpr int kObserverStack = 4;   // ... with the op's Python stack (--with-stack)
constexpr int kObserverShapesStack = 5;  // ... with both

}  // namespace torchprof::inject
