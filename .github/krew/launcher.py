"""The kubectl-specserve binary's entry point (PyInstaller builds it for krew; pip users get the same command from
the wheel's console script)."""

import sys

from specserve.plugin.main import main

sys.exit(main())
