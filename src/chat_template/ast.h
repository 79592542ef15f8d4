// The parsed template: expressions and statements, immutable after parsing so one template can
// render on many threads at once. Filters and tests are resolved to functions at parse time.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/operators.h"
#include "chat_template/value.h"

namespace tandem::jinja {

using FilterFn = Value (*)(Interp&, const Value& input, const CallArgs& args);
using TestFn = bool (*)(Interp&, const Value& input, const CallArgs& args);

struct Expr {
  enum class Kind {
    kLiteral,
    kName,
    kList,
    kTuple,
    kDict,
    kGetAttr,
    kGetItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNeg,
    kPos,
    kNot,
    kBinary,
    kConcat,
    kCompare,
    kAnd,
    kOr,
    kCondExpr,
  };
  Expr(Kind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  Kind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct LiteralExpr : Expr {
  LiteralExpr(Value v, int l) : Expr(Kind::kLiteral, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string n, int l) : Expr(Kind::kName, l), name(std::move(n)) {}
  std::string name;
};

struct SequenceExpr : Expr {  // kList or kTuple
  using Expr::Expr;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(Kind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetAttrExpr : Expr {
  GetAttrExpr(ExprPtr o, std::string n, int l)
      : Expr(Kind::kGetAttr, l), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct GetItemExpr : Expr {
  GetItemExpr(ExprPtr o, ExprPtr k, int l)
      : Expr(Kind::kGetItem, l), object(std::move(o)), key(std::move(k)) {}
  ExprPtr object, key;
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(Kind::kSlice, l) {}
  ExprPtr object, start, stop, step;  // null bounds are None
};

struct CallExpr : Expr {
  explicit CallExpr(int l) : Expr(Kind::kCall, l) {}
  ExprPtr callee;
  ArgList args;
};

// One filter application: name(args), applied to a value.
struct FilterCall {
  std::string name;
  FilterFn fn = nullptr;  // null: unknown (allowed inside if blocks) or not supported here
  ArgList args;
  int line = 0;
};

struct FilterExpr : Expr {
  explicit FilterExpr(int l) : Expr(Kind::kFilter, l) {}
  ExprPtr operand;
  FilterCall filter;
};

struct TestExpr : Expr {
  explicit TestExpr(int l) : Expr(Kind::kTest, l) {}
  ExprPtr operand;
  std::string name;
  TestFn fn = nullptr;
  ArgList args;
  bool negated = false;
};

struct UnaryExpr : Expr {  // kNeg, kPos, kNot
  UnaryExpr(Kind k, ExprPtr o, int l) : Expr(k, l), operand(std::move(o)) {}
  ExprPtr operand;
};

struct BinaryExpr : Expr {  // kBinary (arithmetic), kAnd, kOr
  BinaryExpr(Kind k, BinOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(k, l), op(o), lhs(std::move(a)), rhs(std::move(b)) {}
  BinOp op;
  ExprPtr lhs, rhs;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(int l) : Expr(Kind::kConcat, l) {}
  std::vector<ExprPtr> parts;
};

struct CompareExpr : Expr {  // a < b <= c chains like Python
  explicit CompareExpr(int l) : Expr(Kind::kCompare, l) {}
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> rest;
};

struct CondExpr : Expr {  // then if cond else otherwise
  explicit CondExpr(int l) : Expr(Kind::kCondExpr, l) {}
  ExprPtr cond, then, otherwise;  // no else: undefined
};

// Where an assignment (set, for, with) stores: a name, ns.attr, or a tuple of targets.
struct Target {
  enum class Kind { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
  int line = 0;
};

struct Stmt {
  enum class Kind {
    kText,
    kOutput,
    kIf,
    kFor,
    kSet,
    kSetBlock,
    kMacro,
    kCallBlock,
    kFilterBlock,
    kWith,
    kBreak,
    kContinue,
    kBlock,  // {% generation %}: renders its body in place
  };
  Stmt(Kind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  Kind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(std::string t, int l) : Stmt(Kind::kText, l), text(std::move(t)) {}
  std::string text;
};

struct OutputStmt : Stmt {
  OutputStmt(ExprPtr e, int l) : Stmt(Kind::kOutput, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(Kind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(Kind::kFor, l) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // for x in xs if cond
  Body body;
  Body otherwise;
  bool recursive = false;
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(Kind::kSet, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(Kind::kSetBlock, l) {}
  Target target;
  std::vector<FilterCall> filters;
  Body body;
};

struct MacroDef {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  // Jinja only accepts extra arguments when the body refers to varargs/kwargs/caller.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(Kind::kMacro, l) {}
  MacroDef def;
};

struct CallBlockStmt : Stmt {  // {% call(args) macro(...) %}body{% endcall %}
  explicit CallBlockStmt(int l) : Stmt(Kind::kCallBlock, l) {}
  std::unique_ptr<CallExpr> call;
  MacroDef caller;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(Kind::kFilterBlock, l) {}
  std::vector<FilterCall> filters;
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(Kind::kWith, l) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct BlockStmt : Stmt {
  explicit BlockStmt(int l) : Stmt(Kind::kBlock, l) {}
  Body body;
};

struct Template {
  Body body;
};

}  // namespace tandem::jinja
