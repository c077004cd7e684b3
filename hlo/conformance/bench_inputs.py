"""What the benchmarks against XLA share: the default modules (BERT-base
post-optimisation and the TpuGraphs unet_3d module from ../shared) and the
build of our side's timing example."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FILES = [
    os.path.join(ROOT, "..", "shared", "corpus", "jax", "bert_base.post.hlo"),
    os.path.join(ROOT, "..", "shared", "data", "tpugraphs", "hlo", "layout_xla_default_valid_unet_3d.4x4.bf16.hlo"),
]


def add_arguments(ap) -> None:
    ap.add_argument("--speed-bin", default=None, help="our timing example (default: built with cargo)")
    ap.add_argument("files", nargs="*")


def inputs(args, example):
    """(files, binary): the modules to time (none when ../shared is absent and
    none were given) and the path of the hlo crate's example `example`,
    built with cargo unless --speed-bin names one."""
    files = args.files or [f for f in DEFAULT_FILES if os.path.exists(f)]
    binary = args.speed_bin
    if files and binary is None:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        binary = os.path.join(target, "release", "examples", example)
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "hlo", "--example", example],
                       cwd=ROOT, check=True)
    return files, binary
