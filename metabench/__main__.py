"""``python -m metabench``: the ``metabench`` command, for a shell that has no ``metabench`` on
its ``PATH`` (a recorded command names the Python it ran with, so it runs outside the venv)."""

import sys

from metabench.cli import main

if __name__ == "__main__":
    sys.exit(main())
