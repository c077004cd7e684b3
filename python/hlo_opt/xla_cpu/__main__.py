"""``python -m hlo_opt.xla_cpu``: :func:`hlo_opt.xla_cpu.cli.main`."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
