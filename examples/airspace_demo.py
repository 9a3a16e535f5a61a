"""20 airspace notices -> 3D no-fly zones -> zones.geojson, airspace.png and a drone route check.

    python examples/airspace_demo.py [--model DIR] [--out DIR] [--batch-size N]

The demo itself lives in the package (clover_struct.demo) so an installed clover-struct
can run it too; the figure needs matplotlib (pip install 'clover-struct[demo]').
"""

import sys

from clover_struct.demo import main

if __name__ == "__main__":
    sys.exit(main())
