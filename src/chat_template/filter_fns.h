// The built-in filter functions, grouped by file: filters_text.cpp (strings, tojson),
// filters_number.cpp (int, float, round, abs), filters_sequence.cpp (lists, dicts, map/select).
// filters.cpp maps their Jinja names to them.
#pragma once

#include "chat_template/ast.h"

namespace tandem::jinja::filters {

Value f_upper(Interp& in, const Value& v, const CallArgs& a);
Value f_lower(Interp& in, const Value& v, const CallArgs& a);
Value f_title(Interp& in, const Value& v, const CallArgs& a);
Value f_capitalize(Interp& in, const Value& v, const CallArgs& a);
Value f_trim(Interp& in, const Value& v, const CallArgs& a);
Value f_replace(Interp& in, const Value& v, const CallArgs& a);
Value f_string(Interp& in, const Value& v, const CallArgs& a);
Value f_safe(Interp& in, const Value& v, const CallArgs& a);
Value f_escape(Interp& in, const Value& v, const CallArgs& a);
Value f_forceescape(Interp& in, const Value& v, const CallArgs& a);
Value f_wordcount(Interp& in, const Value& v, const CallArgs& a);
Value f_center(Interp& in, const Value& v, const CallArgs& a);
Value f_indent(Interp& in, const Value& v, const CallArgs& a);
Value f_truncate(Interp& in, const Value& v, const CallArgs& a);
Value f_format(Interp& in, const Value& v, const CallArgs& a);
Value f_int(Interp& in, const Value& v, const CallArgs& a);
Value f_float(Interp& in, const Value& v, const CallArgs& a);
Value f_abs(Interp& in, const Value& v, const CallArgs& a);
Value f_round(Interp& in, const Value& v, const CallArgs& a);
Value f_length(Interp& in, const Value& v, const CallArgs& a);
Value f_first(Interp& in, const Value& v, const CallArgs& a);
Value f_last(Interp& in, const Value& v, const CallArgs& a);
Value f_list(Interp& in, const Value& v, const CallArgs& a);
Value f_join(Interp& in, const Value& v, const CallArgs& a);
Value f_reverse(Interp& in, const Value& v, const CallArgs& a);
Value f_items(Interp& in, const Value& v, const CallArgs& a);
Value f_dictsort(Interp& in, const Value& v, const CallArgs& a);
Value f_sort(Interp& in, const Value& v, const CallArgs& a);
Value f_unique(Interp& in, const Value& v, const CallArgs& a);
Value f_min(Interp& in, const Value& v, const CallArgs& a);
Value f_max(Interp& in, const Value& v, const CallArgs& a);
Value f_sum(Interp& in, const Value& v, const CallArgs& a);
Value f_batch(Interp& in, const Value& v, const CallArgs& a);
Value f_slice(Interp& in, const Value& v, const CallArgs& a);
Value f_default(Interp& in, const Value& v, const CallArgs& a);
Value f_attr(Interp& in, const Value& v, const CallArgs& a);
Value f_map(Interp& in, const Value& v, const CallArgs& a);
Value f_select(Interp& in, const Value& v, const CallArgs& a);
Value f_reject(Interp& in, const Value& v, const CallArgs& a);
Value f_selectattr(Interp& in, const Value& v, const CallArgs& a);
Value f_rejectattr(Interp& in, const Value& v, const CallArgs& a);
Value f_groupby(Interp& in, const Value& v, const CallArgs& a);
Value f_tojson(Interp& in, const Value& v, const CallArgs& a);

}  // namespace tandem::jinja::filters
