import sys

from troubleshoot.cli import main

sys.exit(main())
