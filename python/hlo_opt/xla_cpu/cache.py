"""The choices ``compile`` verified or measured, kept on disk
(:class:`ChoiceCache`): the same program compiled again takes its choice
without deciding, compiling candidates or timing them."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

from .. import onednn
from .compiled import Compiled
from .measuring import _compile
from .space import _module_wide, fingerprint, options_of
from .store import _atomic_write


class ChoiceCache:
    """The choices ``compile`` verified or measured, one JSON file per key
    in a folder: ``xla_cpu-KEY.json`` holds the choice (candidate and oneDNN
    ops), the decision with its ``verified`` record and the measurement.
    The key is a SHA-256 of the module jax lowered (without donation), the
    jaxlib version, the CPU (model, ISA, cores), the model (built-in, or
    the file's SHA-256) and this build of hlo-opt (its version and native
    library's size and time): any of them changed, the choice is made
    again. A file that does not read as such a choice is ignored with a
    warning and written anew; one that cannot be written is a warning."""

    FORMAT = 1

    def __init__(self, folder: Path, key: str):
        self.path = folder / f"xla_cpu-{key[:32]}.json"
        self.key = key

    @classmethod
    def of(cls, cache_dir, plain, model) -> "ChoiceCache | None":
        folder = cache_dir if cache_dir is not None else os.environ.get("HLO_OPT_CACHE_DIR")
        if not folder:
            return None
        import importlib.metadata

        from .. import _native

        # MLIR bytecode: the whole module, constants included, and several
        # times faster to write than its text.
        module = io.BytesIO()
        plain.compiler_ir().operation.write_bytecode(module)
        native = os.stat(_native.__file__)
        if model is None:
            model_id = "built-in"
        else:
            try:
                model_id = hashlib.sha256(Path(model).read_bytes()).hexdigest()
            except OSError:
                model_id = str(model)  # a built-in name, or an error the decision reports
        fp = fingerprint()
        parts = dict(module=hashlib.sha256(module.getvalue()).hexdigest(), jaxlib=fp["jaxlib"], cpu=fp["cpu"],
                     isa=fp["isa"], cores=fp["cores"], model=model_id,
                     hlo_opt=importlib.metadata.version("hlo_opt"), native=[native.st_size, native.st_mtime_ns],
                     format=cls.FORMAT)
        key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        return cls(Path(folder).expanduser(), key)

    def compiled(self, lowered) -> "Compiled | None":
        """The cached choice compiled for ``lowered``; None when there is
        none (or it is unusable: then a warning says why)."""
        import warnings

        if not self.path.exists():
            return None
        try:
            entry = json.loads(self.path.read_text())
            if entry.get("format") != self.FORMAT or entry.get("key") != self.key:
                raise ValueError("another key or format")
            choice, sigs = entry["choice"], tuple(entry["onednn"])
            if not isinstance(choice, str) or not all(isinstance(x, str) for x in sigs):
                raise ValueError("not a choice")
            opts = options_of(_module_wide(choice))
            if sigs and (why := onednn.supported()):
                raise ValueError(why)
            decision, measured = dict(entry["decision"]), entry["measured"]
        except Exception as e:  # noqa: BLE001 - any unreadable entry is a miss
            warnings.warn(f"xla-cpu: ignoring the cached choice {self.path}: {e}", stacklevel=3)
            return None
        if choice == "default":
            exe = lowered.compile()  # fails as jax.jit's own compile would
        else:
            try:
                exe = _compile(lowered, opts, sigs)
            except Exception as e:  # noqa: BLE001 - XLA's errors have no common type
                # Kept by a run whose XLA took it: decide again rather than fail.
                warnings.warn(f"xla-cpu: the cached choice {choice} of {self.path} no longer compiles "
                              f"({type(e).__name__}: {e}); choosing again", stacklevel=3)
                return None
        decision["cached"] = str(self.path)
        return Compiled(exe, lowered, decision, [], measured, sigs)

    def store(self, compiled: "Compiled") -> None:
        """Keeps ``compiled``'s choice when it was verified or measured."""
        import warnings

        if "verified" not in compiled.decision and not compiled.measured:
            return
        entry = dict(format=self.FORMAT, key=self.key, choice=compiled.choice, onednn=compiled.onednn,
                     decision=compiled.decision, measured=compiled.measured)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.path, lambda tmp: Path(tmp).write_text(json.dumps(entry, indent=1)))
        except OSError as e:
            warnings.warn(f"xla-cpu: could not keep the choice in {self.path}: {e}", stacklevel=3)
