#include "grammar/earley.h"

#include <algorithm>
#include <stdexcept>

namespace tandem::grammar {

namespace {

enum class Decoded { kComplete, kPartial, kInvalid };

// The code point starting at s[i]: kComplete with [cp, cp] and its length, or kPartial with the
// range of code points whose encoding starts with the bytes up to the end of s.
Decoded decode(std::string_view s, size_t i, uint32_t& lo, uint32_t& hi, int& len) {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  uint32_t min_cp;
  if (b < 0x80) {
    lo = hi = b, len = 1;
    return Decoded::kComplete;
  } else if (b >= 0xC2 && b <= 0xDF) {
    len = 2, lo = hi = b & 0x1F, min_cp = 0x80;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, lo = hi = b & 0x0F, min_cp = 0x800;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, lo = hi = b & 0x07, min_cp = 0x10000;
  } else {
    return Decoded::kInvalid;
  }
  bool partial = false;
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      partial = true;
      lo = (lo << 6), hi = (hi << 6) | 0x3F;
      continue;
    }
    const uint8_t c = static_cast<uint8_t>(s[i + k]);
    if ((c & 0xC0) != 0x80) return Decoded::kInvalid;
    lo = (lo << 6) | (c & 0x3F), hi = (hi << 6) | (c & 0x3F);
  }
  const uint32_t max_cp = len == 2 ? 0x7FF : len == 3 ? 0xFFFF : 0x10FFFF;
  lo = std::max(lo, min_cp), hi = std::min(hi, max_cp);
  if (lo > hi) return Decoded::kInvalid;  // overlong or above U+10FFFF
  return partial ? Decoded::kPartial : Decoded::kComplete;
}

uint64_t pack(const EarleyRecognizer::Item& it) {
  return (static_cast<uint64_t>(it.prod) << 40) | (static_cast<uint64_t>(it.dot) << 24) |
         static_cast<uint64_t>(it.origin);
}

size_t slot_of(uint64_t key, size_t mask) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}

}  // namespace

bool EarleyRecognizer::Set::insert(const Item& it) {
  if (table.size() < 2 * (items.size() + 1)) {
    std::vector<uint64_t> old(std::max<size_t>(16, table.size() * 2), 0);
    old.swap(table);
    for (uint64_t k : old) {
      if (k == 0) continue;
      size_t i = slot_of(k - 1, table.size() - 1);
      while (table[i] != 0) i = (i + 1) & (table.size() - 1);
      table[i] = k;
    }
  }
  const uint64_t key = pack(it);
  size_t i = slot_of(key, table.size() - 1);
  while (table[i] != 0) {
    if (table[i] == key + 1) return false;
    i = (i + 1) & (table.size() - 1);
  }
  table[i] = key + 1;
  items.push_back(it);
  return true;
}

bool EarleyRecognizer::Set::contains(const Item& it) const {
  if (table.empty()) return false;
  const uint64_t key = pack(it);
  size_t i = slot_of(key, table.size() - 1);
  while (table[i] != 0) {
    if (table[i] == key + 1) return true;
    i = (i + 1) & (table.size() - 1);
  }
  return false;
}

int32_t EarleyRecognizer::new_nonterm() {
  prods_of_.emplace_back();
  return static_cast<int32_t>(prods_of_.size()) - 1;
}

void EarleyRecognizer::add_prod(int32_t lhs, std::vector<Sym> rhs) {
  prods_of_[lhs].push_back(static_cast<int32_t>(rhs_.size()));
  lhs_.push_back(lhs);
  rhs_.push_back(std::move(rhs));
}

std::vector<EarleyRecognizer::Sym> EarleyRecognizer::lower(const ir::Grammar& g, int32_t id) {
  const ir::Expr& e = g.exprs[id];
  std::vector<Sym> out;
  switch (e.op) {
    case ir::Op::kLiteral:
      for (char c : e.bytes) out.push_back({kByte, static_cast<uint8_t>(c)});
      break;
    case ir::Op::kClass:
      classes_.push_back(ir::class_code_points(e));
      out.push_back({kClass, static_cast<int32_t>(classes_.size()) - 1});
      break;
    case ir::Op::kRef:
      out.push_back({kNonterm, e.rule});
      break;
    case ir::Op::kSeq:
      for (int32_t c : e.items) {
        auto part = lower(g, c);
        out.insert(out.end(), part.begin(), part.end());
      }
      break;
    case ir::Op::kChoice: {
      const int32_t n = new_nonterm();
      for (int32_t c : e.items) add_prod(n, lower(g, c));
      out.push_back({kNonterm, n});
      break;
    }
    case ir::Op::kRepeat: {
      const std::vector<Sym> x = lower(g, e.items[0]);
      auto x_then = [&](int32_t next) {
        std::vector<Sym> r = x;
        r.push_back({kNonterm, next});
        return r;
      };
      // tail: x* or x{0,max-min} as T_j -> "" | x T_{j-1}; then min required copies in front.
      int32_t tail = new_nonterm();
      add_prod(tail, {});
      if (e.max == ir::kUnbounded) {
        add_prod(tail, x_then(tail));
      } else {
        for (int32_t j = 1; j <= e.max - e.min; ++j) {
          const int32_t t = new_nonterm();
          add_prod(t, {});
          add_prod(t, x_then(tail));
          tail = t;
        }
      }
      for (int32_t k = 0; k < e.min; ++k) {
        const int32_t r = new_nonterm();
        add_prod(r, x_then(tail));
        tail = r;
      }
      out.push_back({kNonterm, tail});
      break;
    }
  }
  return out;
}

EarleyRecognizer::EarleyRecognizer(const ir::Grammar& g) {
  for (size_t r = 0; r < g.rules.size(); ++r) new_nonterm();
  for (size_t r = 0; r < g.rules.size(); ++r)
    add_prod(static_cast<int32_t>(r), lower(g, g.rules[r].body));
  const int32_t start = new_nonterm();
  start_prod_ = static_cast<int32_t>(rhs_.size());
  add_prod(start, {{kNonterm, g.root}});
  reduce();
  // Items pack into 64 bits: production 24, dot 16, origin 24.
  size_t longest = 0;
  for (const auto& r : rhs_) longest = std::max(longest, r.size());
  if (rhs_.size() >= (1u << 24) || longest >= (1u << 16)) {
    throw std::length_error("EarleyRecognizer: grammar too large for the reference recognizer");
  }
}

// Drops productions that use a symbol deriving no string, so that every item reachable in the
// chart can still be completed: then "the last set is non-empty" means "viable prefix".
void EarleyRecognizer::reduce() {
  const size_t nt = prods_of_.size();
  std::vector<uint8_t> productive(nt, 0);
  auto sym_ok = [&](const Sym& s) {
    if (s.kind == kByte) return true;
    if (s.kind == kClass) return !classes_[s.v].empty();
    return productive[s.v] != 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t p = 0; p < rhs_.size(); ++p) {
      if (productive[lhs_[p]]) continue;
      if (std::all_of(rhs_[p].begin(), rhs_[p].end(), sym_ok))
        productive[lhs_[p]] = 1, changed = true;
    }
  }
  for (auto& list : prods_of_) {
    std::erase_if(list,
                  [&](int32_t p) { return !std::all_of(rhs_[p].begin(), rhs_[p].end(), sym_ok); });
  }
  nullable_.assign(nt, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t n = 0; n < nt; ++n) {
      if (nullable_[n]) continue;
      for (int32_t p : prods_of_[n]) {
        if (std::all_of(rhs_[p].begin(), rhs_[p].end(),
                        [&](const Sym& s) { return s.kind == kNonterm && nullable_[s.v]; })) {
          nullable_[n] = 1, changed = true;
          break;
        }
      }
    }
  }
}

bool EarleyRecognizer::in_class(int32_t c, uint32_t lo, uint32_t hi) const {
  for (const ir::CodeRange& r : classes_[c])
    if (r.lo <= hi && lo <= r.hi) return true;
  return false;
}

void EarleyRecognizer::add(Chart& c, size_t at, Item it) const {
  c.sets[at].insert(it);
}

// A class item in set i consumes one whole code point; only ends past min_end are added (the
// others were added when set i was first processed).
void EarleyRecognizer::scan_class(Chart& c, size_t i, const Item& it, size_t min_end) const {
  if (i >= c.input.size()) return;
  uint32_t lo, hi;
  int len;
  if (decode(c.input, i, lo, hi, len) != Decoded::kComplete) return;
  if (i + len <= min_end) return;
  if (in_class(rhs_[it.prod][it.dot].v, lo, hi)) add(c, i + len, {it.prod, it.dot + 1, it.origin});
}

void EarleyRecognizer::process(Chart& c, size_t i) const {
  for (size_t k = 0; k < c.sets[i].items.size(); ++k) {
    const Item it = c.sets[i].items[k];
    const auto& rhs = rhs_[it.prod];
    if (it.dot == static_cast<int32_t>(rhs.size())) {
      const int32_t lhs = lhs_[it.prod];
      // Completion; items of set i itself that wait on a nullable lhs were advanced at
      // prediction (Aycock and Horspool), so scanning the set as it stands now is enough.
      const Set& from = c.sets[it.origin];
      for (size_t j = 0; j < from.items.size(); ++j) {
        const Item w = from.items[j];
        const auto& wr = rhs_[w.prod];
        if (w.dot < static_cast<int32_t>(wr.size()) && wr[w.dot].kind == kNonterm &&
            wr[w.dot].v == lhs) {
          add(c, i, {w.prod, w.dot + 1, w.origin});
        }
      }
      continue;
    }
    const Sym s = rhs[it.dot];
    if (s.kind == kNonterm) {
      for (int32_t p : prods_of_[s.v]) add(c, i, {p, 0, static_cast<int32_t>(i)});
      if (nullable_[s.v]) add(c, i, {it.prod, it.dot + 1, it.origin});
    } else if (s.kind == kByte) {
      if (i < c.input.size() && static_cast<uint8_t>(c.input[i]) == s.v) {
        add(c, i + 1, {it.prod, it.dot + 1, it.origin});
      }
    } else {
      scan_class(c, i, it, 0);
    }
  }
}

EarleyRecognizer::Chart EarleyRecognizer::start() const {
  Chart c;
  c.sets.resize(1);
  if (!prods_of_[lhs_[start_prod_]].empty()) add(c, 0, {start_prod_, 0, 0});
  process(c, 0);
  return c;
}

void EarleyRecognizer::extend(Chart& c, std::string_view bytes) const {
  const size_t old_n = c.input.size();
  c.input += bytes;
  const size_t n = c.input.size();
  c.sets.resize(n + 1);
  // Scans out of the finished sets that needed the new bytes.
  for (size_t i = old_n >= 3 ? old_n - 3 : 0; i <= old_n; ++i) {
    for (size_t k = 0; k < c.sets[i].items.size(); ++k) {
      const Item it = c.sets[i].items[k];
      const auto& rhs = rhs_[it.prod];
      if (it.dot == static_cast<int32_t>(rhs.size())) continue;
      const Sym s = rhs[it.dot];
      if (s.kind == kClass) {
        scan_class(c, i, it, old_n);
      } else if (s.kind == kByte && i == old_n && static_cast<uint8_t>(c.input[i]) == s.v) {
        add(c, i + 1, {it.prod, it.dot + 1, it.origin});
      }
    }
  }
  for (size_t i = old_n + 1; i <= n; ++i) process(c, i);
}

void EarleyRecognizer::truncate(Chart& c, size_t n) const {
  c.input.resize(n);
  c.sets.resize(n + 1);
}

bool EarleyRecognizer::viable(const Chart& c) const {
  const size_t n = c.input.size();
  if (!c.sets[n].items.empty()) return true;
  // A code point cut by the end of the input.
  for (size_t i = n >= 3 ? n - 3 : 0; i < n; ++i) {
    uint32_t lo, hi;
    int len;
    if (decode(c.input, i, lo, hi, len) != Decoded::kPartial) continue;
    for (const Item& it : c.sets[i].items) {
      const auto& rhs = rhs_[it.prod];
      if (it.dot < static_cast<int32_t>(rhs.size()) && rhs[it.dot].kind == kClass &&
          in_class(rhs[it.dot].v, lo, hi)) {
        return true;
      }
    }
  }
  return false;
}

bool EarleyRecognizer::complete(const Chart& c) const {
  return c.sets[c.input.size()].contains({start_prod_, 1, 0});
}

bool EarleyRecognizer::is_prefix(std::string_view bytes) const {
  Chart c = start();
  extend(c, bytes);
  return viable(c);
}

bool EarleyRecognizer::is_sentence(std::string_view bytes) const {
  Chart c = start();
  extend(c, bytes);
  return complete(c);
}

}  // namespace tandem::grammar
