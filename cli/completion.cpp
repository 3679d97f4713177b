#include "cli/completion.h"

#include <map>

namespace torchprof::cli {
namespace {

struct ValueSpec {
  std::vector<std::string> choices;
  ValueHint hint = ValueHint::kNone;
};

// Filled while the apps are defined (one process, one set of apps at a time).
std::map<const CLI::Option*, ValueSpec>& specs() {
  static std::map<const CLI::Option*, ValueSpec> table;
  return table;
}

bool takes_value(const CLI::Option* o) { return o->get_type_size_max() > 0 && o->get_expected_max() > 0; }

// The named option of `app` that `word` (e.g. "--sort", "-o") names, or null.
const CLI::Option* named_option(const CLI::App& app, const std::string& word) {
  for (const CLI::Option* o : app.get_options()) {
    if (!o->nonpositional()) continue;
    for (const std::string& l : o->get_lnames()) {
      if (word == "--" + l) return o;
    }
    for (const std::string& s : o->get_snames()) {
      if (word == "-" + s) return o;
    }
  }
  return nullptr;
}

void print_matching(const std::vector<std::string>& words, const std::string& prefix, const std::string& cur,
                    std::ostream& out) {
  for (const std::string& w : words) {
    if (w.compare(0, cur.size(), cur) == 0) out << prefix << w << "\n";
  }
}

void complete_value(const CLI::Option* o, const std::string& prefix, const std::string& cur, std::ostream& out) {
  auto it = specs().find(o);
  if (it == specs().end()) return;
  const ValueSpec& spec = it->second;
  if (spec.hint == ValueHint::kDirectory) {
    out << ":dirs\n";
  } else if (spec.hint == ValueHint::kRun) {
    out << ":files\n";
  } else if (spec.hint == ValueHint::kCommaList) {
    const size_t comma = cur.rfind(',');
    const std::string done = comma == std::string::npos ? "" : cur.substr(0, comma + 1);
    print_matching(spec.choices, prefix + done, cur.substr(done.size()), out);
  } else {
    print_matching(spec.choices, prefix, cur, out);
  }
}

void complete_option_names(const CLI::App& app, const std::string& cur, std::ostream& out) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    if (cur.size() <= 2) {
      for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    }
  }
  print_matching(names, "", cur, out);
}

// Words [first, cword) of `app`'s command line: whether the program (run) already began,
// and at which word; and whether word cword - 1 is an option waiting for its value.
struct Scan {
  size_t program = 0;  // 0: not yet
  const CLI::Option* pending = nullptr;
};

Scan scan_words(const CLI::App& app, bool is_run, const std::vector<std::string>& words, size_t first,
                size_t cword) {
  Scan scan;
  for (size_t i = first; i < cword; ++i) {
    const std::string& w = words[i];
    if (scan.pending) {
      scan.pending = nullptr;
      continue;
    }
    if (is_run && w == "--") {
      scan.program = i + 1;
      return scan;
    }
    if (w.size() > 1 && w[0] == '-') {
      const CLI::Option* o = named_option(app, w);
      if (o && takes_value(o)) scan.pending = o;
      continue;
    }
    if (is_run) {
      scan.program = i;
      return scan;
    }
  }
  return scan;
}

void complete_in(const CLI::App& app, bool is_run, const std::vector<std::string>& words, size_t first,
                 size_t cword, std::ostream& out) {
  const Scan scan = scan_words(app, is_run, words, first, cword);
  if (scan.program > 0) {
    out << ":command " << scan.program << "\n";
    return;
  }
  const std::string& cur = words[cword];
  if (scan.pending) {
    complete_value(scan.pending, "", cur, out);
    return;
  }
  if (const size_t eq = cur.find('='); cur.starts_with("--") && eq != std::string::npos) {
    if (const CLI::Option* o = named_option(app, cur.substr(0, eq))) complete_value(o, cur.substr(0, eq + 1), cur.substr(eq + 1), out);
    return;
  }
  if (cur.starts_with("-")) {
    complete_option_names(app, cur, out);
  } else if (is_run) {
    out << ":command " << cword << "\n";
  } else {
    out << ":files\n";
  }
}

}  // namespace

CLI::Option* with_choices(CLI::Option* option, std::vector<std::string> values, ValueHint hint, bool checked) {
  if (checked && hint != ValueHint::kCommaList) option->check(CLI::IsMember(values));
  specs()[option] = {std::move(values), hint};
  return option;
}

CLI::Option* with_hint(CLI::Option* option, ValueHint hint) {
  specs()[option].hint = hint;
  return option;
}

int complete_words(const CLI::App& root, bool run_only, const std::vector<std::string>& words, size_t cword,
                   std::ostream& out) {
  if (words.empty() || cword == 0 || cword >= words.size()) return 0;
  if (run_only) {
    complete_in(root, true, words, 1, cword, out);
    return 0;
  }
  // The subcommand is the first word that is not an option (torchprof's own are flags).
  for (size_t i = 1; i < cword; ++i) {
    if (words[i].starts_with("-")) continue;
    for (const CLI::App* sub : root.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == words[i]) complete_in(*sub, sub->get_name() == "run", words, i + 1, cword, out);
    }
    return 0;
  }
  const std::string& cur = words[cword];
  if (cur.starts_with("-")) {
    complete_option_names(root, cur, out);
    return 0;
  }
  std::vector<std::string> names;
  for (const CLI::App* sub : root.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  print_matching(names, "", cur, out);
  return 0;
}

}  // namespace torchprof::cli
