"""Put the example adapter on the path (a real adapter is an installed distribution instead)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
