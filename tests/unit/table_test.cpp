#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/errors.h"
#include "formats/table.h"

namespace torchprof {

namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream file(std::string(TORCHPROF_FIXTURES_DIR) + "/torch_tables/" + name);
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

OpStats cpu_op(const std::string& name, int64_t self_us, int64_t total_us, uint64_t calls) {
  OpStats o;
  o.name = name;
  o.kind = "nvtx";
  o.calls = calls;
  o.self_cpu_ns = self_us * 1000;
  o.cpu_total_ns = total_us * 1000;
  return o;
}

// Removes the four memory columns (14 characters each) that torchprof does not show.
// In the header line "CUDA time avg" and "Self CUDA Mem" overflow their 12 columns by one.
std::string drop_memory_columns(const std::string& line, bool header) {
  const size_t name_part = 55 + 2;
  const size_t memory_at = name_part + 9 * 14 + (header ? 1 : 0);
  return line.substr(0, memory_at) + line.substr(memory_at + 4 * 14 + (header ? 1 : 0));
}

}  // namespace

TEST_CASE("table: reproduces torch 1.13's CPU key_averages table byte for byte") {
  std::vector<OpStats> ops = {
      cpu_op("aten::linear", 186, 2351, 3),
      cpu_op("aten::addmm", 1647, 1943, 3),
      cpu_op("autograd::engine::evaluate_function: AddmmBackward0", 74, 1065, 3),
      cpu_op("AddmmBackward0", 271, 924, 3),
      cpu_op("aten::sum", 673, 715, 7),
      cpu_op("aten::mm", 494, 629, 3),
      cpu_op("aten::randn", 395, 574, 3),
      cpu_op("Optimizer.step#SGD.step", 386, 466, 3),
  };
  // Rows below the cut: together with the shown rows they total 5.752ms of self CPU.
  for (int i = 0; i < 4; ++i) {
    OpStats filler = cpu_op("aten::filler" + std::to_string(i), 0, 0, 1);
    filler.self_cpu_ns = filler.cpu_total_ns = 406500;
    ops.insert(ops.begin() + i, filler);  // first-appearance order must not matter
  }
  TableRows rows = make_table_rows(ops, /*has_gpu=*/false, {"", 8});
  CHECK(rows.sort_key == "cpu_time_total");
  // Python's print() adds the final newline after table()'s own.
  CHECK(render_table(rows) + "\n" == read_fixture("cpu_key_averages_torch1.13.txt"));
}

TEST_CASE("table: CUDA columns, folded steps, truncated names match torch 2.x") {
  auto op = [](const std::string& name, int64_t self_cpu, int64_t cpu, int64_t self_cuda,
               int64_t cuda, uint64_t calls) {
    OpStats o;
    o.name = name;
    o.calls = calls;
    o.self_cpu_ns = self_cpu;
    o.cpu_total_ns = cpu;
    o.self_cuda_ns = self_cuda;
    o.cuda_total_ns = cuda;
    return o;
  };
  std::vector<OpStats> ops;
  // ProfilerStep#N rows fold into one ProfilerStep* row (3 calls).
  ops.push_back(op("ProfilerStep#4", 112409, 190662000, 0, 12898000, 1));
  ops.push_back(op("ProfilerStep#5", 112409, 190662000, 0, 12899000, 1));
  ops.push_back(op("ProfilerStep#6", 112410, 190662000, 0, 12899000, 1));
  ops.push_back(op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 258480000,
                   452836000, 0, 0, 3));
  ops.push_back(op("aten::_local_scalar_dense", 33658, 101711000, 3584, 3584, 3));
  ops.push_back(op("cudaStreamSynchronize", 101645000, 101645000, 0, 0, 3));
  ops.push_back(op("train_step", 9858000, 16653000, 0, 37244000, 3));
  ops.push_back(op("aten::copy_", 1198000, 1316790, 3467970, 3467970, 30));
  ops.push_back(op("aten::mm", 828708, 1133016, 25366482, 25366482, 102));
  ops.push_back(op("Optimizer.step#AdamW.step", 859283, 1032183, 0, 483613, 3));
  // Unseen rows so that the totals are the real run's: ~612.39ms self CPU, 148.6ms self CUDA.
  int64_t self_cpu = 0, self_cuda = 0;
  for (const OpStats& o : ops) {
    self_cpu += o.self_cpu_ns;
    self_cuda += o.self_cuda_ns;
  }
  const int fillers = 300;
  for (int i = 0; i < fillers; ++i) {
    int64_t cpu_share = (612385000 - self_cpu) / fillers;
    int64_t cuda_share = (148600000 - self_cuda) / fillers;
    ops.push_back(op("x" + std::to_string(i), cpu_share, cpu_share, cuda_share, cuda_share, 1));
  }
  TableRows rows = make_table_rows(ops, /*has_gpu=*/false, {"cpu_time_total", 8});
  CHECK(rows.has_gpu);
  std::vector<std::string> ours = lines_of(render_table(rows));
  std::vector<std::string> torch = lines_of(read_fixture("cuda_key_averages_torch2.x_excerpt.txt"));
  REQUIRE(torch.size() == 11);
  REQUIRE(ours.size() == 14);  // rule, header, rule, 8 rows, rule, 2 trailer lines
  for (size_t i = 0; i < 11; ++i) {
    CAPTURE(i);
    CHECK(ours[i] == drop_memory_columns(torch[i], /*header=*/i == 1));
  }
  CHECK(ours[12].rfind("Self CPU time total: 612.", 0) == 0);
  CHECK(ours[13].rfind("Self CUDA time total: 148.", 0) == 0);
}

TEST_CASE("table: formats, widths by code point, sort keys") {
  CHECK(format_time_us(999.9994) == "999.999us");
  CHECK(format_time_us(1000.0) == "1.000ms");
  CHECK(format_time_us(2.5e6) == "2.500s");
  CHECK(format_share(1, 3) == "33.33%");
  CHECK(format_share(0, 0) == "NaN");
  CHECK(utf8_length("größe") == 5);
  CHECK(utf8_prefix("αβγδ", 2) == "αβ");

  std::vector<OpStats> ops = {cpu_op("größe", 10, 30, 1), cpu_op("ab", 20, 20, 4)};
  TableRows rows = make_table_rows(ops, false, {"", 0});
  CHECK(rows.name_width == 9);
  std::vector<std::string> lines = lines_of(render_table(rows));
  CHECK(lines[3] == "    größe        33.33%      10.000us       100.00%      30.000us      30.000us"
                    "             1  ");
  CHECK(lines[4].substr(0, 9) == "       ab");

  CHECK(make_table_rows(ops, false, {"count", 0}).rows[0].name == "ab");
  CHECK(make_table_rows(ops, false, {"self_cpu_time_total", 0}).rows[0].name == "ab");
  CHECK(make_table_rows(ops, false, {"cpu_time", 0}).rows[0].name == "größe");
  CHECK(make_table_rows(ops, false, {"cpu_time_total", 1}).rows.size() == 1);
  try {
    make_table_rows(ops, false, {"gpu_time", 0});
    FAIL("unknown key accepted");
  } catch (const InputError& e) {
    std::string message = e.what();
    CHECK(message.find("'gpu_time'") != std::string::npos);
    CHECK(message.find("self_cuda_time_total") != std::string::npos);
  }

  std::string long_name(60, 'n');
  rows = make_table_rows({cpu_op(long_name, 1, 1, 1)}, false, {"", 0});
  CHECK(rows.name_width == 55);
  CHECK(lines_of(render_table(rows))[3].substr(0, 55) == std::string(52, 'n') + "...");
}

TEST_CASE("table: csv, markdown and json carry the same rows") {
  std::vector<OpStats> ops = {cpu_op("a,b", 10, 30, 2), cpu_op("c|d", 20, 20, 4)};
  TableRows rows = make_table_rows(ops, false, {"", 0});
  std::vector<std::string> csv = lines_of(render_csv(rows));
  REQUIRE(csv.size() == 3);
  CHECK(csv[0].rfind("Name,Self CPU %,Self CPU (us)", 0) == 0);
  CHECK(csv[1] == "\"a,b\",33.33,10.000,100.00,30.000,15.000,2");
  std::string md = render_markdown(rows);
  CHECK(md.find("| c\\|d |") != std::string::npos);
  CHECK(md.find("| Name | Self CPU % |") == 0);
  auto j = nlohmann::json::parse(render_json(rows));
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["name"] == "a,b");
  CHECK(j["rows"][0]["cpu_total_ns"] == 30000);
  CHECK(j["self_cpu_time_total_ns"] == 30000);
}

// torch 2.6's own table of a Conv2d(3, 8, 3, 2, 1) on [2, 3, 16, 16] and a [4, 5] by [5, 6]
// mm under with_flops: the unit is the smallest count's (240: FLOPs), "--" where none.
TEST_CASE("table: torch's Total FLOPs column, scaled by the smallest count") {
  std::vector<OpStats> ops = {cpu_op("aten::conv2d", 133, 25109, 1), cpu_op("aten::convolution", 150, 24976, 1),
                              cpu_op("aten::mm", 20, 30, 1)};
  for (OpStats& o : ops) o.kind = "cpu_op";
  ops[0].flops = 55296;
  ops[2].flops = 240;
  TableRows rows = make_table_rows(ops, false, {"", 0});
  CHECK(rows.flops_header == "Total FLOPs");
  std::vector<std::string> lines = lines_of(render_table(rows));
  CHECK(lines[1].ends_with("# of Calls   Total FLOPs  "));
  CHECK(lines[3].ends_with("             1     55296.000  "));
  CHECK(lines[4].ends_with("             1            --  "));
  CHECK(lines[5].ends_with("             1       240.000  "));
  CHECK(lines_of(render_csv(rows))[1].ends_with(",1,55296"));
  CHECK(nlohmann::json::parse(render_json(rows))["rows"][0]["flops"] == 55296);

  // The same counts over several steps' rows add up; a smallest of 1,500 reads in KFLOPs.
  ops[2].flops = 1500;
  OpStats again = ops[0];
  again.name = "aten::conv2d";
  ops.push_back(again);
  rows = make_table_rows(ops, false, {"", 0});
  CHECK(rows.flops_header == "Total KFLOPs");
  CHECK(rows.rows[0].flops == 2 * 55296);
  CHECK(format_flops(2 * 55296, rows.flops_scale) == " 110.592");
  CHECK(format_flops(1500, rows.flops_scale) == "   1.500");

  // No counts: no column.
  for (OpStats& o : ops) o.flops = 0;
  CHECK(make_table_rows(ops, false, {"", 0}).flops_header.empty());
}

}  // namespace torchprof
