import sys

from kiln.launch import main

sys.exit(main())
