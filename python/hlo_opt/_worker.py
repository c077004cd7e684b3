"""The PJRT worker process (``hlo-opt-pjrt-worker``): XLA compiles and runs
here, so that an XLA abort ends this process and not the caller's."""

import sys


def main() -> None:
    from hlo_opt import _native

    sys.exit(_native.pjrt_worker_main())


if __name__ == "__main__":
    main()
