import sys

from hive_lab.cli import main

sys.exit(main())
