import sys

from lmgym.cli import main

sys.exit(main())
