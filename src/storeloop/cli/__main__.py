"""``python -m storeloop.cli``: the same as the ``storeloop`` command."""

import sys

from storeloop.cli.main import main

sys.exit(main())
