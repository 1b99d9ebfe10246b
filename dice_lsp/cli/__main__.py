import sys

from dice_lsp.cli import main

sys.exit(main())
