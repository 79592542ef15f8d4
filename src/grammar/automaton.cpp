#include "grammar/automaton.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

#include "grammar/analysis.h"
#include "grammar/grammar.h"
#include "grammar/inline_plan.h"
#include "grammar/utf8_ranges.h"

namespace tandem::grammar {

namespace {

// One rule's NFA with epsilon edges, node ids local to the rule.
struct EpsNfa {
  struct Node {
    std::vector<int32_t> eps;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;  // ret is a local node
  };
  std::vector<Node> nodes;
  int32_t add() {
    // Bounded repeats multiply: ("a"{100}){100}{100} would be a million nodes, each needing a
    // mask walk. Refuse before memory and compile time run away.
    if (++*budget_used > kMaxNodes) {
      throw GrammarError("grammar too large: over " + std::to_string(kMaxNodes) +
                         " automaton nodes (bounded repetitions expand into copies)");
    }
    nodes.emplace_back();
    return static_cast<int32_t>(nodes.size()) - 1;
  }
  static constexpr int64_t kMaxNodes = 200000;
  int64_t* budget_used = nullptr;  // shared by all rules of the grammar
};

class RuleBuilder {
 public:
  RuleBuilder(const ir::Grammar& g, const ir::Analysis& a, const InlinePlan& plan,
              std::vector<int32_t>& called)
      : g_(g), a_(a), plan_(plan), called_(called) {}

  // Paths from `from` to `to` spell exactly the expression; only edges out of `from`, into `to`
  // and among fresh nodes are added, so constructs compose without leaking into each other.
  void build(EpsNfa& m, int32_t id, int32_t from, int32_t to) {
    const ir::Expr& e = g_.exprs[id];
    switch (e.op) {
      case ir::Op::kLiteral: {
        if (e.bytes.empty()) {
          m.nodes[from].eps.push_back(to);
          return;
        }
        int32_t cur = from;
        for (size_t i = 0; i < e.bytes.size(); ++i) {
          const int32_t next = i + 1 == e.bytes.size() ? to : m.add();
          const uint8_t b = static_cast<uint8_t>(e.bytes[i]);
          m.nodes[cur].bytes.push_back({b, b, next});
          cur = next;
        }
        return;
      }
      case ir::Op::kClass:
        build_class(m, ir::class_code_points(e), from, to);
        return;
      case ir::Op::kRef:
        if (!a_.productive[e.rule]) return;  // matches nothing: no path
        if (plan_.inlined(e.rule)) {
          build(m, g_.rules[e.rule].body, from, to);
        } else {
          m.nodes[from].calls.push_back({e.rule, to});
          // A callee that may match "" may also be skipped: then the caller's acceptance and
          // first bytes account for it without expanding the call.
          if (a_.nullable[e.rule]) m.nodes[from].eps.push_back(to);
          called_.push_back(e.rule);
        }
        return;
      case ir::Op::kSeq: {
        int32_t cur = from;
        for (size_t i = 0; i < e.items.size(); ++i) {
          const int32_t next = i + 1 == e.items.size() ? to : m.add();
          build(m, e.items[i], cur, next);
          cur = next;
        }
        return;
      }
      case ir::Op::kChoice:
        for (int32_t c : e.items) build(m, c, from, to);
        return;
      case ir::Op::kRepeat: {
        const Repeat rep = fold_repeats(e);
        const int32_t x = rep.item;
        int32_t cur = from;
        for (int32_t k = 0; k < rep.min; ++k) {
          const int32_t next = (k + 1 == rep.min && rep.max == rep.min) ? to : m.add();
          build(m, x, cur, next);
          cur = next;
        }
        if (rep.max == rep.min) {
          if (rep.min == 0) m.nodes[from].eps.push_back(to);
          return;
        }
        if (rep.max == ir::kUnbounded) {
          const int32_t loop = m.add();  // fresh, so the loop cannot re-enter `from`
          m.nodes[cur].eps.push_back(loop);
          build(m, x, loop, loop);
          m.nodes[loop].eps.push_back(to);
          return;
        }
        // x{0,k} nested as (x (x ...)?)?: one path per count, no ambiguity.
        for (int32_t j = 0; j < rep.max - rep.min; ++j) {
          m.nodes[cur].eps.push_back(to);
          const int32_t next = m.add();
          build(m, x, cur, next);
          cur = next;
        }
        m.nodes[cur].eps.push_back(to);
        return;
      }
    }
  }

 private:
  struct Repeat {
    int32_t item;
    int32_t min, max;
  };
  // A quantifier on a quantifier, as one quantifier where the language allows: x+ builds x
  // twice (once, then the loop), so ("ab"+)+++ would double per level (the grammar fuzzer's
  // 13 stacked '+' took a minute to compile). (x{a,}){b,B} is x{ab,} when the inner repeat may
  // run once or not at all (a <= 1, B >= 1), or when both are unbounded and b >= 1 (any count
  // from ab up splits into b parts of at least a); (x?){b,} is x*; (x?)? is x?. Anything else
  // (such as (x{2,})*, which cannot match one x) is built as written.
  Repeat fold_repeats(const ir::Expr& e) const {
    Repeat r{e.items[0], e.min, e.max};
    for (;;) {
      const ir::Expr& in = g_.exprs[r.item];
      if (in.op != ir::Op::kRepeat || in.max == 0 || r.max == 0) return r;
      const int64_t a = in.min, b = r.min;
      const bool inner_unbounded = in.max == ir::kUnbounded;
      const bool outer_unbounded = r.max == ir::kUnbounded;
      if (inner_unbounded && (a <= 1 || (outer_unbounded && b >= 1))) {
        if (a * b > std::numeric_limits<int32_t>::max()) return r;  // refused by size anyway
        r = {in.items[0], static_cast<int32_t>(a * b), ir::kUnbounded};
      } else if (a == 0 && in.max == 1 && outer_unbounded) {
        r = {in.items[0], 0, ir::kUnbounded};
      } else if (a == 0 && in.max == 1 && b == 0 && r.max == 1) {
        r = {in.items[0], 0, 1};
      } else {
        return r;
      }
    }
  }

  // UTF-8 paths with shared suffixes: every multi-byte sequence ends in runs of [80-BF], so the
  // class costs a handful of nodes however many ranges it has.
  void build_class(EpsNfa& m, const std::vector<ir::CodeRange>& cps, int32_t from, int32_t to) {
    std::map<std::vector<std::pair<uint8_t, uint8_t>>, int32_t> suffix_node;
    for (const ByteSeq& seq : utf8_sequences(cps)) {
      int32_t next = to;
      // Walk the sequence from its end, reusing the node that already reads the same suffix.
      std::vector<std::pair<uint8_t, uint8_t>> suffix;
      for (size_t i = seq.size() - 1; i >= 1; --i) {
        suffix.insert(suffix.begin(), {seq[i].lo, seq[i].hi});
        auto [it, fresh] = suffix_node.try_emplace(suffix, -1);
        if (fresh) {
          it->second = m.add();
          m.nodes[it->second].bytes.push_back({seq[i].lo, seq[i].hi, next});
        }
        next = it->second;
      }
      m.nodes[from].bytes.push_back({seq[0].lo, seq[0].hi, next});
    }
  }

  const ir::Grammar& g_;
  const ir::Analysis& a_;
  const InlinePlan& plan_;
  std::vector<int32_t>& called_;
};

// One rule after epsilon elimination, trimming and merging; node 0 is the start.
struct RuleNfa {
  std::vector<uint8_t> accept;
  std::vector<std::vector<ByteEdge>> bytes;
  std::vector<std::vector<CallEdge>> calls;
  size_t size() const { return accept.size(); }
};

void normalize_edges(std::vector<ByteEdge>& es) {
  std::sort(es.begin(), es.end(), [](const ByteEdge& a, const ByteEdge& b) {
    return a.to != b.to ? a.to < b.to : a.lo < b.lo;
  });
  std::vector<ByteEdge> out;
  for (const ByteEdge& e : es) {
    if (!out.empty() && out.back().to == e.to && e.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, e.hi);
    } else {
      out.push_back(e);
    }
  }
  std::sort(out.begin(), out.end(), [](const ByteEdge& a, const ByteEdge& b) {
    return a.lo != b.lo ? a.lo < b.lo : a.to < b.to;
  });
  es = std::move(out);
}

void normalize_calls(std::vector<CallEdge>& cs) {
  std::sort(cs.begin(), cs.end(), [](const CallEdge& a, const CallEdge& b) {
    return a.rule != b.rule ? a.rule < b.rule : a.ret < b.ret;
  });
  cs.erase(std::unique(cs.begin(), cs.end(),
                       [](const CallEdge& a, const CallEdge& b) {
                         return a.rule == b.rule && a.ret == b.ret;
                       }),
           cs.end());
}

RuleNfa eliminate_epsilons(const EpsNfa& m, int32_t start, int32_t end) {
  const int32_t n = static_cast<int32_t>(m.nodes.size());
  // Nodes that survive: the start and every node entered by consuming a byte or returning.
  std::vector<int32_t> keep_id(n, -1);
  std::vector<int32_t> kept{start};
  keep_id[start] = 0;
  for (const auto& node : m.nodes) {
    for (const ByteEdge& e : node.bytes)
      if (keep_id[e.to] < 0)
        keep_id[e.to] = static_cast<int32_t>(kept.size()), kept.push_back(e.to);
    for (const CallEdge& c : node.calls)
      if (keep_id[c.ret] < 0)
        keep_id[c.ret] = static_cast<int32_t>(kept.size()), kept.push_back(c.ret);
  }
  RuleNfa r;
  r.accept.assign(kept.size(), 0);
  r.bytes.resize(kept.size());
  r.calls.resize(kept.size());
  std::vector<int32_t> mark(n, -1), stack;
  for (size_t k = 0; k < kept.size(); ++k) {
    stack = {kept[k]};
    mark[kept[k]] = static_cast<int32_t>(k);
    while (!stack.empty()) {
      const int32_t u = stack.back();
      stack.pop_back();
      if (u == end) r.accept[k] = 1;
      for (const ByteEdge& e : m.nodes[u].bytes) r.bytes[k].push_back({e.lo, e.hi, keep_id[e.to]});
      for (const CallEdge& c : m.nodes[u].calls) r.calls[k].push_back({c.rule, keep_id[c.ret]});
      for (int32_t v : m.nodes[u].eps)
        if (mark[v] != static_cast<int32_t>(k))
          mark[v] = static_cast<int32_t>(k), stack.push_back(v);
    }
  }
  return r;
}

// Keeps the nodes on some path from the start to an accepting node; renumbers, start stays 0.
RuleNfa trim(const RuleNfa& r) {
  const size_t n = r.size();
  std::vector<std::vector<int32_t>> preds(n);
  std::vector<uint8_t> fwd(n, 0), bwd(n, 0);
  std::vector<int32_t> work{0};
  fwd[0] = 1;
  while (!work.empty()) {
    const int32_t u = work.back();
    work.pop_back();
    auto visit = [&](int32_t v) {
      preds[v].push_back(u);
      if (!fwd[v]) fwd[v] = 1, work.push_back(v);
    };
    for (const ByteEdge& e : r.bytes[u]) visit(e.to);
    for (const CallEdge& c : r.calls[u]) visit(c.ret);
  }
  for (size_t u = 0; u < n; ++u)
    if (fwd[u] && r.accept[u]) bwd[u] = 1, work.push_back(static_cast<int32_t>(u));
  while (!work.empty()) {
    const int32_t v = work.back();
    work.pop_back();
    for (int32_t u : preds[v])
      if (!bwd[u]) bwd[u] = 1, work.push_back(u);
  }
  std::vector<int32_t> id(n, -1);
  RuleNfa out;
  for (size_t u = 0; u < n; ++u) {
    if (fwd[u] && bwd[u])
      id[u] = static_cast<int32_t>(out.accept.size()), out.accept.push_back(r.accept[u]);
  }
  out.bytes.resize(out.size());
  out.calls.resize(out.size());
  for (size_t u = 0; u < n; ++u) {
    if (id[u] < 0) continue;
    for (const ByteEdge& e : r.bytes[u])
      if (id[e.to] >= 0) out.bytes[id[u]].push_back({e.lo, e.hi, id[e.to]});
    for (const CallEdge& c : r.calls[u])
      if (id[c.ret] >= 0) out.calls[id[u]].push_back({c.rule, id[c.ret]});
  }
  return out;
}

// A node's signature under a numbering of the nodes: acceptance, whether it is the start (which
// keeps its own class so that it stays node 0), then its normalized byte and call edges.
std::vector<int32_t> signature(uint8_t accept, bool start, const std::vector<ByteEdge>& bytes,
                               const std::vector<CallEdge>& calls) {
  std::vector<int32_t> sig{accept, start ? -1 : 0};
  for (const ByteEdge& e : bytes) sig.insert(sig.end(), {e.lo, e.hi, e.to});
  sig.push_back(-2);
  for (const CallEdge& c : calls) sig.insert(sig.end(), {c.rule, c.ret});
  return sig;
}

// Strongly connected components of the edge graph (bytes and call returns), iteratively
// (Tarjan): comp[u] is u's component, numbered in the order Tarjan closes them, so every edge
// goes to a component numbered no higher than its source's. Also whether each is a cycle.
void components(const RuleNfa& r, std::vector<int32_t>& comp, std::vector<uint8_t>& cyclic) {
  const int32_t n = static_cast<int32_t>(r.size());
  std::vector<int32_t> index(n, -1), low(n, 0), stack, succ;
  std::vector<uint8_t> on_stack(n, 0);
  comp.assign(n, -1);
  cyclic.clear();
  int32_t next = 0;
  struct Frame {
    int32_t u;
    size_t edge;  // next successor to visit: bytes first, then calls
  };
  std::vector<Frame> frames;
  const auto successor = [&](int32_t u, size_t i) {
    const size_t nb = r.bytes[u].size();
    return i < nb ? r.bytes[u][i].to : r.calls[u][i - nb].ret;
  };
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    frames.push_back({root, 0});
    index[root] = low[root] = next++;
    stack.push_back(root), on_stack[root] = 1;
    while (!frames.empty()) {
      Frame& f = frames.back();
      const int32_t u = f.u;
      if (f.edge < r.bytes[u].size() + r.calls[u].size()) {
        const int32_t v = successor(u, f.edge++);
        if (index[v] < 0) {
          index[v] = low[v] = next++;
          stack.push_back(v), on_stack[v] = 1;
          frames.push_back({v, 0});
        } else if (on_stack[v]) {
          low[u] = std::min(low[u], index[v]);
        }
        continue;
      }
      if (low[u] == index[u]) {  // u roots a component: pop it
        const int32_t c = static_cast<int32_t>(cyclic.size());
        bool cycle = false;
        for (;;) {
          const int32_t w = stack.back();
          stack.pop_back(), on_stack[w] = 0;
          comp[w] = c;
          if (w == u) break;
          cycle = true;
        }
        if (!cycle)  // a single node is a cycle only through an edge to itself
          for (size_t i = 0; i < r.bytes[u].size() + r.calls[u].size(); ++i)
            cycle = cycle || successor(u, i) == u;
        cyclic.push_back(cycle);
      }
      frames.pop_back();
      if (!frames.empty()) low[frames.back().u] = std::min(low[frames.back().u], low[u]);
    }
  }
}

// The automaton of the classes cls[u] in [0, classes) of r's nodes, each class taking its first
// node's acceptance and edges (edges to classes; every member's are the same under cls).
RuleNfa quotient(const RuleNfa& r, const std::vector<int32_t>& cls, int32_t classes) {
  RuleNfa out;
  out.accept.assign(classes, 0);
  out.bytes.resize(classes);
  out.calls.resize(classes);
  std::vector<uint8_t> done(classes, 0);
  for (size_t u = 0; u < r.size(); ++u) {
    const int32_t c = cls[u];
    if (done[c]) continue;
    done[c] = 1;
    out.accept[c] = r.accept[u];
    for (const ByteEdge& e : r.bytes[u]) out.bytes[c].push_back({e.lo, e.hi, cls[e.to]});
    for (const CallEdge& e : r.calls[u]) out.calls[c].push_back({e.rule, cls[e.ret]});
  }
  return out;
}

// Merges nodes with identical acceptance and edges until nothing changes: the copies a bounded
// repeat or a shared class suffix leaves behind collapse from the end backwards.
//
// The fixpoint alone merges one layer of a chain of copies per pass (a pass is a sort of every
// node's signature), so a long chain cost as many passes as it has nodes. First, one pass over
// the nodes outside cycles, successors first, merges each into an earlier node with the same
// signature under the classes found so far (every such merge is one the fixpoint makes too); the
// fixpoint then runs on that quotient, for the cycles and whatever merges they enable. Classes
// are numbered by their first node, which is the numbering the fixpoint alone arrives at, so the
// result is the same automaton, node for node.
RuleNfa merge_identical(RuleNfa r) {
  {
    const size_t n = r.size();
    std::vector<int32_t> comp;
    std::vector<uint8_t> cyclic;
    components(r, comp, cyclic);
    std::vector<std::vector<int32_t>> members(cyclic.size());
    for (size_t u = 0; u < n; ++u) members[comp[u]].push_back(static_cast<int32_t>(u));
    std::vector<int32_t> cls(n, -1);
    int32_t classes = 0;
    std::map<std::vector<int32_t>, int32_t> sig_id;
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
    for (size_t c = 0; c < cyclic.size(); ++c) {  // successors' components first
      if (cyclic[c]) {
        for (int32_t u : members[c]) cls[u] = classes++;
        continue;
      }
      const int32_t u = members[c].front();
      bytes.clear(), calls.clear();
      for (const ByteEdge& e : r.bytes[u]) bytes.push_back({e.lo, e.hi, cls[e.to]});
      for (const CallEdge& e : r.calls[u]) calls.push_back({e.rule, cls[e.ret]});
      normalize_edges(bytes), normalize_calls(calls);
      auto [it, fresh] = sig_id.try_emplace(signature(r.accept[u], u == 0, bytes, calls), classes);
      if (fresh) ++classes;
      cls[u] = it->second;
    }
    if (classes < static_cast<int32_t>(n)) {
      std::vector<int32_t> id(classes, -1);  // renumbered by first node
      int32_t m = 0;
      for (size_t u = 0; u < n; ++u)
        if (id[cls[u]] < 0) id[cls[u]] = m++;
      for (int32_t& c : cls) c = id[c];
      r = quotient(r, cls, m);
    }
  }
  for (;;) {
    const size_t n = r.size();
    for (size_t u = 0; u < n; ++u) normalize_edges(r.bytes[u]), normalize_calls(r.calls[u]);
    std::map<std::vector<int32_t>, int32_t> sig_id;
    std::vector<int32_t> cls(n);
    int32_t classes = 0;
    for (size_t u = 0; u < n; ++u) {
      auto [it, fresh] =
          sig_id.try_emplace(signature(r.accept[u], u == 0, r.bytes[u], r.calls[u]), classes);
      if (fresh) ++classes;
      cls[u] = it->second;
    }
    if (classes == static_cast<int32_t>(n)) return r;
    r = quotient(r, cls, classes);
  }
}

}  // namespace

Automaton build_automaton(const ir::Grammar& g, const AutomatonOptions& opt) {
  const ir::Analysis a = ir::analyze(g);
  const InlinePlan plan(g, a, opt.inline_max_nodes);
  Automaton out;
  const size_t nrules = g.rules.size();
  out.root = g.root;
  out.rule_start.assign(nrules, -1);
  out.return_nodes.resize(nrules);
  for (const ir::Rule& r : g.rules) out.rule_names.push_back(r.name);
  out.byte_begin.push_back(0);
  out.call_begin.push_back(0);

  int64_t nodes_built = 0;
  std::vector<int32_t> work{g.root}, called;
  std::vector<uint8_t> queued(nrules, 0);
  queued[g.root] = 1;
  while (!work.empty()) {
    const int32_t rule = work.back();
    work.pop_back();
    EpsNfa m;
    m.budget_used = &nodes_built;
    const int32_t start = m.add(), end = m.add();
    called.clear();
    RuleBuilder(g, a, plan, called).build(m, g.rules[rule].body, start, end);
    for (int32_t c : called)
      if (!queued[c]) queued[c] = 1, work.push_back(c);
    const RuleNfa r = merge_identical(trim(eliminate_epsilons(m, start, end)));
    const int32_t base = out.num_nodes();
    out.rule_start[rule] = base;
    for (size_t u = 0; u < r.size(); ++u) {
      out.node_rule.push_back(rule);
      out.accept.push_back(r.accept[u]);
      for (const ByteEdge& e : r.bytes[u]) out.byte_edges.push_back({e.lo, e.hi, base + e.to});
      for (const CallEdge& c : r.calls[u]) {
        out.call_edges.push_back({c.rule, base + c.ret});
        out.return_nodes[c.rule].push_back(base + c.ret);
      }
      out.byte_begin.push_back(static_cast<int32_t>(out.byte_edges.size()));
      out.call_begin.push_back(static_cast<int32_t>(out.call_edges.size()));
    }
  }
  for (auto& v : out.return_nodes) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return out;
}

}  // namespace tandem::grammar
