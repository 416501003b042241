#include "compiler/arith/linear_form.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "compiler/arith/analyzer_state.h"
#include "compiler/arith/const_fold.h"
#include "compiler/ir/structural.h"

namespace kiln::arith::detail {

namespace {

using namespace ir;

// Forms with more terms are left alone: rebuilding them costs more than it can save.
constexpr size_t kMaxTerms = 64;

bool checked_mul(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
bool checked_add(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

Expr term_expr(const Expr &atom, int64_t coeff, DataType t) {
  if (coeff == 1) return atom;
  return MulNode::make(atom, IntImmNode::make(t, coeff));
}

}  // namespace

void LinearForm::add_term(const Expr &atom, int64_t coeff) {
  if (!ok || coeff == 0) return;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (structural_equal(terms[i].atom, atom)) {
      int64_t c;
      if (!checked_add(terms[i].coeff, coeff, &c)) {
        ok = false;
        return;
      }
      if (c == 0) {
        terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        terms[i].coeff = c;
      }
      return;
    }
  }
  if (terms.size() >= kMaxTerms) {
    ok = false;
    return;
  }
  terms.push_back(LinearTerm{atom, coeff});
}

void LinearForm::add_constant(int64_t c) {
  if (ok && !checked_add(constant, c, &constant)) ok = false;
}

void LinearForm::add(const LinearForm &o, int64_t scale) {
  if (!o.ok) ok = false;
  for (const auto &t : o.terms) {
    int64_t c;
    if (!checked_mul(t.coeff, scale, &c)) {
      ok = false;
      return;
    }
    add_term(t.atom, c);
  }
  int64_t c;
  if (!checked_mul(o.constant, scale, &c)) {
    ok = false;
    return;
  }
  add_constant(c);
}

void LinearForm::add_scaled_self(int64_t scale) {
  for (auto &t : terms) {
    if (!checked_mul(t.coeff, scale, &t.coeff)) ok = false;
  }
  if (!checked_mul(constant, scale, &constant)) ok = false;
}

void collect_linear(const Expr &e, int64_t scale, LinearForm *out) {
  if (!out->ok || scale == 0) return;
  if (auto v = scalar_int(e)) {
    int64_t c;
    if (!checked_mul(*v, scale, &c)) {
      out->ok = false;
      return;
    }
    out->add_constant(c);
    return;
  }
  if (const auto *op = e.as<AddNode>()) {
    collect_linear(op->a, scale, out);
    collect_linear(op->b, scale, out);
    return;
  }
  if (const auto *op = e.as<SubNode>()) {
    int64_t neg;
    if (!checked_mul(scale, -1, &neg)) {
      out->ok = false;
      return;
    }
    collect_linear(op->a, scale, out);
    collect_linear(op->b, neg, out);
    return;
  }
  if (const auto *op = e.as<MulNode>()) {
    auto cb = scalar_int(op->b);
    auto ca = scalar_int(op->a);
    if (cb || ca) {
      int64_t s;
      if (!checked_mul(scale, cb ? *cb : *ca, &s)) {
        out->ok = false;
        return;
      }
      collect_linear(cb ? op->a : op->b, s, out);
      return;
    }
  }
  out->add_term(e, scale);
}

namespace {

// The dividend and divisor of a floor (floor = true) or truncating division / modulo atom.
bool split_div_mod(const Expr &e, bool div, bool *floor, Expr *x, int64_t *c) {
  const Expr *a = nullptr, *b = nullptr;
  if (div) {
    if (const auto *op = e.as<FloorDivNode>()) a = &op->a, b = &op->b, *floor = true;
    if (const auto *op = e.as<DivNode>()) a = &op->a, b = &op->b, *floor = false;
  } else {
    if (const auto *op = e.as<FloorModNode>()) a = &op->a, b = &op->b, *floor = true;
    if (const auto *op = e.as<ModNode>()) a = &op->a, b = &op->b, *floor = false;
  }
  if (!a) return false;
  auto v = scalar_int(*b);
  if (!v || *v == 0) return false;
  *x = *a;
  *c = *v;
  return true;
}

// Replaces div(x, c) * c * m by x * m - mod(x, c) * m when that leaves fewer terms.
void substitute_div(LinearForm *f) {
  bool changed = true;
  while (changed && f->ok) {
    changed = false;
    for (size_t i = 0; i < f->terms.size() && !changed; ++i) {
      bool floor_kind;
      Expr x;
      int64_t c;
      if (!split_div_mod(f->terms[i].atom, true, &floor_kind, &x, &c)) continue;
      const int64_t k = f->terms[i].coeff;
      if (c == -1 || k % c != 0) continue;
      // div(x, c) * c * m == x * m - mod(x, c) * m: worth it when terms of x cancel.
      const int64_t m = k / c;
      if (m == INT64_MIN) continue;
      const Expr ce = IntImmNode::make(x.type(), c);
      const Expr mod = floor_kind ? FloorModNode::make(x, ce) : ModNode::make(x, ce);
      LinearForm g(f->type);
      for (size_t n = 0; n < i; ++n) g.terms.push_back(f->terms[n]);
      g.add_term(mod, -m);
      for (size_t n = i + 1; n < f->terms.size(); ++n) g.add_term(f->terms[n].atom, f->terms[n].coeff);
      g.add_constant(f->constant);
      collect_linear(x, m, &g);
      if (g.ok && g.terms.size() < f->terms.size()) {
        *f = g;
        changed = true;
      }
    }
  }
}

}  // namespace

void merge_div_mod(LinearForm *f) {
  bool changed = true;
  while (changed && f->ok) {
    changed = false;
    for (size_t i = 0; i < f->terms.size() && !changed; ++i) {
      bool floor_div_kind;
      Expr x;
      int64_t c;
      if (!split_div_mod(f->terms[i].atom, true, &floor_div_kind, &x, &c)) continue;
      const int64_t k = f->terms[i].coeff;
      if (c == -1) continue;
      for (size_t j = 0; j < f->terms.size(); ++j) {
        bool floor_mod_kind;
        Expr y;
        int64_t d;
        if (!split_div_mod(f->terms[j].atom, false, &floor_mod_kind, &y, &d)) continue;
        if (floor_mod_kind != floor_div_kind || d == -1 || k % d != 0 || f->terms[j].coeff != k / d) continue;
        if (d == c) {
          if (!structural_equal(x, y)) continue;
        } else {
          // The index of a fused loop: y = div(x, c1) and div(x, c1 * d) == div(y, d) for
          // positive divisors (floor and truncating alike).
          bool floor_inner;
          Expr z;
          int64_t c1;
          if (d <= 0 || !split_div_mod(y, true, &floor_inner, &z, &c1) || floor_inner != floor_div_kind || c1 <= 0 ||
              c1 > INT64_MAX / d || c1 * d != c || !structural_equal(x, z)) {
            continue;
          }
        }
        // div(y, d) * d * m + mod(y, d) * m == y * m
        // The terms of y * m take the place of the first of the pair.
        LinearForm merged(f->type);
        const size_t first = std::min(i, j);
        for (size_t n = 0; n < first; ++n) merged.terms.push_back(f->terms[n]);
        collect_linear(y, k / d, &merged);
        for (size_t n = first + 1; n < f->terms.size(); ++n) {
          if (n != i && n != j) merged.add_term(f->terms[n].atom, f->terms[n].coeff);
        }
        merged.add_constant(f->constant);
        *f = merged;
        changed = true;
        break;
      }
    }
  }
  substitute_div(f);
}

LinearForm linear_form(const Expr &e) {
  LinearForm f(e.type());
  collect_linear(e, 1, &f);
  merge_div_mod(&f);
  return f;
}

bool representable(const LinearForm &f) {
  if (!f.ok) return false;
  // A lone constant is a literal of the type; otherwise it is added or subtracted by magnitude.
  if (f.terms.empty()) return f.constant >= int_type_min(f.type) && f.constant <= int_type_max(f.type);
  const int64_t hi = int_type_max(f.type);
  auto fits = [hi](int64_t v) { return v != INT64_MIN && std::llabs(v) <= hi; };
  for (const auto &t : f.terms) {
    if (!fits(t.coeff)) return false;
  }
  return fits(f.constant);
}

Expr build_linear(const LinearForm &f) {
  const DataType t = f.type;
  Expr res;
  for (const auto &term : f.terms) {
    if (term.coeff <= 0) continue;
    Expr e = term_expr(term.atom, term.coeff, t);
    res = res.defined() ? AddNode::make(res, e) : e;
  }
  bool constant_used = false;
  bool has_negative = false;
  for (const auto &term : f.terms) has_negative = has_negative || term.coeff < 0;
  if (!res.defined()) {
    if (!has_negative) return IntImmNode::make(t, f.constant);
    if (f.constant > 0) {
      res = IntImmNode::make(t, f.constant);
      constant_used = true;
    } else {
      res = IntImmNode::make(t, 0);
    }
  }
  for (const auto &term : f.terms) {
    if (term.coeff >= 0) continue;
    res = SubNode::make(res, term_expr(term.atom, -term.coeff, t));
  }
  if (!constant_used && f.constant > 0) res = AddNode::make(res, IntImmNode::make(t, f.constant));
  if (!constant_used && f.constant < 0) res = SubNode::make(res, IntImmNode::make(t, -f.constant));
  return res;
}

namespace {

bool term_matches(const Expr &e, const Expr &atom, int64_t coeff) {
  if (coeff == 1) return structural_equal(e, atom);
  const auto *m = e.as<MulNode>();
  if (!m) return false;
  const auto *c = m->b.as<IntImmNode>();
  return c && c->value == coeff && structural_equal(m->a, atom);
}

bool const_matches(const Expr &e, int64_t v) {
  const auto *c = e.as<IntImmNode>();
  return c && c->value == v;
}

}  // namespace

bool linear_matches(const LinearForm &f, const Expr &e) {
  if (!e.defined() || e.type() != f.type) return false;
  // Walks the chain that build_linear makes, from its last piece back to its head.
  bool has_positive = false, has_negative = false;
  for (const auto &t : f.terms) {
    has_positive = has_positive || t.coeff > 0;
    has_negative = has_negative || t.coeff < 0;
  }
  if (!has_positive && !has_negative) return const_matches(e, f.constant);
  const bool constant_in_head = !has_positive && f.constant > 0;
  Expr cur = e;
  if (!constant_in_head && f.constant != 0) {
    if (f.constant > 0) {
      const auto *a = cur.as<AddNode>();
      if (!a || !const_matches(a->b, f.constant)) return false;
      cur = a->a;
    } else {
      const auto *s = cur.as<SubNode>();
      if (!s || !const_matches(s->b, -f.constant)) return false;
      cur = s->a;
    }
  }
  for (auto it = f.terms.rbegin(); it != f.terms.rend(); ++it) {
    if (it->coeff >= 0) continue;
    const auto *s = cur.as<SubNode>();
    if (!s || !term_matches(s->b, it->atom, -it->coeff)) return false;
    cur = s->a;
  }
  if (!has_positive) return const_matches(cur, constant_in_head ? f.constant : 0);
  const LinearTerm *head = nullptr;
  for (const auto &t : f.terms) {
    if (t.coeff > 0) {
      head = &t;
      break;
    }
  }
  for (auto it = f.terms.rbegin(); it != f.terms.rend(); ++it) {
    if (it->coeff <= 0 || &*it == head) continue;
    const auto *a = cur.as<AddNode>();
    if (!a || !term_matches(a->b, it->atom, it->coeff)) return false;
    cur = a->a;
  }
  return term_matches(cur, head->atom, head->coeff);
}

ConstIntBound linear_bound(const AnalyzerState &st, const LinearForm &f) {
  ConstIntBound r;
  r.min_value = r.max_value = f.constant;
  for (const auto &t : f.terms) {
    ConstIntBound b = bound_of(st, t.atom);
    const int64_t x = sat_mul(b.min_value, t.coeff), y = sat_mul(b.max_value, t.coeff);
    r.min_value = sat_add(r.min_value, std::min(x, y));
    r.max_value = sat_add(r.max_value, std::max(x, y));
  }
  return r;
}

}  // namespace kiln::arith::detail
