// The engine's pass over one connection (conn_pass.h): what an event is, from the string
// ids and definitions it names: name slots, range kinds and their rows, NVTX domains and
// categories.
#include <string>
#include <utility>

#include "analysis/collectives.h"
#include "analysis/conn_pass.h"
#include "analysis/op_message.h"
#include "analysis/overview.h"

namespace torchprof::engine {

namespace {

// String ids are small and dense (one per distinct name of a process): up to this, a
// vector indexed by the id holds their slots.
constexpr uint32_t kDenseIds = 1u << 20;

}  // namespace

// ---- what an event is --------------------------------------------------------------

NameSlot& ConnPass::slot_slow(uint32_t id) {
  if (auto it = remap_.find(id); it != remap_.end()) return *it->second;
  if (id < kDenseIds) {
    if (id >= slots_.size()) slots_.resize(std::max<size_t>(id + 1, slots_.size() * 2));
    return slots_[id];
  }
  NameSlot& s = extra_slots_.emplace_back();
  remap_.emplace(id, &s);
  return s;
}

NameSlot& ConnPass::first_use(NameSlot& s, uint32_t id) {
  s.used = true;
  if (!s.defined && id != 0) {
    // Defined in a later frame of another thread, or never.
    if (scan_ == nullptr) throw NeedsScan{"a string is used before the frame that defines it"};
    auto it = scan_->defs.strings.find(id);
    if (it != scan_->defs.strings.end()) {
      s.text = it->second;
    } else {
      s.text = stand_in_text(id);
      s.stand_in = true;
      ++losses_.unknown_strings;
    }
    s.defined = true;
  }
  s.name = Name(s.text);
  return s;
}

RangeKind& ConnPass::range_kind_slow(uint32_t id, uint16_t domain) {
  RangeKind* kind = nullptr;
  if (domain == 0) {
    NameSlot& s = slot(id);
    if (s.range == nullptr) s.range = &kinds_.emplace_back();
    kind = s.range;
  } else {
    RangeKind*& k = domain_kinds_[(uint64_t{id} << 16) | domain];
    if (k == nullptr) k = &kinds_.emplace_back();
    kind = k;
  }
  if (!kind->resolved) {
    const NameSlot& s = slot(id);
    resolve(*kind, s.text, s.name, domain);
  }
  return *kind;
}

namespace {

// A collective's range, by name: c10d's ops, the backends' records of their work
// (ProcessGroupGloo's "gloo:all_reduce", ProcessGroupNCCL's "nccl:all_reduce", MPI's and
// UCC's), and torch 2.x's record_param_comms.
int8_t collective_source(std::string_view name) {
  if (name.starts_with("c10d::")) {
    // allreduce_, allgather_, reduce_scatter_, alltoall_, broadcast_, gather_, scatter_,
    // reduce_, barrier, send, recv_ and their variants.
    for (std::string_view word : {"reduce", "gather", "scatter", "alltoall", "broadcast", "barrier", "send", "recv"}) {
      if (name.find(word) != std::string_view::npos) return static_cast<int8_t>(CollectiveSource::kC10dOp);
    }
    return -1;
  }
  for (std::string_view prefix : {"gloo:", "nccl:", "mpi:", "ucc:"}) {
    if (name.starts_with(prefix) && name.size() > prefix.size()) return static_cast<int8_t>(CollectiveSource::kBackend);
  }
  if (name == "record_param_comms") return static_cast<int8_t>(CollectiveSource::kBackend);
  return -1;
}

}  // namespace

void ConnPass::resolve(RangeKind& k, std::string text, Name name, uint16_t domain) {
  k.resolved = true;
  const Name dname = domain_name(domain);
  if (std::optional<OpInfo> op = op_of_range(text, dname.str())) {
    st_.op_infos.push_back(std::make_shared<const OpInfo>(std::move(*op)));
    k.op = st_.op_infos.back().get();
    k.shown = Name(k.op->name);
  } else {
    k.shown = name;
  }
  k.row_name = step_row_name(k.shown);
  k.collective = collective_source(k.shown.str());
  if (k.collective >= 0 && k.op != nullptr) k.coll_in_elems = shape_elements(k.op->input_shapes);
  if (st_.marker.matches(k.shown.str())) {
    if (scan_ == nullptr) throw NeedsScan{"a range is a step marker"};
    k.role = kRoleMarker;
  } else {
    k.role = is_dataloader_range(k.shown.str()) ? kRoleDataLoader : kRoleCpuExec;
  }
}

Name ConnPass::domain_name(uint16_t domain) {
  if (domain == 0) return {};
  auto cached = domain_names_.find(domain);
  if (cached != domain_names_.end()) return cached->second;
  uint32_t name_id = 0;
  bool known = false;
  if (auto it = domains_.find(domain); it != domains_.end()) {
    name_id = it->second;
    known = true;
  } else if (scan_ != nullptr) {
    if (auto f = scan_->defs.domains.find(domain); f != scan_->defs.domains.end()) {
      name_id = f->second;
      known = true;
    }
  } else {
    throw NeedsScan{"a domain is used before the frame that names it"};
  }
  const Name name = known && name_id != 0 ? use(name_id).name : Name();
  domain_names_.emplace(domain, name);
  return name;
}

Name ConnPass::category_name(uint16_t domain, uint32_t category) {
  const uint64_t key = category_key(domain, category);
  auto cached = category_names_.find(key);
  if (cached != category_names_.end()) return cached->second;
  uint32_t name_id = 0;
  if (auto it = categories_.find(key); it != categories_.end()) {
    name_id = it->second;
  } else if (scan_ != nullptr) {
    if (auto f = scan_->defs.categories.find(key); f != scan_->defs.categories.end()) name_id = f->second;
  } else {
    throw NeedsScan{"a category is used before the frame that names it"};
  }
  const Name name = name_id != 0 ? use(name_id).name : Name();
  category_names_.emplace(key, name);
  return name;
}

void ConnPass::define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
  switch (static_cast<wire::Kind>(r.kind)) {
    case wire::Kind::kString: {
      std::string text(reinterpret_cast<const char*>(extra), std::min<uint64_t>(r.a, extra_bytes));
      NameSlot* s = &slot(r.name);
      if (s->used) {
        if (s->text == text) return;
        // Used already under another text: later uses get a slot of their own.
        s = &extra_slots_.emplace_back();
        remap_[r.name] = s;
      }
      s->text = std::move(text);
      s->defined = true;
      return;
    }
    case wire::Kind::kDomain:
      domains_[r.domain] = r.name;
      domain_names_.erase(r.domain);
      return;
    case wire::Kind::kCategory: {
      const uint64_t key = category_key(r.domain, static_cast<uint32_t>(r.a));
      categories_[key] = r.name;
      category_names_.erase(key);
      return;
    }
    default: return;
  }
}

RowStats& ConnPass::side_row(int32_t& index) {
  if (index < 0) {
    index = static_cast<int32_t>(side_rows_.size());
    side_rows_.emplace_back();
  }
  return side_rows_[static_cast<size_t>(index)];
}

}  // namespace torchprof::engine
