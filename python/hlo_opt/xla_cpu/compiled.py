"""What ``compile`` returns: :class:`Compiled`, jax's executable with the
chosen kernels, its decision and how it was made (``explain``), called as
``jax.jit(f)`` is; and the static arguments it was compiled for
(:class:`_Static`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from .space import _module_wide, options_of


class Compiled:
    """``jax.jit(f)`` compiled by jaxlib's own XLA:CPU with the kernels
    hlo-opt chose. Call it as ``f``: the same pytrees, scalars and donated
    buffers as ``jax.jit(f)`` (it is jax's own compiled executable)."""

    def __init__(self, executable, lowered, decision: dict[str, Any], notes: list[str],
                 measured: dict[str, Any] | None, onednn_ops: Sequence[str] = ()):
        self._exe = executable
        self._onednn = list(onednn_ops)
        self.lowered = lowered
        #: The pass's decision (chosen, options, reason, predictions, model, xla).
        self.decision = decision
        #: What the model's use deserves saying (another CPU than its own).
        self.notes = notes
        #: With ``measure``: the candidates measured, their ratios to the default.
        self.measured = measured

    @property
    def choice(self) -> str:
        """The candidate that runs: ``default`` (XLA's own choice), a
        module-wide candidate (``ynn:none``, ...), either followed by
        ``+onednn:N`` when N distinct dots and convolutions run on oneDNN."""
        return self.measured["chosen"] if self.measured else self.decision["chosen"]

    @property
    def options(self) -> dict[str, Any]:
        """The compile options it was compiled with."""
        return options_of(_module_wide(self.choice))

    @property
    def onednn(self) -> list[str]:
        """The signatures of the dots and convolutions that run on oneDNN."""
        return list(self._onednn)

    def explain(self) -> str:
        d = self.decision
        lines = [f"xla-cpu: model {d['model']} ({d['xla']}, trained on {d['trained_cpu']})"]
        if d.get("cached"):
            lines.append(f"xla-cpu: the choice kept in {d['cached']} (same module, jaxlib, CPU, model and "
                         "hlo-opt), not made again")
        if v := d.get("verified"):
            lines.append(f"xla-cpu: the models chose {v['model_choice']}: {v['model_reason']}")
            searched = set(v.get("searched", []))
            for name, r, st in zip(v["candidates"], v["ratio"], v["status"]):
                how = "searched" if name in searched else "verified"
                lines.append(f"  {how} {name:<32} " + (st if math.isnan(r) else f"x{r:.3f} of the default")
                             + ("" if st == "timed" or math.isnan(r) else f" ({st})"))
            for name, r in zip(v.get("contenders", []), v.get("final", [])):
                lines.append(f"  again    {name:<32} x{r:.3f} of the default")
            lines.append(f"xla-cpu: verified on these arguments, chose {d['chosen']}: {d['reason']}")
        else:
            lines.append(f"xla-cpu: chose {d['chosen']}: {d['reason']}")
        dots = d.get("onednn", [])
        if d.get("op_model"):
            sent = [x for x in dots if x["onednn"]]
            lines.append(f"xla-cpu: per-op model {d['op_model']}: {len(sent)} of {len(dots)} distinct dots and "
                         "convolutions to oneDNN")
            for x in sent:
                lines.append(f"  {x['signature']:<48} x{x['count']:<2} predicted {x['change_pct']:+.1f}% "
                             f"(needs {x['required_gain_pct']:.1f}%)")
        if self.measured:
            m = self.measured
            for name, r in zip(m["candidates"], m["ratio"]):
                lines.append(f"  measured {name:<24} x{r:.3f} of the default")
            lines.append(f"xla-cpu: measured and kept {m['chosen']} ({m['why']})")
        return "\n".join(lines + self.notes)

    #: The static arguments it was compiled for (``jit_options``'
    #: ``static_argnums`` / ``static_argnames``), if any.
    static: "_Static | None" = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.static is not None:
            args, kwargs = self.static.dynamic(args, kwargs)
        return self._exe(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class _Static:
    """The arguments ``jax.jit(f, static_argnums=..., static_argnames=...)``
    compiles in: jax's executable takes the others only."""

    nums: frozenset
    names: frozenset
    #: ``(position or name, value)`` of each, as compiled.
    values: tuple

    @classmethod
    def of(cls, f, jit_options, args, kwargs) -> "_Static | None":
        import inspect

        opts = jit_options or {}
        nums, names = opts.get("static_argnums"), opts.get("static_argnames")
        if nums is None and names is None:
            return None
        nums = {nums} if isinstance(nums, int) else set(nums or ())
        names = {names} if isinstance(names, str) else set(names or ())
        nums = {i + len(args) if i < 0 else i for i in nums}
        try:
            params = inspect.signature(f).parameters.values()
        except (TypeError, ValueError):  # no signature: the numbers and names as given
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for i, name in enumerate(positional):
            if name in names:
                nums.add(i)
            if i in nums:
                names.add(name)
        static = cls(frozenset(nums), frozenset(names), ())
        return dataclasses.replace(static, values=static._seen(args, kwargs))

    def _seen(self, args, kwargs) -> tuple:
        return (tuple((i, args[i]) for i in sorted(self.nums) if i < len(args))
                + tuple((k, kwargs[k]) for k in sorted(self.names) if k in kwargs))

    def dynamic(self, args, kwargs) -> tuple[tuple, dict]:
        """``args`` and ``kwargs`` without the static ones, which must be
        those compiled for."""
        seen = self._seen(args, kwargs)
        if seen != self.values:
            raise ValueError(f"hlo_opt: compiled for the static arguments {_show(self.values)}, called with "
                             f"{_show(seen)}: compile again for these (jax.jit would retrace)")
        return (tuple(a for i, a in enumerate(args) if i not in self.nums),
                {k: v for k, v in kwargs.items() if k not in self.names})


def _show(values) -> str:
    return ", ".join(f"{'argument ' if isinstance(k, int) else ''}{k}={v!r}" for k, v in values) or "none"
