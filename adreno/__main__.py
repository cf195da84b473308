"""`python -m adreno ...`: the `adreno` command where no script is installed (the phone box's arm64 python runs the
checkout from PYTHONPATH, tools/phonebox.sh)."""

import sys

from .cli.main import main

sys.exit(main())
