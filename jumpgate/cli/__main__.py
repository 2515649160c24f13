"""`python -m jumpgate.cli`: the same as the `jumpgate` command."""
import sys

from . import main

sys.exit(main())
