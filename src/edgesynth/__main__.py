import sys

from edgesynth.cli import main

sys.exit(main())
