import sys

from execengine.cli import main

sys.exit(main())
