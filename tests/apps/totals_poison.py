"""Version 2 of the --totals job, variant poison (see totals_variants.py)."""

import sys

from totals_variants import main  # this folder is on the path of a script run from it

if __name__ == "__main__":
    sys.exit(main("poison", sys.argv[1:]))
