#include "formats/memory_snapshot.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "formats/kineto_trace.h"

namespace torchprof {
namespace {

// The opcodes written (pickle protocol 2), all among those memory_viz's reader takes.
constexpr char kProto = '\x80';
constexpr char kEmptyDict = '}';
constexpr char kEmptyList = ']';
constexpr char kMark = '(';
constexpr char kSetItems = 'u';
constexpr char kAppends = 'e';
constexpr char kBinUnicode = 'X';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kBinPut = 'q';
constexpr char kLongBinPut = 'r';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';
constexpr char kStop = '.';

class Pickler {
 public:
  Pickler() {
    out_ += kProto;
    out_ += '\x02';
  }

  void integer(int64_t v) {
    if (v >= 0 && v < 0x100) {
      out_ += kBinInt1;
      out_ += static_cast<char>(v);
    } else if (v >= 0 && v < 0x10000) {
      out_ += kBinInt2;
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += kBinInt;
      le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
    } else {
      // The fewest little-endian two's-complement bytes that keep the sign.
      size_t n = 1;
      while (n < 8) {
        const int64_t lo = -(int64_t{1} << (8 * n - 1));
        const int64_t hi = (int64_t{1} << (8 * n - 1)) - 1;
        if (v >= lo && v <= hi) break;
        ++n;
      }
      out_ += kLong1;
      out_ += static_cast<char>(n);
      le(static_cast<uint64_t>(v), n);
    }
  }

  // Strings are kept in the memo: the second use of one is a reference.
  void string(const std::string& s) {
    if (get(strings_, s)) return;
    out_ += kBinUnicode;
    le(s.size(), 4);
    out_ += s;
    put(strings_, s);
  }

  // A list kept in the memo under `key`: true when it was written before (then it is
  // referenced and nothing else is to be written); else the caller writes its items.
  bool list_once(const std::string& key) {
    if (get(lists_, key)) return true;
    out_ += kEmptyList;
    put(lists_, key);
    return false;
  }

  void empty_dict() { out_ += kEmptyDict; }
  void empty_list() { out_ += kEmptyList; }
  void mark() { out_ += kMark; }
  void set_items() { out_ += kSetItems; }
  void appends() { out_ += kAppends; }
  std::string finish() {
    out_ += kStop;
    return std::move(out_);
  }

 private:
  void le(uint64_t v, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xFF);
  }
  bool get(const std::unordered_map<std::string, uint32_t>& memo, const std::string& key) {
    const auto it = memo.find(key);
    if (it == memo.end()) return false;
    if (it->second < 0x100) {
      out_ += kBinGet;
      out_ += static_cast<char>(it->second);
    } else {
      out_ += kLongBinGet;
      le(it->second, 4);
    }
    return true;
  }
  void put(std::unordered_map<std::string, uint32_t>& memo, const std::string& key) {
    const uint32_t id = next_memo_++;
    memo.emplace(key, id);
    if (id < 0x100) {
      out_ += kBinPut;
      out_ += static_cast<char>(id);
    } else {
      out_ += kLongBinPut;
      le(id, 4);
    }
  }

  std::string out_;
  uint32_t next_memo_ = 0;
  std::unordered_map<std::string, uint32_t> strings_;
  std::unordered_map<std::string, uint32_t> lists_;
};

void frames(Pickler& p, const MemoryHistory& h, uint32_t stack) {
  if (p.list_once(std::to_string(stack))) return;
  const std::vector<MemoryFrame>& fs = h.stacks[stack];
  if (fs.empty()) return;
  p.mark();
  for (const MemoryFrame& f : fs) {
    p.empty_dict();
    p.mark();
    p.string("filename");
    p.string(f.filename);
    p.string("line");
    p.integer(f.line);
    p.string("name");
    p.string(f.name);
    p.set_items();
  }
  p.appends();
}

void entry(Pickler& p, const MemoryHistory& h, const MemoryHistoryEntry& e) {
  p.empty_dict();
  p.mark();
  p.string("action");
  p.string(e.alloc ? "alloc" : "free_completed");
  p.string("addr");
  p.integer(static_cast<int64_t>(e.address));
  p.string("size");
  p.integer(static_cast<int64_t>(e.bytes));
  p.string("stream");
  p.integer(0);
  p.string("time_us");
  p.integer(e.ts_ns / 1000);
  p.string("frames");
  frames(p, h, e.stack);
  p.set_items();
}

}  // namespace

std::string render_memory_snapshot(const MemoryHistory& h) {
  uint32_t devices = 0;
  for (const MemoryHistoryEntry& e : h.entries) devices = std::max(devices, e.device + 1);
  Pickler p;
  p.empty_dict();
  p.mark();
  p.string("segments");
  p.empty_list();
  p.string("device_traces");
  p.empty_list();
  if (devices > 0) {
    p.mark();
    for (uint32_t d = 0; d < devices; ++d) {
      p.empty_list();
      bool any = false;
      for (const MemoryHistoryEntry& e : h.entries) {
        if (e.device != d) continue;
        if (!any) p.mark();
        any = true;
        entry(p, h, e);
      }
      if (any) p.appends();
    }
    p.appends();
  }
  p.set_items();
  return p.finish();
}

std::vector<std::pair<std::string, std::string>> render_memory_snapshots(const Run& run) {
  std::vector<const Process*> with;
  for (const Process& proc : run.processes) {
    if (proc.memory_history) with.push_back(&proc);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const Process* proc : with) {
    const std::string name =
        with.size() == 1 ? "memory_snapshot.pickle" : "memory_snapshot." + trace_worker_name(run, *proc, "") + ".pickle";
    out.emplace_back(name, render_memory_snapshot(*proc->memory_history));
  }
  return out;
}

}  // namespace torchprof
