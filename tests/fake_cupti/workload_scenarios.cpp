// Named scenarios of gpu_workload, with the values a correct profiler must
// report, computed by hand. `gpu_workload --expect FILE NAME` writes the same
// values as JSON (computed from the script by Script::expectations(), which
// fake_cupti_selftest checks against this table and against the fake's records).
//
// Attribution as torch.profiler: a GPU op's time is Self CUDA of the innermost
// NVTX range around its launching API call, and CUDA total of every range around it.
// All GPU work is on device 0 ("Fake H200"), context 1; default stream 7.
//
// nested
//   range train  calls 1  Self CUDA 4100us  CUDA total 4700us   (CPU total >= 200us)
//   range inner  calls 1  Self CUDA  600us  CUDA total  600us   (CPU total >= 200us, busy:200us)
//   _Z6matmulPfS_S_i 2 x 2000us = 4000us; _Z4reluPfi 2 x 300us = 600us;
//   Memcpy HtoD (Pageable -> Device) 1 x 100us, 1048576 B; all on stream 7; GPU sum 4700us.
//   API: cudaLaunchKernel 4, cudaMemcpyAsync 1, cudaDeviceSynchronize 1.
// steps
//   ProfilerStep#0..#3  calls 1 each  Self CUDA 0  CUDA total 1500us each
//   range forward   calls 4  Self CUDA 2000us  CUDA total 2000us   (_Z7forwardPf 4 x 500us)
//   range backward  calls 4  Self CUDA 4000us  CUDA total 4000us   (_Z8backwardPf 4 x 1000us)
//   GPU sum 6000us; API: cudaLaunchKernel 8, cudaDeviceSynchronize 4.
// streams
//   range multi  Self CUDA 41550us  CUDA total 41550us: _Z5gemmAPf 2 x 20000us on stream 13
//                (back to back: the 2nd starts at the 1st's end), _Z5gemmBPf 1500us on stream 21,
//                Memcpy DtoH (Device -> Pageable) 50us 4096 B on stream 7.
//   range side (on a second thread)  Self CUDA 700us  CUDA total 700us: _Z4sidev 700us stream 22.
//   Streams: 7: 1 op 50us; 13: 2 ops 40000us; 21: 1 op 1500us; 22: 1 op 700us. GPU sum 42250us.
//   API: cudaLaunchKernel 4, cudaMemcpyAsync 1, cudaStreamSynchronize 1, cudaDeviceSynchronize 1.
// memory
//   malloc a 1048576, malloc b 4194304, memset 4194304 B 20us, free a, malloc c 2097152, free b
//   (all inside range alloc), then free c: peak 6291456 B (b + c), final 0, 3 allocations, 3 frees.
//   range alloc  Self CUDA 20us  CUDA total 20us  (Memset (Device) 1 x 20us).
//   API: cudaMalloc 3, cudaFree 3, cudaMemsetAsync 1, cudaDeviceSynchronize 1.
// graph
//   range graph_step  Self CUDA 1200us  CUDA total 1200us: two cudaGraphLaunch of graph 1, each
//   running _Z5nodeAPf 100us, _Z5nodeBPf 200us, _Z5nodeCPf 300us on stream 7 (6 kernels, graphId 1,
//   each with the correlation id of its cudaGraphLaunch; no cudaLaunchKernel at all).
// drops
//   range lossy  Self CUDA 30us  CUDA total 30us (_Z4tinyv 3 x 10us); 5 dropped records reported.
// driver
//   range triton  Self CUDA 100us  CUDA total 100us (triton_poi_fused_add_0 2 x 50us via cuLaunchKernel).
// blocking
//   range copy_back  Self CUDA 4000us  CUDA total 4000us: _Z4workv 1000us, then a blocking cudaMemcpy
//   DtoH 8388608 B 3000us on stream 7; the range lasts >= 3005us of CPU (3000us + launch latency).
//
// Four steps each with one problem of the overview's (analysis/overview.h), and a fifth
// with none; each must give exactly its recommendation (tests/integration/test_gpu_fake.py):
// loader    a DataLoader range busy 3ms, then a 1ms kernel, per step: DataLoader ~50-75% of
//           the step (the kernel overlaps the next step's loading).
// tiny      100 kernels of 3us per step, 20us of CPU work between launches: all kernel time
//           in kernels < 10us, the GPU idle ~85% waiting for launches.
// pageable  a 16 MiB HtoD copy from pageable memory (2ms) and a 500us kernel per step, all
//           queued at once: copies 80% of each (widened) step.
// syncstep  500us of CPU work, a 1ms kernel and cudaDeviceSynchronize per step: the CPU blocked
//           ~2/3 of the step, the GPU waiting for the host the other third.
// healthy   100us of CPU work and a 2ms kernel per step, no synchronisation: the GPU busy ~98%.
#include <utility>

#include "workload_script.h"

namespace fake_workload {

namespace {

const std::pair<const char*, const char*> kScenarios[] = {
    {"nested",
     "range:train{ kernel:_Z6matmulPfS_S_i:2000us ; memcpy:htod:1048576:100us ;"
     " range:inner{ busy:200us ; kernel:_Z4reluPfi:300us ; kernel:_Z4reluPfi:300us } ;"
     " kernel:_Z6matmulPfS_S_i:2000us ; sync }"},
    {"steps",
     "range:ProfilerStep#0{ range:forward{ kernel:_Z7forwardPf:500us } ; range:backward{ kernel:_Z8backwardPf:1000us } ; sync } ;"
     "range:ProfilerStep#1{ range:forward{ kernel:_Z7forwardPf:500us } ; range:backward{ kernel:_Z8backwardPf:1000us } ; sync } ;"
     "range:ProfilerStep#2{ range:forward{ kernel:_Z7forwardPf:500us } ; range:backward{ kernel:_Z8backwardPf:1000us } ; sync } ;"
     "range:ProfilerStep#3{ range:forward{ kernel:_Z7forwardPf:500us } ; range:backward{ kernel:_Z8backwardPf:1000us } ; sync }"},
    {"streams",
     "range:multi{ kernel:_Z5gemmAPf:20ms:stream=13 ; kernel:_Z5gemmBPf:1500us:stream=21 ;"
     " kernel:_Z5gemmAPf:20ms:stream=13 ; memcpy:dtoh:4096:50us:stream=7 } ;"
     " thread{ range:side{ kernel:_Z4sidev:700us:stream=22 ; sync:22 } } ; sync"},
    {"memory",
     "range:alloc{ malloc:a:1048576 ; malloc:b:4194304 ; memset:4194304:20us ; free:a ;"
     " malloc:c:2097152 ; free:b } ; free:c ; sync"},
    {"graph",
     "range:graph_step{ graph:1:_Z5nodeAPf@100us,_Z5nodeBPf@200us,_Z5nodeCPf@300us ;"
     " graph:1:_Z5nodeAPf@100us,_Z5nodeBPf@200us,_Z5nodeCPf@300us } ; sync"},
    {"drops", "range:lossy{ kernel:_Z4tinyv:10us ; kernel:_Z4tinyv:10us ; kernel:_Z4tinyv:10us ; dropped:5 } ; sync"},
    {"driver", "range:triton{ dkernel:triton_poi_fused_add_0:50us ; dkernel:triton_poi_fused_add_0:50us } ; sync"},
    {"blocking", "range:copy_back{ kernel:_Z4workv:1000us ; memcpy:dtoh:8388608:3000us:sync }"},
    {"repeat",
     "repeat:50{ range:step{ kernel:_Z4gemmv:20us ; dkernel:triton_fused:5us ; memcpy:htod:65536:3us ;"
     " kernel:_Z7softmaxv:4us:stream=9 } } ; sync"},
    {"loader",
     "range:ProfilerStep#0{ range:enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__{ busy:3ms } ; range:forward{ kernel:_Z7forwardPf:1ms } }"
     " ; range:ProfilerStep#1{ range:enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__{ busy:3ms } ; range:forward{ kernel:_Z7forwardPf:1ms } }"
     " ; range:ProfilerStep#2{ range:enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__{ busy:3ms } ; range:forward{ kernel:_Z7forwardPf:1ms } }"
     " ; range:ProfilerStep#3{ range:enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__{ busy:3ms } ; range:forward{ kernel:_Z7forwardPf:1ms } } ; sync"},
    {"tiny",
     "range:ProfilerStep#0{ range:forward{ repeat:100{ kernel:_Z4tinyv:3us ; busy:20us } } }"
     " ; range:ProfilerStep#1{ range:forward{ repeat:100{ kernel:_Z4tinyv:3us ; busy:20us } } }"
     " ; range:ProfilerStep#2{ range:forward{ repeat:100{ kernel:_Z4tinyv:3us ; busy:20us } } }"
     " ; range:ProfilerStep#3{ range:forward{ repeat:100{ kernel:_Z4tinyv:3us ; busy:20us } } } ; sync"},
    {"pageable",
     "range:ProfilerStep#0{ range:h2d{ memcpy:htod:16777216:2ms } ; range:forward{ kernel:_Z7forwardPf:500us } }"
     " ; range:ProfilerStep#1{ range:h2d{ memcpy:htod:16777216:2ms } ; range:forward{ kernel:_Z7forwardPf:500us } }"
     " ; range:ProfilerStep#2{ range:h2d{ memcpy:htod:16777216:2ms } ; range:forward{ kernel:_Z7forwardPf:500us } }"
     " ; range:ProfilerStep#3{ range:h2d{ memcpy:htod:16777216:2ms } ; range:forward{ kernel:_Z7forwardPf:500us } } ; sync"},
    {"syncstep",
     "range:ProfilerStep#0{ range:forward{ busy:500us ; kernel:_Z7forwardPf:1ms } ; sync }"
     " ; range:ProfilerStep#1{ range:forward{ busy:500us ; kernel:_Z7forwardPf:1ms } ; sync }"
     " ; range:ProfilerStep#2{ range:forward{ busy:500us ; kernel:_Z7forwardPf:1ms } ; sync }"
     " ; range:ProfilerStep#3{ range:forward{ busy:500us ; kernel:_Z7forwardPf:1ms } ; sync } ; sync"},
    {"healthy",
     "range:ProfilerStep#0{ range:forward{ busy:100us ; kernel:_Z7forwardPf:2ms } }"
     " ; range:ProfilerStep#1{ range:forward{ busy:100us ; kernel:_Z7forwardPf:2ms } }"
     " ; range:ProfilerStep#2{ range:forward{ busy:100us ; kernel:_Z7forwardPf:2ms } }"
     " ; range:ProfilerStep#3{ range:forward{ busy:100us ; kernel:_Z7forwardPf:2ms } } ; sync"},
};

}  // namespace

const char* scenario_script(std::string_view name) {
  for (const auto& [scenario, script] : kScenarios) {
    if (name == scenario) return script;
  }
  return nullptr;
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (const auto& scenario : kScenarios) names.emplace_back(scenario.first);
  return names;
}

}  // namespace fake_workload
