// The tables `torchprof export --type sqlite` writes (formats/sqlite_export.h): Nsight
// Systems' export schema (its table and column names, types and order, as nsys 2024.6
// creates them), the ENUM tables' rows, and torch's tables of ours. Data only.
#pragma once

#include <cstdint>
#include <vector>

namespace torchprof::sqlite_schema {

// nsys's event types (ENUM_NSYS_EVENT_TYPE) of the NVTX rows.
constexpr int kNvtxCategory = 33;
constexpr int kNvtxMark = 34;
constexpr int kNvtxPushPop = 59;
constexpr int kNvtxStartEnd = 60;
constexpr int kNvtxDomainCreate = 75;
// nsys's event classes of CUDA API rows (ENUM_NSYS_EVENT_CLASS).
constexpr int kClassCudaRuntime = 0;
constexpr int kClassCudaDriver = 1;

// The nsys export schema the tables follow (Nsight Systems 2024.6).
constexpr const char* kSchemaVersion = "3.16.1";

struct Table {
  const char* name;
  const char* columns;  // the CREATE TABLE body
};

// nsys's tables, in its column order (docs/sql.md says which release they follow).
constexpr Table kStringIds = {"StringIds", "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL"};
constexpr Table kThreadNames = {"ThreadNames",
                                "nameId INTEGER NOT NULL REFERENCES StringIds(id), priority INTEGER, "
                                "globalTid INTEGER"};
constexpr Table kProcesses = {"PROCESSES", "globalPid INTEGER, pid INTEGER, name TEXT"};
constexpr Table kSessionStart = {"TARGET_INFO_SESSION_START_TIME",
                                 "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT"};
constexpr Table kTargetGpu = {
    "TARGET_INFO_GPU",
    "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, "
    "l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, "
    "pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxswDevPath TEXT, ctrlDevPath "
    "TEXT, revision INTEGER, nodeMask INTEGER, constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock "
    "INTEGER, maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER, maxRegistersPerSm "
    "INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER, maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, "
    "maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX "
    "INTEGER, maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER, smMajor "
    "INTEGER, smMinor INTEGER"};
constexpr int kTargetGpuColumns = 41;
constexpr Table kCudaDevice = {
    "TARGET_INFO_CUDA_DEVICE",
    "gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT NULL, uuid TEXT, numMultiprocessors INTEGER"};
constexpr Table kMetaCapture = {"META_DATA_CAPTURE", "name TEXT NOT NULL, value TEXT"};
constexpr Table kMetaExport = {"META_DATA_EXPORT", "name TEXT NOT NULL, value TEXT"};
constexpr Table kNvtx = {
    "NVTX_EVENTS",
    "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER REFERENCES "
    "StringIds(id), domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
    "uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT"};
constexpr Table kRuntime = {
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
    "correlationId INTEGER, nameId INTEGER NOT NULL REFERENCES StringIds(id), returnValue INTEGER NOT NULL, "
    "callchainId INTEGER"};
constexpr Table kKernel = {
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "demangledName INTEGER NOT NULL REFERENCES StringIds(id), shortName INTEGER NOT NULL REFERENCES "
    "StringIds(id), mangledName INTEGER REFERENCES StringIds(id), launchType INTEGER, cacheConfig INTEGER, "
    "registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT "
    "NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory "
    "INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, "
    "localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId "
    "INTEGER, sharedMemoryLimitConfig INTEGER"};
constexpr Table kMemcpy = {
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes "
    "INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, "
    "srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause "
    "INTEGER, graphNodeId INTEGER, virtualAddress INTEGER"};
constexpr Table kMemset = {
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value "
    "INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"};
constexpr Table kSync = {
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, syncType "
    "INTEGER NOT NULL, eventId INTEGER NOT NULL"};
// torch's (ours).
constexpr Table kTorchOps = {
    "TORCH_OPS",
    "id INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER NOT "
    "NULL, nameId INTEGER NOT NULL REFERENCES StringIds(id), parentId INTEGER REFERENCES TORCH_OPS(id), "
    "depth INTEGER NOT NULL, sequenceNumber INTEGER, inputShapesId INTEGER REFERENCES StringIds(id), "
    "stackId INTEGER REFERENCES StringIds(id), flops INTEGER, stepId INTEGER REFERENCES TORCH_STEPS(id), "
    "inputTypesId INTEGER REFERENCES StringIds(id)"};
constexpr Table kTorchLaunches = {
    "TORCH_OP_LAUNCHES",
    "opId INTEGER NOT NULL REFERENCES TORCH_OPS(id), globalPid INTEGER NOT NULL, correlationId INTEGER NOT "
    "NULL"};
constexpr Table kTorchSteps = {
    "TORCH_STEPS",
    "id INTEGER NOT NULL PRIMARY KEY, globalPid INTEGER NOT NULL, stepIndex INTEGER NOT NULL, nameId INTEGER "
    "NOT NULL REFERENCES StringIds(id), start INTEGER NOT NULL, end INTEGER NOT NULL, action TEXT NOT NULL, "
    "globalTid INTEGER NOT NULL"};
constexpr Table kTorchMemory = {
    "TORCH_MEMORY",
    "timestamp INTEGER NOT NULL, globalPid INTEGER NOT NULL, globalTid INTEGER, deviceType INTEGER NOT NULL, "
    "deviceId INTEGER NOT NULL, address INTEGER NOT NULL, bytes INTEGER NOT NULL, totalAllocated INTEGER, "
    "totalReserved INTEGER, stepId INTEGER REFERENCES TORCH_STEPS(id)"};

struct EnumRow {
  int id;
  const char* name;
  const char* label;
};

// ENUM tables as nsys 2024.6 fills them (id, name, label). nsys numbers memory kinds
// and launch types its own way: mem_kind() and the launch type below map CUPTI's.
inline const std::vector<EnumRow> kEventTypes = {
    {33, "NvtxCategory", "NvtxCategory"},         {34, "NvtxMark", "NvtxMark"},
    {39, "NvtxThread", "NvtxThread"},             {59, "NvtxPushPopRange", "NvtxPushPopRange"},
    {60, "NvtxStartEndRange", "NvtxStartEndRange"}, {75, "NvtxDomainCreate", "NvtxDomainCreate"},
    {76, "NvtxDomainDestroy", "NvtxDomainDestroy"},
};
inline const std::vector<EnumRow> kMemcpyOpers = {
    {0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"}, {1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"},
    {2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"}, {3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"},
    {4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"}, {5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"},
    {6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"}, {7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"},
    {8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"}, {9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"},
    {10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"},
    {11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"},
    {12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"},
    {13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"},
};
inline const std::vector<EnumRow> kMemKinds = {
    {0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"}, {1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"},
    {2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"},     {3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"},
    {4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"},
    {5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"},
    {6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"},
    {7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"},
};
inline const std::vector<EnumRow> kSyncTypes = {
    {0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"},
    {1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"},
    {2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"},
    {3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"},
    {4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"},
};
inline const std::vector<EnumRow> kLaunchTypes = {
    {0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"},
    {1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular"},
    {2, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE", "Coop Single Device"},
    {3, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE", "Coop Multi Device"},
};
inline const std::vector<EnumRow> kCacheConfigs = {
    {0, "CU_FUNC_CACHE_PREFER_NONE", "None"}, {1, "CU_FUNC_CACHE_PREFER_SHARED", "Shared"},
    {2, "CU_FUNC_CACHE_PREFER_L1", "L1"},     {3, "CU_FUNC_CACHE_PREFER_EQUAL", "Equal"},
};
inline const std::vector<EnumRow> kSharedMemLimits = {
    {0, "CUDA_SHARED_MEM_LIMIT_DEFAULT", "Default"},
    {1, "CUDA_SHARED_MEM_LIMIT_OPTIN", "Opt in"},
};
inline const std::vector<EnumRow> kDevMemOpers = {
    {0, "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION", "Allocation"},
    {1, "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION", "Deallocation"},
};
inline const std::vector<EnumRow> kEventClasses = {
    {0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"},
    {1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"},
};

// CUPTI's CUpti_ActivityMemoryKind (0 unknown, 1 pageable, …) as ENUM_CUDA_MEM_KIND numbers it.
inline int64_t mem_kind(uint8_t cupti) { return cupti == 0 || cupti > 7 ? 7 : cupti - 1; }

}  // namespace torchprof::sqlite_schema
