// Built with exceptions (inject/CMakeLists.txt): torch's helper throws c10::Error for
// tensors whose sizes it cannot give, and nothing may unwind through the library's
// other frames, which are built without.
#include "inject/torch_shapes.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "inject/text_put.h"

namespace torchprof::inject {
namespace {

// The exported function returns its vector through a hidden pointer; declared with the
// same return type, the call is the same.
using Sizes = std::vector<std::vector<int64_t>>;
using InputSizesFn = Sizes (*)(const void*, bool);
using InputTypesFn = std::vector<std::string> (*)(const void*);

InputSizesFn g_input_sizes = nullptr;
InputTypesFn g_input_types = nullptr;

// torch's FLOP count of an op: saveExtraArgs(fn) keeps what computeFlops needs (sizes,
// stride, padding, dilation, groups) in a std::unordered_map<std::string, c10::IValue>,
// which computeFlops reads. The map is declared here with a value of c10::IValue's size
// and alignment (a 8-byte payload and its tag), so that it has the same layout; only
// torch's code reads or destroys the IValues: its exported instance of the map's
// clear() empties it (each IValue's destructor), and the empty map's own destructor
// frees its bucket array.
struct alignas(8) IValueBytes {
  unsigned char bytes[16];
};
using ExtraArgs = std::unordered_map<std::string, IValueBytes>;
using SaveExtraArgsFn = ExtraArgs (*)(const void*);
using ComputeFlopsFn = uint64_t (*)(const std::string&, const ExtraArgs&);
using ClearFn = void (*)(ExtraArgs*);

SaveExtraArgsFn g_save_extra_args = nullptr;
ComputeFlopsFn g_compute_flops = nullptr;
ClearFn g_clear_args = nullptr;

// Whether Kineto names lists of scalars "ScalarList" (torch 2.x) or leaves them unnamed (1.x).
bool g_scalar_lists = false;

// inputTypes() names a tensor by its dtype and a scalar or list by its IValue tag; Kineto's
// "Input type" (torch's InputOutputEncoder) says "Scalar" for every scalar, on 2.x
// "ScalarList" for a list (of ints, mostly: a tensor list's shapes differ from Kineto's
// anyway), and nothing for the rest that is not a tensor.
const std::string& kineto_type(const std::string& type) {
  static const std::string kScalar = "Scalar";
  static const std::string kScalarList = "ScalarList";
  static const std::string kNothing;
  if (type == "GenericList") return g_scalar_lists ? kScalarList : kNothing;
  static constexpr const char* kScalarTags[] = {"Int", "Double", "Bool", "ComplexDouble", "SymInt", "SymFloat",
                                                 "SymBool"};
  for (const char* tag : kScalarTags) {
    if (type == tag) return kScalar;
  }
  if (type == "None" || type == "String" || type == "Device") return kNothing;
  return type;
}

}  // namespace

bool shapes_find(void* (*lookup)(const char*)) {
  g_input_sizes = reinterpret_cast<InputSizesFn>(lookup("_ZN5torch8profiler4impl10inputSizesERKN2at14RecordFunctionEb"));
  g_input_types = reinterpret_cast<InputTypesFn>(lookup("_ZN5torch8profiler4impl10inputTypesB5cxx11ERKN2at14RecordFunctionE"));
  return g_input_sizes != nullptr;
}

bool flops_find(void* (*lookup)(const char*)) {
  g_save_extra_args = reinterpret_cast<SaveExtraArgsFn>(lookup("_ZN5torch8profiler4impl13saveExtraArgsB5cxx11ERKN2at14RecordFunctionE"));
  g_compute_flops = reinterpret_cast<ComputeFlopsFn>(lookup(
      "_ZN5torch8profiler4impl12computeFlopsERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEERKSt13unordered_mapIS7_"
      "N3c106IValueESt4hashIS7_ESt8equal_toIS7_ESaISt4pairIS8_SC_EEE"));
  g_clear_args = reinterpret_cast<ClearFn>(lookup(
      "_ZNSt10_HashtableINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESt4pairIKS5_N3c106IValueEESaISA_ENSt8__"
      "detail10_Select1stESt8equal_toIS5_ESt4hashIS5_ENSC_18_Mod_range_hashingENSC_20_Default_ranged_hashENSC_20_Prime_"
      "rehash_policyENSC_17_Hashtable_traitsILb1ELb0ELb1EEEE5clearEv"));
  const bool found = g_save_extra_args != nullptr && g_compute_flops != nullptr && g_clear_args != nullptr;
  if (!found) g_save_extra_args = nullptr;
  return found;
}

uint64_t flops_of(const void* record_function, const char* name) {
  if (g_save_extra_args == nullptr || name == nullptr) return 0;
  uint64_t flops = 0;
  try {
    ExtraArgs args = g_save_extra_args(record_function);
    if (!args.empty()) {
      try {
        flops = g_compute_flops(std::string(name), args);
      } catch (...) {
        flops = 0;
      }
      g_clear_args(&args);
    }
  } catch (...) {
    return 0;
  }
  return flops;
}

size_t flops_append(const void* record_function, const char* name, char* out, size_t used, size_t cap) {
  const uint64_t flops = flops_of(record_function, name);
  if (flops == 0) return used;
  size_t at = used;
  static constexpr char kField[] = ", flops = ";
  if (!put_text(out, at, cap, kField, sizeof kField - 1)) return used;
  if (!put_int(out, at, cap, static_cast<int64_t>(flops))) return used;
  return at;
}

size_t shapes_append(const void* record_function, char* out, size_t used, size_t cap) {
  if (g_input_sizes == nullptr) return used;
  Sizes sizes;
  try {
    sizes = g_input_sizes(record_function, false);
  } catch (...) {
    return used;
  }
  size_t at = used;
  static constexpr char kField[] = ", sizes = [";
  if (!put_text(out, at, cap, kField, sizeof kField - 1)) return used;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0 && !put_text(out, at, cap, ", ", 2)) return used;
    if (!put_text(out, at, cap, "[", 1)) return used;
    for (size_t j = 0; j < sizes[i].size(); ++j) {
      if (j > 0 && !put_text(out, at, cap, ", ", 2)) return used;
      if (!put_int(out, at, cap, sizes[i][j])) return used;
    }
    if (!put_text(out, at, cap, "]", 1)) return used;
  }
  if (!put_text(out, at, cap, "]", 1)) return used;
  return at;
}

void types_style(int torch_major) { g_scalar_lists = torch_major >= 2; }

size_t types_append(const void* record_function, char* out, size_t used, size_t cap) {
  if (g_input_types == nullptr) return used;
  std::vector<std::string> types;
  try {
    types = g_input_types(record_function);
  } catch (...) {
    return used;
  }
  size_t at = used;
  static constexpr char kField[] = ", types = [";
  if (!put_text(out, at, cap, kField, sizeof kField - 1)) return used;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& t = kineto_type(types[i]);
    // dtype names are plain words ("float", "long int", "c10::Half"): nothing a JSON
    // string would need escaped, nor the message's own separators.
    for (const char c : t) {
      if (c == '"' || c == '\\' || c == ']' || static_cast<unsigned char>(c) < 0x20) return used;
    }
    if (i > 0 && !put_text(out, at, cap, ", ", 2)) return used;
    if (!put_text(out, at, cap, "\"", 1) || !put_text(out, at, cap, t.data(), t.size()) ||
        !put_text(out, at, cap, "\"", 1)) {
      return used;
    }
  }
  if (!put_text(out, at, cap, "]", 1)) return used;
  return at;
}

}  // namespace torchprof::inject
