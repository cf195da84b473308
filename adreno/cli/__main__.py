"""`python -m adreno.cli ...`: how the farm starts the command on remote hosts (the same as the `adreno` script)."""

import sys

from .main import main

sys.exit(main())
