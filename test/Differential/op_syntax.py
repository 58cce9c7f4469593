# ===- op_syntax.py - the custom syntax of the moe ops, for test generators -=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""One printer of every moe op in its custom syntax, shared by the test
generators (test/Differential/run.py, test/GPU/gpu_cases.py).

    Syntax(f32=..., explicit=...).op(op, attrs, v, t, lhs, rtys)

`v` / `t` map operand names (the op's operand names in the op reference:
"x", "logits", "bias", "w_up_bias", "rhs_scale", "w_up_scale", ...) to SSA
names and types; `lhs` is the results' SSA names, `rtys` their types.
`attrs` holds the op's attributes by name. With `explicit` every routing /
GLU / weight-format attribute present in `attrs` is printed, default values
included (the differential tester exercises the parser with them);
otherwise only those that differ from the defaults. `f32` formats an f32
attribute value.
"""

__all__ = ["Syntax", "attr_dict"]


def attr_dict(items):
    items = [(k, v) for k, v in items if v is not None]
    if not items:
        return ""
    return " {" + ", ".join("%s = %s" % kv for kv in items) + "}"


def _bool(b):
    return "true" if b else "false"


class Syntax:
    def __init__(self, f32, explicit=False):
        self.f32 = f32
        self.explicit = explicit

    def _given(self, a, key, default):
        """Whether attribute `key` is printed."""
        if self.explicit:
            return key in a
        return a.get(key, default) != default

    def route_items(self, a):
        items = []
        if self._given(a, "normalize", False):
            items.append(("normalize", _bool(a["normalize"])))
        if self._given(a, "n_group", 1) or self._given(a, "topk_group", 1):
            items.append(("n_group", "%d : i64" % a.get("n_group", 1)))
            items.append(("topk_group", "%d : i64" % a.get("topk_group", 1)))
        if self._given(a, "group_score", "max"):
            items.append(("group_score", "#moe.group_score<%s>" % a["group_score"]))
        if self._given(a, "scaling", 1.0):
            items.append(("scaling", self.f32(a["scaling"])))
        return items

    def format_items(self, a):
        """weight_format / scale_fmt (absent: plain / f32)."""
        items = []
        if self._given(a, "weight_format", "plain"):
            items.append(("weight_format", "#moe.weight_format<%s>" % a["weight_format"]))
        if self._given(a, "scale_fmt", "f32"):
            items.append(("scale_fmt", "#moe.scale_fmt<%s>" % a["scale_fmt"]))
        return items

    def glu_items(self, a):
        items = []
        for name, default in (("alpha", 1.0), ("limit", None), ("up_bias", 0.0)):
            if self._given(a, name, default):
                items.append((name, self.f32(a[name])))
        return items

    def op(self, op, a, v, t, lhs, rtys):
        """The op `op` (without the `moe.` prefix) in custom syntax."""
        rt = ", ".join(rtys)

        def opt(kw, name):
            return " %s(%s : %s)" % (kw, v[name], t[name]) if name in v else ""

        if op == "topk":
            return "%s = moe.topk %s k = %d : %s -> %s" % (lhs, v["input"], a["k"], t["input"], rt)
        if op in ("route", "route_dispatch"):
            return "%s = moe.%s %s%s k = %d scoring = %s%s : %s -> %s" % (
                lhs,
                op,
                v["logits"],
                opt("bias", "bias"),
                a["k"],
                a["scoring"],
                attr_dict(self.route_items(a)),
                t["logits"],
                rt,
            )
        if op in ("cumsum", "dispatch"):
            return "%s = moe.%s %s num_experts = %d : %s -> %s" % (
                lhs,
                op,
                v["indices"],
                a["num_experts"],
                t["indices"],
                rt,
            )
        if op == "get_indices":
            return "%s = moe.get_indices %s, %s : %s, %s -> %s" % (
                lhs,
                v["cumsum"],
                v["indices"],
                t["cumsum"],
                t["indices"],
                rt,
            )
        if op == "get_indptr":
            inclusive = []
            if self._given(a, "inclusive", False):
                inclusive = [("inclusive", _bool(a["inclusive"]))]
            return "%s = moe.get_indptr %s num_experts = %d%s : %s -> %s" % (
                lhs,
                v["cumsum"],
                a["num_experts"],
                attr_dict(inclusive),
                t["cumsum"],
                rt,
            )
        if op in ("gather", "scatter"):
            return "%s = moe.%s %s[%s] : %s, %s -> %s" % (
                lhs,
                op,
                v["input"],
                v["indices"],
                t["input"],
                t["indices"],
                rt,
            )
        if op == "grouped_matmul":
            items = [("transpose_rhs", "true")] if a.get("transpose_rhs") else []
            return "%s = moe.grouped_matmul %s, %s offsets(%s : %s)%s%s%s : %s, %s -> %s" % (
                lhs,
                v["lhs"],
                v["rhs"],
                v["offsets"],
                t["offsets"],
                opt("bias", "bias"),
                opt("scales", "rhs_scale"),
                attr_dict(items + self.format_items(a)),
                t["lhs"],
                t["rhs"],
                rt,
            )
        if op == "grouped_matmul_wgrad":

            def rows(name):  # an operand, through its gather if any
                g = name + "_gather"
                return "%s[%s : %s]" % (v[name], v[g], t[g]) if g in v else v[name]

            return "%s = moe.grouped_matmul_wgrad %s, %s offsets(%s : %s)%s : %s, %s -> %s" % (
                lhs,
                rows("lhs"),
                rows("rhs"),
                v["offsets"],
                t["offsets"],
                opt("accumulate", "acc"),
                t["lhs"],
                t["rhs"],
                rt,
            )
        if op == "route_grad":
            items = [("normalize", "true")] if a.get("normalize") else []
            if "scaling" in a:
                items.append(("scaling", self.f32(a["scaling"])))
            return "%s = moe.route_grad %s, %s, %s scoring = %s%s : %s, %s, %s -> %s" % (
                lhs,
                v["grad"],
                v["logits"],
                v["indices"],
                a["scoring"],
                attr_dict(items),
                t["grad"],
                t["logits"],
                t["indices"],
                rt,
            )
        if op == "glu":
            return "%s = moe.glu %s %s %s%s : %s -> %s" % (
                lhs,
                v["input"],
                a["activation"],
                a["layout"],
                attr_dict(self.glu_items(a)),
                t["input"],
                rt,
            )
        if op == "glu_grad":
            return "%s = moe.glu_grad %s, %s %s %s%s : %s, %s -> %s" % (
                lhs,
                v["grad"],
                v["input"],
                a["activation"],
                a["layout"],
                attr_dict(self.glu_items(a)),
                t["grad"],
                t["input"],
                rt,
            )
        if op == "combine_grad":
            return "%s = moe.combine_grad %s%s : %s -> %s" % (
                lhs,
                v["grad"],
                opt("weights", "weights"),
                t["grad"],
                rt,
            )
        if op == "combine":
            return "%s = moe.combine %s%s : %s -> %s" % (
                lhs,
                v["input"],
                opt("weights", "weights"),
                t["input"],
                rt,
            )
        if op == "indices_to_multihot":
            return "%s = moe.indices_to_multihot %s, %s num_experts = %d : %s, %s -> %s" % (
                lhs,
                v["indices"],
                v["probs"],
                a["num_experts"],
                t["indices"],
                t["probs"],
                rt,
            )
        if op == "multihot_to_indices":
            return "%s = moe.multihot_to_indices %s, %s k = %d : %s, %s -> %s" % (
                lhs,
                v["probs_multihot"],
                v["position_map"],
                a["k"],
                t["probs_multihot"],
                t["position_map"],
                rt,
            )
        if op == "expert_gemm":
            g = "[%s : %s]" % (v["gather"], t["gather"]) if "gather" in v else ""
            items = []
            if a.get("transpose_rhs"):
                items.append(("transpose_rhs", "true"))
            if a.get("activation"):
                items.append(("activation", "#moe.activation<%s>" % a["activation"]))
                items.append(("layout", "#moe.glu_layout<%s>" % a["layout"]))
                items += self.glu_items(a)
            items += self.format_items(a)
            return "%s = moe.expert_gemm %s%s, %s offsets(%s : %s)%s%s%s%s%s : %s, %s -> %s" % (
                lhs,
                v["lhs"],
                g,
                v["rhs"],
                v["offsets"],
                t["offsets"],
                opt("bias", "bias"),
                opt("scatter", "scatter"),
                opt("scale", "scale"),
                opt("scales", "rhs_scale"),
                attr_dict(items),
                t["lhs"],
                t["rhs"],
                rt,
            )
        if op == "row_dot":
            return "%s = moe.row_dot %s, %s%s : %s, %s -> %s" % (
                lhs,
                v["lhs"],
                v["rhs"],
                opt("accumulate", "acc"),
                t["lhs"],
                t["rhs"],
                rt,
            )
        if op in ("ffn", "ffn_train", "ffn_grad"):
            items = self.route_items(a) + self.glu_items(a)
            if a.get("transpose_weights"):
                items.append(("transpose_weights", "true"))
            items += self.format_items(a)
            groups = ""
            if "w_up_bias" in v:
                groups = " expert_bias(%s, %s : %s, %s)" % (
                    v["w_up_bias"],
                    v["w_down_bias"],
                    t["w_up_bias"],
                    t["w_down_bias"],
                )
            if "w_up_scale" in v:
                groups += " scales(%s, %s : %s, %s)" % (
                    v["w_up_scale"],
                    v["w_down_scale"],
                    t["w_up_scale"],
                    t["w_down_scale"],
                )
            if "h" in v:  # moe.ffn_grad's saved form (moe.ffn_train's results)
                groups += " saved(%s, %s, %s : %s, %s, %s)" % (
                    v["h"],
                    v["weights"],
                    v["indices"],
                    t["h"],
                    t["weights"],
                    t["indices"],
                )
            # moe.ffn_grad takes the upstream gradient dy first.
            names = (["dy"] if op == "ffn_grad" else []) + ["x", "logits", "w_up", "w_down"]
            return (
                "%s = moe.%s %s%s%s k = %d scoring = %s activation = %s layout = %s%s : %s -> %s"
                % (
                    lhs,
                    op,
                    ", ".join(v[n] for n in names),
                    opt("bias", "bias"),
                    groups,
                    a["k"],
                    a["scoring"],
                    a["activation"],
                    a["layout"],
                    attr_dict(items),
                    ", ".join(t[n] for n in names),
                    rt,
                )
            )
        raise KeyError(op)
