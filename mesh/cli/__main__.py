"""``python -m mesh.cli`` runs the ``mesh`` command."""

import sys

from mesh.cli import main

sys.exit(main())
